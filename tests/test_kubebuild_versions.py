"""Another Kubernetes release for ``upgrade-k8s`` (``python -m ichor.kubebuild --version 1.30.2``),
with the stand-in ``go`` of ``tests/test_kubebuild.py``: only the binaries an upgrade needs are
built, with that release's commit and date stamped in, cached beside v1.30.3 and never built
unless asked; an unknown release is refused with the ones known.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_kubebuild import NEEDS_IMAGE_TOOLS, fake_go  # noqa: F401 - fake_go is the fixture

from ichor.kubebuild import (
    KUBERNETES_RELEASES,
    UPGRADE_BINARIES,
    KubeBuildError,
    artifacts_root,
    ensure_kubernetes,
    kubernetes_component,
    kubernetes_images,
)
from ichor.kubebuild.__main__ import main


def test_another_release_builds_only_what_an_upgrade_needs_with_its_own_stamp() -> None:
    component = kubernetes_component("1.30.2")
    assert component.version == "v1.30.2" and component.name == "kubernetes"
    assert tuple(b.name for b in component.binaries) == UPGRADE_BINARIES
    assert "kubectl" not in UPGRADE_BINARIES
    assert all(b.expect == "Kubernetes v1.30.2" for b in component.binaries)
    flags = component.ldflags_for("v1.30.2")
    commit, date = KUBERNETES_RELEASES["v1.30.2"]
    assert f"k8s.io/component-base/version.gitCommit={commit}" in flags
    assert f"k8s.io/client-go/pkg/version.buildDate={date}" in flags
    assert "version.gitMinor=30" in flags and "version.gitVersion=v1.30.2" in flags
    # The cluster's own release is the full build, kubectl included.
    assert "kubectl" in {b.name for b in kubernetes_component("v1.30.3").binaries}


def test_another_releases_images_have_its_tags_and_keys_of_their_own() -> None:
    recipes = {r.reference: r for r in kubernetes_images("v1.30.2")}
    assert set(recipes) == {
        "registry.k8s.io/kube-apiserver:v1.30.2",
        "registry.k8s.io/kube-controller-manager:v1.30.2",
        "registry.k8s.io/kube-scheduler:v1.30.2",
        "registry.k8s.io/kube-proxy:v1.30.2",
        "ghcr.io/siderolabs/kubelet:v1.30.2",
    }
    assert recipes["ghcr.io/siderolabs/kubelet:v1.30.2"].key == "kubelet-v1.30.2"
    assert recipes["registry.k8s.io/kube-proxy:v1.30.2"].iptables


def test_an_unknown_release_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(KubeBuildError, match=r"no Kubernetes release v1\.29\.9 is known") as failed:
        kubernetes_component("1.29.9")
    assert "1.30.2" in (failed.value.hint or "")


@pytest.mark.slow  # five images packed (two with the iptables tools): ~10 s
@NEEDS_IMAGE_TOOLS
def test_version_flag_builds_beside_the_default_and_only_when_asked(
    tmp_path: Path,
    fake_go: tuple[str, str],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FAKE_BIN_SAYS", "Kubernetes v1.30.2")
    said: list[str] = []
    artifacts = ensure_kubernetes("1.30.2", said.append, go=fake_go[0], tick=0.05)
    root = artifacts_root()
    assert artifacts.bin_dir == root / "kubernetes-v1.30.2" / "bin"
    assert sorted(p.name for p in artifacts.bin_dir.iterdir()) == sorted(UPGRADE_BINARIES)
    assert not (root / "kubernetes-v1.30.3").exists()  # the default release is not built by it
    assert sorted(artifacts.images) == sorted(r.reference for r in kubernetes_images("v1.30.2"))
    assert (root / "images" / "kube-apiserver-v1.30.2" / "index.json").is_file()
    calls = (tmp_path / "go-calls").read_text()
    assert "k8s.io/kubernetes@v1.30.2" in calls and "cmd/kubectl" not in calls
    assert any("kubernetes" in line and "built and verified" in line for line in said)

    # Cached: a second run (the command) runs no go at all.
    (tmp_path / "go-calls").write_text("")
    monkeypatch.setenv("PATH", f"{Path(fake_go[0]).parent}:/usr/bin:/bin")
    assert main(["--version", "1.30.2"]) == 0
    assert (tmp_path / "go-calls").read_text() == ""
    out = capsys.readouterr()
    assert "image registry.k8s.io/kube-scheduler:v1.30.2 " in out.out
    assert "already built" in out.err
