"""Building Kubernetes and its companions from Go modules (``ichor.kubebuild``), with a stand-in ``go``.

The stand-in answers ``go env``, ``go mod download -json``, ``go mod tidy`` and ``go build`` the way
the real one does for these commands (a build writes an executable that prints what it is told), so
the wrapper module, the cache, the version checks, the images and the failure messages are tested
without a network or half an hour of compiling. The real build is checked by the last test here
when ``python -m ichor.kubebuild`` has run on this machine.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
from pathlib import Path

import pytest

from ichor.kubebuild import (
    COMPONENTS,
    IMAGES,
    KubeBuildError,
    artifacts_root,
    assemble_rootfs,
    ensure_built,
    parse_replaces,
    verify,
    wrapper_go_mod,
)
from ichor.kubebuild.__main__ import main
from ichor.machinery import proc
from ichor.machinery.constants import Images

_SAMPLE_GO_MOD = """module k8s.io/kubernetes

go 1.22.0

require (
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace github.com/old/thing => github.com/new/thing v1.2.3 // moved

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kubectl => ./staging/src/k8s.io/kubectl // the CLI
)
"""

_FAKE_GO = r"""#!/bin/sh
echo "$* | CGO_ENABLED=$CGO_ENABLED GOTOOLCHAIN=$GOTOOLCHAIN" >> "$FAKE_GO_CALLS"
case "$1 $2" in
"env -json")
    echo '{"GOVERSION": "go1.26.8", "GOPROXY": "https://proxy.example", "GOFLAGS": "-buildvcs=false"}'
    ;;
"mod download")
    if [ -n "$FAKE_GO_OFFLINE" ]; then
        echo "go: $4: Get \"https://proxy.example/x/@v/list\": dial tcp: lookup proxy.example: no such host" >&2
        exit 1
    fi
    case " $FAKE_GO_UNSERVED " in *" $4 "*)
        echo "go: $4: reading https://proxy.example/@v/x.info: 403 Forbidden" >&2
        exit 1
    esac
    case "$4" in k8s.io/kubernetes@*) mod=kubernetes.mod ;; *) mod=plain.mod ;; esac
    echo "{\"Path\": \"${4%@*}\", \"Dir\": \"$FAKE_MODROOT\", \"GoMod\": \"$FAKE_MODROOT/$mod\"}"
    ;;
"mod tidy")
    test -f tools.go && grep -q '^require ' go.mod && echo "go: finding module for package x" >&2
    ;;
"build -v")
    if [ -n "$FAKE_GO_BROKEN" ]; then
        for i in $(seq 1 30); do echo "example.com/dep$i" >&2; done
        printf '# example.com/broken/udp\n/m/udp_amd64.go:95:3: undefined: runCProxy\n' >&2
        for i in $(seq 31 60); do echo "example.com/dep$i" >&2; done
        exit 1
    fi
    out=$6
    echo "$7/internal/pkg"
    printf '#!/bin/sh\necho "%s"\n' "$FAKE_BIN_SAYS" > "$out"
    chmod +x "$out"
    ;;
esac
"""

_FAKE_CC = r"""#!/bin/sh
echo "cc $*" >> "$FAKE_GO_CALLS"
while [ "$1" != "-o" ]; do shift; done
printf '#!/bin/sh\necho "%s"\n' "$FAKE_BIN_SAYS" > "$2"
chmod +x "$2"
"""

_ALL_VERSIONS = ("Kubernetes v1.30.3 Client Version: v1.30.3 CoreDNS-1.11.1 v0.25.3 v0.25.7 "
                 "supportedVersions pause.c 3.8")  # fmt: skip

NEEDS_IMAGE_TOOLS = pytest.mark.skipif(
    not Path("/bin/busybox").is_file() or not Path("/usr/sbin/xtables-nft-multi").is_file(),
    reason="needs busybox-static and iptables (bash run.sh installs them as root)",
)


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, text in (("go", _FAKE_GO), ("cc", _FAKE_CC)):
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    modroot = tmp_path / "modroot"
    modroot.mkdir()
    (modroot / "kubernetes.mod").write_text(_SAMPLE_GO_MOD)
    (modroot / "plain.mod").write_text("module example.com/plain\n\ngo 1.20\n")
    monkeypatch.setenv("FAKE_MODROOT", str(modroot))
    monkeypatch.setenv("FAKE_GO_CALLS", str(tmp_path / "go-calls"))
    monkeypatch.setenv("FAKE_BIN_SAYS", _ALL_VERSIONS)
    (tmp_path / "go-calls").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return str(tools / "go"), str(tools / "cc")


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "go-calls").read_text().splitlines()


def test_the_wrapper_module_pins_every_staging_module_to_the_published_version() -> None:
    kubernetes = COMPONENTS[0]
    text = wrapper_go_mod(kubernetes, "v1.30.3", _SAMPLE_GO_MOD)
    assert text.startswith(
        "module ichor.local/build/kubernetes\n\ngo 1.22.0\n\nrequire k8s.io/kubernetes v1.30.3\n"
    )
    for module in ("k8s.io/api", "k8s.io/client-go", "k8s.io/kubectl"):
        assert f"\t{module} => {module} v0.30.3\n" in text
    assert "\tgithub.com/old/thing => github.com/new/thing v1.2.3\n" in text
    assert "./staging" not in text


def test_the_real_kubernetes_go_mod_has_every_staging_module_replaced() -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain")
    # Tests run with a HOME of their own; the module cache is the user's.
    cache = proc.run(
        [go, "env", "GOMODCACHE"], env={"HOME": pwd.getpwuid(os.getuid()).pw_dir}, timeout=60
    ).stdout.strip()
    go_mod = Path(cache) / "cache/download/k8s.io/kubernetes/@v/v1.30.3.mod"
    if not go_mod.is_file():
        pytest.skip(f"{go_mod} is not in the module cache")
    upstream = go_mod.read_text()
    staging = [m for m, path, _ in parse_replaces(upstream) if path.startswith("./staging/")]
    assert len(staging) >= 30 and "k8s.io/kubelet" in staging
    text = wrapper_go_mod(COMPONENTS[0], "v1.30.3", upstream)
    assert all(f"\t{m} => {m} v0.30.3\n" in text for m in staging)


@pytest.mark.parametrize(
    ("go_mod", "message"),
    [
        ("module x\n\nreplace example.com/a => ../a\n", r"replaces example\.com/a with the directory \.\./a"),
        ("module x\n\nreplace (\n\tnot a replace line\n)\n", r"cannot read the go\.mod replace directive"),
    ],
)
def test_a_go_mod_a_dependent_cannot_build_is_refused(go_mod: str, message: str) -> None:
    coredns = next(c for c in COMPONENTS if c.name == "coredns")
    with pytest.raises(KubeBuildError, match=message):
        wrapper_go_mod(coredns, "v1.11.1", go_mod)


def test_images_carry_talos_names_and_the_upstream_entrypoints() -> None:
    default = Images()
    by_reference = {r.reference: r for r in IMAGES}
    wanted = set(default.default_list()) - {default.etcd, default.installer}
    assert set(by_reference) == wanted
    assert by_reference["registry.k8s.io/kube-apiserver:v1.30.3"].entrypoint == (
        "/usr/local/bin/kube-apiserver",
    )
    assert by_reference["ghcr.io/siderolabs/kubelet:v1.30.3"].files == {
        "usr/local/bin/kubelet": ("kubernetes", "kubelet")
    }
    assert by_reference["registry.k8s.io/coredns/coredns:v1.11.1"].entrypoint == ("/coredns",)
    assert by_reference["registry.k8s.io/pause:3.8"].entrypoint == ("/pause",)
    flannel = by_reference["ghcr.io/siderolabs/flannel:v0.25.3"]
    assert flannel.entrypoint == ("/opt/bin/flanneld",) and set(flannel.files) == {
        "opt/bin/flanneld",
        "flannel",
    }
    assert "cp" in flannel.applets and flannel.iptables
    assert by_reference["registry.k8s.io/kube-proxy:v1.30.3"].iptables


@NEEDS_IMAGE_TOOLS
@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_the_iptables_tools_in_an_image_run_from_its_own_root(tmp_path: Path) -> None:
    fake = tmp_path / "kube-proxy"
    fake.write_text("#!/bin/sh\n")
    proxy = next(r for r in IMAGES if r.key == "kube-proxy")
    root = assemble_rootfs(proxy, tmp_path / "root", {"kubernetes/kube-proxy": fake})
    assert (root / "usr/local/bin/kube-proxy").is_file() and (root / "tmp").stat().st_mode & 0o1777 == 0o1777
    for tool in ("iptables", "iptables-save", "iptables-restore", "ip6tables"):
        out = proc.run(["chroot", str(root), f"/usr/sbin/{tool}", "--version"], timeout=30).stdout
        assert "(nf_tables)" in out, out


@pytest.mark.slow  # hundreds of fake-go calls and every image packed: ~15-30 s
@NEEDS_IMAGE_TOOLS
def test_a_cold_build_fills_the_cache_and_a_warm_run_does_nothing(
    tmp_path: Path, fake_go: tuple[str, str]
) -> None:
    go, cc = fake_go
    said: list[str] = []
    artifacts = ensure_built(said.append, go=go, cc=cc, tick=0.05)

    root = tmp_path / "cache" / "ichor" / "kubernetes"
    assert artifacts_root() == root
    assert artifacts.bin_dir == root / "kubernetes-v1.30.3" / "bin"
    assert artifacts.kubectl is not None and artifacts.kubectl.is_file() and artifacts.cni_dir is not None
    assert sorted(p.name for p in artifacts.cni_dir.iterdir()) == sorted(
        ["bandwidth", "bridge", "firewall", "host-local", "loopback", "portmap"]
    )
    assert len(artifacts.images) == len(IMAGES)
    calls = _calls(tmp_path)
    assert any(c.startswith("mod download -json k8s.io/kubernetes@v1.30.3 ") for c in calls)
    assert any("GOTOOLCHAIN=go1.21.13" in c and c.startswith("build ") and "coredns" in c for c in calls)
    assert any(
        c.startswith("cc -static -O2 -DVERSION=3.8 -o ") and c.endswith("build/pause/linux/pause.c")
        for c in calls
    )
    kube_build = next(c for c in calls if c.startswith("build ") and "k8s.io/kubernetes/cmd/kubelet" in c)
    assert (
        "-X k8s.io/component-base/version.gitVersion=v1.30.3" in kube_build and "CGO_ENABLED=0" in kube_build
    )
    wrapper = (root / "src" / "kubernetes" / "go.mod").read_text()
    assert "\tk8s.io/api => k8s.io/api v0.30.3\n" in wrapper
    assert '_ "k8s.io/kubernetes/cmd/kube-proxy"' in (root / "src" / "kubernetes" / "tools.go").read_text()
    text = "\n".join(said)
    assert "first run only" in text and "so far" in text and "built and verified" in text
    index = json.loads((artifacts.images["registry.k8s.io/pause:3.8"].layout / "index.json").read_text())
    assert index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == "3.8"

    # Warm: not one command, and the same images.
    said.clear()
    again = ensure_built(said.append, go=go, cc=cc)
    assert _calls(tmp_path) == calls
    assert said == [f"everything wanted is already built in {root}"]
    assert again.images == artifacts.images

    # A damaged cache is rebuilt, not trusted: a truncated binary, a lost image blob.
    (artifacts.cni_dir / "bridge").write_text("#!/bin/sh\n")
    pause = artifacts.images["registry.k8s.io/pause:3.8"]
    (pause.layout / "blobs" / "sha256" / pause.layer_digest.removeprefix("sha256:")).unlink()
    said.clear()
    ensure_built(said.append, go=go, cc=cc)
    rebuilt = _calls(tmp_path)[len(calls) :]
    assert any("containernetworking/plugins@v1.4.1" in c for c in rebuilt)
    assert not any("k8s.io/kubernetes@" in c for c in rebuilt)
    assert any("image registry.k8s.io/pause:3.8" in line for line in said)
    assert (artifacts.cni_dir / "bridge").read_text() != "#!/bin/sh\n"

    # --force rebuilds what it names, and the images made of it are packed again; the others stay.
    said.clear()
    ensure_built(said.append, go=go, cc=cc, force=True, only=["coredns"])
    packed = [line for line in said if line.startswith("  image ")]
    assert len(packed) == 1 and "registry.k8s.io/coredns/coredns:v1.11.1" in packed[0]


@pytest.mark.slow  # builds and packs flannel twice: ~10 s
@NEEDS_IMAGE_TOOLS
def test_flannel_falls_back_to_a_served_release_of_the_same_minor(
    tmp_path: Path, fake_go: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO_UNSERVED", "github.com/flannel-io/flannel@v0.25.3")
    said: list[str] = []
    artifacts = ensure_built(said.append, go=fake_go[0], cc=fake_go[1], only=["flannel", "flannel-cni"])
    assert artifacts.versions["flannel"] == "v0.25.7"
    assert "flannel v0.25.3 is not served by the Go module proxy; building v0.25.7" in "\n".join(said)
    image = artifacts.images["ghcr.io/siderolabs/flannel:v0.25.3"]
    config = image.layout / "blobs" / "sha256" / image.config_digest.removeprefix("sha256:")
    assert json.loads(config.read_text())["config"]["Labels"]["org.opencontainers.image.version"] == "v0.25.7"
    assert list(artifacts.images) == ["ghcr.io/siderolabs/flannel:v0.25.3"]  # nothing else was built
    assert artifacts.bin_dir is None and artifacts.kubectl is None and artifacts.cni_dir is None


def test_an_unreachable_module_proxy_is_named_and_nothing_is_cached(
    tmp_path: Path, fake_go: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO_OFFLINE", "1")
    with pytest.raises(KubeBuildError, match="no such host") as err:
        ensure_built(go=fake_go[0], cc=fake_go[1], only=["coredns"])
    assert "Go module proxy (GOPROXY=https://proxy.example)" in (err.value.hint or "")
    assert not (artifacts_root() / "coredns-v1.11.1").exists()
    assert not (artifacts_root() / "coredns-v1.11.1.new").exists()


def test_a_binary_that_is_not_the_version_is_refused(
    tmp_path: Path, fake_go: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_BIN_SAYS", "Kubernetes v1.20.2")
    with pytest.raises(
        KubeBuildError, match=r"does not report 'Kubernetes v1\.30\.3' \(it said 'Kubernetes v1\.20\.2'\)"
    ):
        ensure_built(go=fake_go[0], cc=fake_go[1], only=["kubernetes"])
    assert not (artifacts_root() / "kubernetes-v1.30.3").exists()


def test_the_command_refuses_an_unknown_component_and_a_missing_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["--only", "kube-dns"]) == 1
    err = capsys.readouterr().err
    assert "build-kubernetes: error: no component named kube-dns" in err
    assert "build-kubernetes: hint: --only takes kubernetes, coredns" in err
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["--only", "pause"]) == 1
    err = capsys.readouterr().err
    assert "error: cannot build Kubernetes: the Go toolchain (`go`) is not on PATH" in err
    assert "hint: install Go 1.22 or newer" in err


def test_the_built_components_are_the_versions_talos_runs() -> None:
    """After ``python -m ichor.kubebuild`` on this machine every cached binary shows its version."""
    root = artifacts_root()
    checked = 0
    for component in COMPONENTS:
        stamp = root / f"{component.name}-{component.version}" / "ichor-build.json"
        if stamp.is_file():
            verify(component, stamp.parent / "bin", json.loads(stamp.read_text())["version"])
            checked += 1
    if not checked:
        pytest.skip(f"nothing is built in {root} (run `python -m ichor.kubebuild`)")
    assert shutil.which("true")  # the loop above is the assertion: verify raises on a wrong binary


def test_a_compile_error_is_shown_among_hundreds_of_package_names(
    tmp_path: Path, fake_go: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO_BROKEN", "1")
    with pytest.raises(KubeBuildError) as err:
        ensure_built(go=fake_go[0], cc=fake_go[1], only=["flannel"])
    assert "# example.com/broken/udp\n/m/udp_amd64.go:95:3: undefined: runCProxy" in str(err.value)
    assert "example.com/dep60" not in str(err.value)
    assert "build.log" in (err.value.hint or "")


def test_a_missing_c_compiler_for_pause_says_what_to_install(
    tmp_path: Path, fake_go: tuple[str, str]
) -> None:
    with pytest.raises(
        KubeBuildError, match=r"cannot build pause: the C compiler '.*no-cc' is not on PATH"
    ) as err:
        ensure_built(go=fake_go[0], cc=str(tmp_path / "no-cc"), only=["pause"])
    assert "apt-get install -y gcc libc6-dev" in (err.value.hint or "")
    assert not (artifacts_root() / "pause-3.8").exists()
