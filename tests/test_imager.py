"""ichor.imager on small fake inputs: reproducible layers and initramfs, pins, errors, cmdline."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from ichor.imager import InputError, OutputError, _build, _cmdline, _inputs, _layers, _modules
from ichor.imager._cpio import Entry, write_newc
from ichor.imager._stage1 import INIT_SCRIPT
from ichor.machinery.errors import ProcessError
from ichor.machinery.proc import Completed

needs_squashfs = pytest.mark.skipif(shutil.which("mksquashfs") is None, reason="needs squashfs-tools")


def _fake_tree(root: Path, text: str = "hello") -> Path:
    (root / "usr/lib/python3/dist-packages/pkg").mkdir(parents=True)
    (root / "usr/lib/python3/dist-packages/pkg/__init__.py").write_text(f"X = {text!r}\n")
    (root / "sbin").mkdir()
    (root / "sbin/init").write_text("#!/bin/sh\n")
    (root / "sbin/init").chmod(0o755)
    return root


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@needs_squashfs
def test_layers_and_initramfs_are_byte_identical_across_builds(tmp_path: Path) -> None:
    shas = []
    for run in ("a", "b"):
        cache = tmp_path / run / "cache"

        def fill(tree: Path) -> None:
            _fake_tree(tree)
            _layers.compile_pyc(tree, _layers.SITE)

        layer = _layers.cached_layer(cache, "ichor", {"k": 1}, fill, lambda line: None)
        out = tmp_path / run / "out"
        out.mkdir()
        entries = [
            Entry("init", data=INIT_SCRIPT.encode()),
            Entry("layers"),
            Entry("layers/20-ichor.sqsh", path=str(layer)),
        ]
        artefact = _build.write_output(out, "initramfs-amd64.xz", lambda f, e=entries: write_newc(f, e))
        shas.append((_sha(layer), artefact.sha256))
    assert shas[0] == shas[1]


@needs_squashfs
def test_a_layer_is_rebuilt_only_when_its_key_changes(tmp_path: Path) -> None:
    built: list[str] = []

    def fill(tree: Path) -> None:
        built.append("x")
        _fake_tree(tree)

    first = _layers.cached_layer(tmp_path, "ichor", {"source": "1"}, fill, lambda line: None)
    again = _layers.cached_layer(tmp_path, "ichor", {"source": "1"}, fill, lambda line: None)
    assert first == again and built == ["x"]
    changed = _layers.cached_layer(tmp_path, "ichor", {"source": "2"}, fill, lambda line: None)
    assert changed != first and built == ["x", "x"]
    assert not first.exists(), "the stale layer is removed from the cache"


def test_tree_digest_follows_content_and_ignores_pycache(tmp_path: Path) -> None:
    tree = _fake_tree(tmp_path / "t")
    skip = lambda p: "__pycache__" in p.parts  # noqa: E731
    before = _layers.tree_digest(tree, skip=skip)
    (tree / "usr/lib/python3/dist-packages/pkg/__pycache__").mkdir()
    (tree / "usr/lib/python3/dist-packages/pkg/__pycache__/x.pyc").write_bytes(b"junk")
    assert _layers.tree_digest(tree, skip=skip) == before
    (tree / "usr/lib/python3/dist-packages/pkg/__init__.py").write_text("X = 2\n")
    assert _layers.tree_digest(tree, skip=skip) != before


def test_cpio_is_newc_the_kernel_and_cpio_read(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"z" * 5)
    entries = [
        Entry("bin"), Entry("dev"), Entry("dev/console", mode=0o600, char_device=(5, 1)),
        Entry("bin/sh", link="busybox"), Entry("init", data=b"#!/bin/sh\n"), Entry("big", mode=0o644, path=str(big)),
    ]  # fmt: skip
    one, two = io.BytesIO(), io.BytesIO()
    write_newc(one, entries)
    write_newc(two, entries)
    assert one.getvalue() == two.getvalue()
    assert len(one.getvalue()) % 4 == 0
    if shutil.which("cpio") is None:
        pytest.skip("cpio not installed")
    listing = subprocess.run(
        ["cpio", "-itv"], input=one.getvalue(), capture_output=True, check=True
    ).stdout.decode()
    lines = listing.splitlines()
    assert [line.split()[-1] for line in lines if "->" not in line] == [
        "bin",
        "dev",
        "dev/console",
        "init",
        "big",
    ]
    assert lines[2].startswith("crw-------") and "5," in lines[2]
    assert "bin/sh -> busybox" in listing


def test_unpack_wheel_puts_purelib_in_site_keeps_exec_bits_and_refuses_escapes(tmp_path: Path) -> None:
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("demo/__init__.py", "")
        info = zipfile.ZipInfo("demo/bin/tool")
        info.external_attr = 0o755 << 16
        z.writestr(info, "#!/bin/sh\n")
        z.writestr("demo-1.0.data/purelib/extra.py", "")
        z.writestr("demo-1.0.data/scripts/demo", "#!python\n")
    site = tmp_path / "site"
    _layers.unpack_wheel(wheel, site)
    assert (site / "demo/__init__.py").is_file() and (site / "extra.py").is_file()
    assert (site / "demo/bin/tool").stat().st_mode & 0o777 == 0o755
    assert (
        not (site / "demo").joinpath("..", "demo-1.0.data").exists() and not (site / "demo-1.0.data").exists()
    )
    bad = tmp_path / "bad-1.0-py3-none-any.whl"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("../evil.py", "")
    with pytest.raises(InputError, match="would leave site-packages"):
        _layers.unpack_wheel(bad, tmp_path / "site2")


def test_the_repository_pins_are_complete() -> None:
    wheels = _inputs.read_wheel_pins()
    assert {"protobuf", "grpclib", "pydantic", "cryptography", "pyroute2"} <= {w.name for w in wheels}
    debs = _inputs.read_deb_pins()
    layers = {d.layer for d in debs}
    assert layers == {
        "kernel",
        "base",
        "initramfs",
        "grub",
        "containerd",
    }  # containerd: images with extension services
    assert {"xfsprogs", "dosfstools", "mtools", "grub-efi-amd64-bin", "grub-pc-bin"} <= {
        d.package for d in debs
    }
    assert any(d.package.startswith("linux-image-6.1.0-") for d in debs)


def test_a_wheel_without_a_hash_is_refused_naming_it(tmp_path: Path) -> None:
    lock = tmp_path / "wheels.lock"
    lock.write_text("# c\nclick==8.1.7 --hash=sha256:" + "a" * 64 + "\nrich==13.0.0\n")
    with pytest.raises(InputError, match=r"wheels.lock:3: wheel rich==13.0.0 has no --hash=sha256"):
        _inputs.read_wheel_pins(lock)
    lock.write_text("rich>=13\n")
    with pytest.raises(InputError, match="'rich>=13' is not pinned to one version"):
        _inputs.read_wheel_pins(lock)


def test_a_missing_deb_version_is_refused_naming_it_and_the_versions_there_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_run(args: list[str], **kw: object) -> Completed:
        if args[:2] == ["apt-cache", "show"]:
            return Completed(args, 100, "", "E: No packages found")
        return Completed(
            args, 0, "  kmod | 30+20221128-1 | http://deb.debian.org bookworm/main amd64 Packages\n", ""
        )

    monkeypatch.setattr(_inputs.proc, "run", fake_run)
    with pytest.raises(InputError, match=r"kmod=29 is not in the apt index \(available: 30\+20221128-1\)"):
        _inputs.fetch_deb(_inputs.Deb("kmod", "29", "base"), tmp_path)
    assert not (tmp_path / "debs").exists() or not any((tmp_path / "debs").iterdir())


def test_a_deb_whose_hash_differs_from_the_index_is_refused_and_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_run(args: list[str], cwd: Path | None = None, **kw: object) -> Completed:
        if args[:2] == ["apt-cache", "show"]:
            return Completed(
                args,
                0,
                f"Package: kmod\nVersion: 30\nFilename: pool/k/kmod_30_amd64.deb\nSHA256: {'0' * 64}\n",
                "",
            )
        assert cwd is not None
        (cwd / "kmod_30_amd64.deb").write_bytes(b"tampered")
        return Completed(args, 0, "", "")

    monkeypatch.setattr(_inputs.proc, "run", fake_run)
    with pytest.raises(InputError, match=r"kmod=30: sha256 .* does not match the apt index's 000"):
        _inputs.fetch_deb(_inputs.Deb("kmod", "30", "base"), tmp_path)
    assert list((tmp_path / "debs").iterdir()) == []


def test_an_unwritable_output_is_refused_before_any_work(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OutputError, match=f"cannot write to the output directory {blocker}/out"):
        _build.check_output_dir(blocker / "out")


def test_a_failed_write_leaves_nothing_in_the_output_dir(tmp_path: Path) -> None:
    def fail(out: object) -> None:
        raise ProcessError("mksquashfs failed", command=["mksquashfs"], exit_code=1, stderr_tail="")

    with pytest.raises(ProcessError):
        _build.write_output(tmp_path, "initramfs-amd64.xz", fail)
    assert list(tmp_path.iterdir()) == []


def test_cmdline_is_talos_defaults_with_extra_args_dropping_and_overwriting() -> None:
    assert _cmdline.assemble(()).startswith("talos.platform=metal console=ttyS0 console=tty0 init_on_alloc=1")
    line = _cmdline.assemble(["-console", "talos.config=http://10.5.0.1/c.yaml", "slab_nomerge", "-pti"])
    assert "console=" not in line and "pti=" not in line
    assert line.endswith("talos.config=http://10.5.0.1/c.yaml")
    assert " slab_nomerge " in line  # Talos prints an empty value as the bare key (go-procfs)
    line = _cmdline.assemble(["console=ttyS1", "console=ttyS2"])
    assert "console=ttyS1 console=ttyS2" in line and "tty0" not in line
    for bad in ("", "a b", 'x="y"', "-"):
        with pytest.raises(InputError, match="cannot be passed on the kernel command line"):
            _cmdline.assemble([bad])


def test_module_closure_follows_hard_and_soft_dependencies_and_load_order_puts_deps_first(
    tmp_path: Path,
) -> None:
    (tmp_path / "modules.dep").write_text(
        "kernel/fs/xfs/xfs.ko: kernel/lib/libcrc32c.ko\nkernel/lib/libcrc32c.ko:\n"
        "kernel/crypto/crc32c_generic.ko:\nkernel/fs/overlayfs/overlay.ko:\nkernel/drivers/gpu/big.ko:\n"
    )
    (tmp_path / "modules.softdep").write_text("# x\nsoftdep libcrc32c pre: crc32c-generic\n")
    deps = _modules.read_modules_dep(tmp_path)
    chosen = _modules.select(deps, ["fs/xfs/*"])
    assert _modules.closure(deps, _modules.read_softdeps(tmp_path), chosen) == {
        "kernel/fs/xfs/xfs.ko", "kernel/lib/libcrc32c.ko", "kernel/crypto/crc32c_generic.ko",
    }  # fmt: skip
    assert _modules.load_order(deps, ["xfs", "overlay"]) == [
        "kernel/lib/libcrc32c.ko", "kernel/fs/xfs/xfs.ko", "kernel/fs/overlayfs/overlay.ko",
    ]  # fmt: skip
    with pytest.raises(InputError, match="no module matching 'fs/nothing/\\*'"):
        _modules.select(deps, ["fs/nothing/*"])


def test_stage1_mounts_layers_read_only_and_switches_root() -> None:
    assert INIT_SCRIPT.startswith("#!/bin/busybox sh\n")
    assert "insmod" in INIT_SCRIPT and "-o ro,loop" in INIT_SCRIPT and "ro,lowerdir=" in INIT_SCRIPT
    assert INIT_SCRIPT.rstrip().endswith("exec switch_root /root /sbin/init")
    if shutil.which("busybox"):
        subprocess.run(["busybox", "sh", "-n", "-c", INIT_SCRIPT], check=True)
