"""The seeds' customisation procedures as imager flags, on small fake inputs: ``--rm`` (paths
really removed from the layers, removed modules re-indexed, what the image needs to boot refused by
name), ``--rootfs-overlay`` (a top layer; bad directories refused), ``--kernel-path`` with
``--modules-dir`` (the release read from the bzImage header and the modules' vermagic; a mismatch
refused naming both; the custom kernel is what the ``kernel`` profile writes).
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import struct
from pathlib import Path

import pytest

from ichor.imager import InputError, _build, _custom, _inputs, _modules
from ichor.imager.__main__ import main
from ichor.machinery import proc

KVER = "6.1.0-99-custom"

pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("mksquashfs", "unsquashfs", "depmod")),
    reason="needs squashfs-tools and kmod (scripts/os-packages.txt)",
)


def bzimage(path: Path, release: str) -> Path:
    """A file with a bzImage setup header whose version string names ``release``."""
    data = bytearray(0x1200)
    data[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", data, 0x20E, 0x1000 - 0x200)
    text = f"{release} (builder@example) #1 SMP PREEMPT_DYNAMIC".encode()
    data[0x1000 : 0x1000 + len(text)] = text
    path.write_bytes(bytes(data))
    return path


def module_tree(root: Path, release: str, modules: tuple[str, ...] = ("kernel/fs/xfs/xfs.ko",)) -> Path:
    """``root`` as ``/lib/modules/<release>``: fake modules carrying ``vermagic=<release>``, their order."""
    for module in modules:
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_bytes(b"\x7fELF fake\0vermagic=" + release.encode() + b" SMP mod_unload\0")
    (root / "modules.order").write_text("".join(m + "\n" for m in modules))
    return root


# --- --rm -----------------------------------------------------------------------------------


def test_removals_are_normalised_and_what_the_image_boots_with_is_refused_by_name() -> None:
    assert _custom.check_removals(["/usr/share/doc/", "usr/share/doc", "/opt/./x"], KVER) == (
        "opt/x",
        "usr/share/doc",
    )
    cases = {
        "/": "--rm /: the image cannot boot without a root filesystem",
        "/sbin/init": "--rm /sbin/init: the image needs it to boot",
        "/usr": "--rm /usr: the image needs /usr/bin/python3 to boot",
        "/usr/lib/python3/dist-packages": "needs /usr/lib/python3/dist-packages/ichor to boot",
        f"/lib/modules/{KVER}/kernel/fs/xfs": f"needs /lib/modules/{KVER}/kernel/fs/xfs/xfs.ko to boot",
        "/lib/modules": f"needs /lib/modules/{KVER}/modules.dep to boot",
        "/lib/x86_64-linux-gnu": "needs /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 to boot",
        "/etc/../..": "not a path in the root filesystem",
    }  # fmt: skip
    for path, message in cases.items():
        with pytest.raises(InputError) as caught:
            _custom.check_removals([path], KVER)
        assert message in str(caught.value), path
    # Single modules that nothing needs to boot may go (the Customizing the Kernel guide's space saving).
    assert _custom.check_removals([f"/lib/modules/{KVER}/kernel/drivers/net/wireguard"], KVER)


def test_remove_paths_is_rm_rf_in_the_tree_only(tmp_path: Path) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "usr/share/doc/x").mkdir(parents=True)
    (tree / "usr/share/doc/x/README").write_text("x")
    (tree / "etc").mkdir()
    (tree / "etc/motd").write_text("x")
    outside.mkdir()
    (outside / "keep").write_text("x")
    (tree / "opt").symlink_to(outside)
    removed = _custom.remove_paths(tree, ["usr/share/doc", "etc/motd", "etc/missing", "opt/keep"])
    assert removed == ["usr/share/doc", "etc/motd"]
    assert not (tree / "usr/share/doc").exists() and not (tree / "etc/motd").exists()
    assert (outside / "keep").exists()  # never through a symlink out of the tree


def fake_kernel_root(tmp_path: Path) -> Path:
    root = tmp_path / "kernel-root"
    module_tree(root / "lib/modules" / KVER, KVER,
                ("kernel/fs/xfs/xfs.ko", "kernel/drivers/net/wireguard/wireguard.ko", "kernel/net/8021q/8021q.ko"))  # fmt: skip
    proc.run(["depmod", "-b", str(root), KVER])
    return root


def listing(layer: Path) -> list[str]:
    out = proc.run(["unsquashfs", "-l", "-no-progress", str(layer)]).stdout
    return [
        line.removeprefix("squashfs-root/") for line in out.splitlines() if line.startswith("squashfs-root/")
    ]


def test_removed_modules_leave_the_base_layer_and_its_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_kernel_root(tmp_path)
    monkeypatch.setattr(_build._Builder, "kernel", lambda self: (root, KVER))
    deb = tmp_path / "python-deb"  # the one "Debian package" of the base layer
    (deb / "usr/bin").mkdir(parents=True)
    (deb / "usr/bin/python3.11").write_text("fake")
    pin = _inputs.Deb(package="python3.11-minimal", version="3.11.2-6", layer="base")
    monkeypatch.setattr(_build._Builder, "of_layer", lambda self, layer: [(pin, deb, "0" * 64)])
    monkeypatch.setattr(_build._Builder, "extracted", lambda self, path, sha: path)
    options = _build.BuildOptions(
        output=tmp_path / "out", cache=tmp_path / "cache", kernel_path=tmp_path / "vmlinuz",
        remove=(f"/lib/modules/{KVER}/kernel/drivers/net/wireguard",),
    )  # fmt: skip
    base = _build._Builder(options, tmp_path).base_layer()
    files = listing(base)
    assert f"lib/modules/{KVER}/kernel/fs/xfs/xfs.ko" in files
    assert f"lib/modules/{KVER}/kernel/net/8021q/8021q.ko" in files
    assert not any("wireguard" in f for f in files)
    proc.run(
        [
            "unsquashfs",
            "-no-progress",
            "-quiet",
            "-d",
            str(tmp_path / "x"),
            str(base),
            f"lib/modules/{KVER}/modules.dep",
        ]
    )
    dep = (tmp_path / "x/lib/modules" / KVER / "modules.dep").read_text()
    assert "kernel/fs/xfs/xfs.ko:" in dep and "wireguard" not in dep


def test_removals_reach_the_ichor_layer_and_change_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "ichor"
    (source / "docs").mkdir(parents=True)
    (source / "__init__.py").write_text("")
    (source / "docs/big.txt").write_text("x" * 1000)
    monkeypatch.setattr(_build._Builder, "kernel", lambda self: (tmp_path, KVER))

    def layer(*remove: str) -> Path:
        options = _build.BuildOptions(
            output=tmp_path / "out", cache=tmp_path / "cache", source=source, remove=remove
        )
        return _build._Builder(options, tmp_path).ichor_layer()

    plain = layer()
    assert "usr/lib/python3/dist-packages/ichor/docs/big.txt" in listing(plain)
    trimmed = layer("/usr/lib/python3/dist-packages/ichor/docs")
    assert trimmed != plain  # another key: the layer is rebuilt
    assert not any("docs" in f for f in listing(trimmed))
    assert "sbin/init" in listing(trimmed)


# --- --rootfs-overlay -----------------------------------------------------------------------


def test_bad_overlays_are_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "fifo-overlay").mkdir()
    os.mkfifo(tmp_path / "fifo-overlay/pipe")
    (tmp_path / "var-overlay/var/lib").mkdir(parents=True)
    (tmp_path / "var-overlay/var/lib/x").write_text("x")
    cases = {
        tmp_path / "nope": "no such directory",
        tmp_path / "file": "not a directory",
        tmp_path / "fifo-overlay": "/pipe is a special file",
        tmp_path / "var-overlay": "/var/lib/x would never be seen: machined mounts over /var at boot",
    }
    for directory, message in cases.items():
        with pytest.raises(InputError) as caught:
            _custom.check_overlay(directory)
        assert str(caught.value) == f"--rootfs-overlay {directory}: {message}"


def test_the_overlay_is_the_top_layer_and_reproducible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay = tmp_path / "overlay"
    (overlay / "etc/ichor").mkdir(parents=True)
    (overlay / "etc/ichor/added.conf").write_text("added by --rootfs-overlay\n")
    (overlay / "usr/local/bin").mkdir(parents=True)
    (overlay / "usr/local/bin/tool").write_text("#!/bin/sh\n")
    (overlay / "usr/local/bin/tool").chmod(0o755)
    monkeypatch.setattr(_build._Builder, "kernel", lambda self: (tmp_path, KVER))
    shas = []
    for cache in ("one", "two"):
        options = _build.BuildOptions(output=tmp_path / "out", cache=tmp_path / cache, rootfs_overlay=overlay)
        builder = _build._Builder(options, tmp_path)
        builder.check_inputs()
        ((name, layer),) = builder.extra_layers()
        assert name == _build.OVERLAY_LAYER == "50-rootfs-overlay.sqsh"
        shas.append(hashlib.sha256(layer.read_bytes()).hexdigest())
        os.utime(overlay / "etc/ichor/added.conf", (5, 5))
    assert shas[0] == shas[1]
    assert {"etc/ichor/added.conf", "usr/local/bin/tool"} <= set(listing(layer))
    assert sorted([_build.ICHOR_LAYER, "45-extensions.sqsh", name])[-1] == name  # on top of everything


def test_main_refuses_a_missing_overlay_before_building(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fake_kernel_root(tmp_path)
    bzimage(tmp_path / "vmlinuz", KVER)
    code = main(["kernel", "--output", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
                 "--kernel-path", str(tmp_path / "vmlinuz"), "--modules-dir", str(root / "lib/modules" / KVER),
                 "--rootfs-overlay", str(tmp_path / "missing")])  # fmt: skip
    assert (
        code == 1
        and f"error: --rootfs-overlay {tmp_path / 'missing'}: no such directory" in capsys.readouterr().err
    )
    assert list((tmp_path / "out").iterdir()) == []


# --- --kernel-path / --modules-dir ----------------------------------------------------------


def test_kernel_release_comes_from_the_bzimage_header(tmp_path: Path) -> None:
    assert _custom.kernel_release(bzimage(tmp_path / "vmlinuz", KVER)) == KVER
    (tmp_path / "elf").write_bytes(b"\x7fELF" + b"\0" * 0x400)
    with pytest.raises(InputError, match="not a Linux kernel image"):
        _custom.kernel_release(tmp_path / "elf")


def test_the_modules_release_is_found_in_each_layout_and_compressed_modules(tmp_path: Path) -> None:
    tree = module_tree(tmp_path / "root/lib/modules" / KVER, KVER)
    for given in (tree, tmp_path / "root/lib/modules", tmp_path / "root"):
        assert _custom.modules_release(given) == (KVER, tree)
    xz = tmp_path / "xz" / "6.1.0-1-other"
    (xz / "kernel").mkdir(parents=True)
    (xz / "kernel/a.ko.xz").write_bytes(lzma.compress(b"vermagic=6.1.0-1-other SMP\0"))
    assert _custom.modules_release(xz)[0] == "6.1.0-1-other"
    with pytest.raises(InputError, match="no kernel module tree"):
        _custom.modules_release(tmp_path / "xz/6.1.0-1-other/kernel")


def test_a_mismatch_names_both_releases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = module_tree(tmp_path / "modules" / "6.1.0-56-amd64", "6.1.0-56-amd64")
    vmlinuz = bzimage(tmp_path / "vmlinuz", KVER)
    code = main(["kernel", "--output", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
                 "--kernel-path", str(vmlinuz), "--modules-dir", str(tree)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert (
        f"error: --kernel-path {vmlinuz} is Linux {KVER} but the modules in --modules-dir {tree} are for 6.1.0-56-amd64"
        in err
    )
    assert main(["kernel", "--output", str(tmp_path / "out"), "--kernel-path", str(vmlinuz)]) == 1
    assert "--kernel-path needs --modules-dir" in capsys.readouterr().err


def test_the_custom_kernel_replaces_debians_in_the_kernel_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_debs(self: object) -> object:
        raise AssertionError("a custom kernel needs no Debian kernel")

    monkeypatch.setattr(_build._Builder, "_debian_kernel", no_debs)
    tree = module_tree(tmp_path / "modules" / KVER, KVER)
    vmlinuz = bzimage(tmp_path / "vmlinuz", KVER)
    code = main(["kernel", "--output", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
                 "--kernel-path", str(vmlinuz), "--modules-dir", str(tree)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "out/vmlinuz-amd64").read_bytes() == vmlinuz.read_bytes()
    (root,) = (tmp_path / "cache/custom-kernel").iterdir()
    assert (root / "boot" / f"vmlinuz-{KVER}").read_bytes() == vmlinuz.read_bytes()
    assert "kernel/fs/xfs/xfs.ko:" in (root / "lib/modules" / KVER / "modules.dep").read_text()


def test_a_custom_kernel_may_build_in_what_debian_ships_as_modules(tmp_path: Path) -> None:
    deps = {"kernel/fs/squashfs/squashfs.ko": [], "kernel/drivers/block/loop.ko": []}
    assert _modules.load_order(deps, ["loop", "squashfs", "overlay"], {"overlay"}) == [
        "kernel/drivers/block/loop.ko", "kernel/fs/squashfs/squashfs.ko",
    ]  # fmt: skip
    with pytest.raises(InputError, match="the kernel has no module 'overlay'"):
        _modules.load_order(deps, ["overlay"])
    assert _modules.select(deps, ["fs/xfs/*", "fs/squashfs/*"], strict=False) == {
        "kernel/fs/squashfs/squashfs.ko"
    }
    with pytest.raises(InputError, match="no module matching 'fs/xfs/\\*'"):
        _modules.select(deps, ["fs/xfs/*"])
    (tmp_path / "modules.builtin").write_text("kernel/fs/overlayfs/overlay.ko\n")
    assert _modules.read_builtin(tmp_path) == {"overlay"}
