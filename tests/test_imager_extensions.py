"""``python -m ichor.imager --system-extension-image``: Talos's rules for image extensions, each
refused with its message; one layer per extension in the order given, ``/etc/extensions.yaml``
(read back the way machined reads it), the ``modules.dep`` layer from depmod over the merged
module tree, and the same bytes from the same inputs.

The base layer and the kernel are small fakes (a squashfs of a few files, modules that are not
ELF: depmod lists them all the same); mksquashfs, unsquashfs and depmod are the real tools.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from ichor.imager import InputError, _build, _extensions, _layers
from ichor.imager.__main__ import main
from ichor.images import ImageSpec, build_layout
from ichor.machined.controllers.extensions import read_extension_layers
from ichor.machinery import proc

KVER = "6.1.0-99-test"

pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("mksquashfs", "unsquashfs", "depmod")),
    reason="needs squashfs-tools and kmod (scripts/os-packages.txt)",
)


def make_extension(
    where: Path, name: str = "hello", *, files: dict[str, bytes] | None = None, constraint: str = ">= v1.7.0"
) -> Path:
    where.mkdir(parents=True)
    (where / "manifest.yaml").write_text(
        "version: v1alpha1\nmetadata:\n"
        f"  name: {name}\n  version: 1.0.0\n  author: Ichor tests\n  description: {name} for tests\n"
        f'  compatibility:\n    talos:\n      version: "{constraint}"\n'
    )
    for path, data in (files or {"usr/local/share/hello.txt": b"hello\n"}).items():
        target = where / "rootfs" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o644)
    (where / "rootfs").mkdir(exist_ok=True)
    return where


def refused(values: list[str], work: Path) -> str:
    work.mkdir(exist_ok=True)
    with pytest.raises(InputError) as caught:
        _extensions.load_image_extensions(values, work, kernel_release=KVER)
    return str(caught.value)


# --- Talos's rules --------------------------------------------------------------------------


def test_every_allowed_path_of_talos_is_accepted_in_an_image(tmp_path: Path) -> None:
    files = {
        "etc/cri/conf.d/20-x.part": b"x", "lib/firmware/x.bin": b"x", f"lib/modules/{KVER}/extra/x.ko": b"x",
        "usr/lib/udev/rules.d/99-x.rules": b"x", "usr/local/bin/x": b"x", "usr/share/glvnd/x": b"x",
        "usr/share/egl/x": b"x", "etc/vulkan/x": b"x", "sbin/ldconfig": b"x",
    }  # fmt: skip
    ext = make_extension(tmp_path / "ext", files=files)
    (loaded,) = _extensions.load_image_extensions([str(ext)], tmp_path / "work", kernel_release=KVER)
    assert loaded.metadata.name == "hello" and loaded.layer == "30-ext-000-hello.sqsh"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: (d / "manifest.yaml").unlink(), "extension manifest is missing"),
        (lambda d: shutil.rmtree(d / "rootfs"), "extension rootfs is missing"),
        (lambda d: (d / "README").write_text("x"), 'unexpected file "README"'),
        (lambda d: (d / "manifest.yaml").write_text((d / "manifest.yaml").read_text().replace("v1alpha1", "v2")),
         'unsupported manifest version: "v2"'),
        (lambda d: (d / "manifest.yaml").write_text((d / "manifest.yaml").read_text().replace(">= v1.7.0", ">= v1.8.0")),
         "version constraint >= v1.8.0 can't be satisfied with Talos version v1.7"),
        (lambda d: (d / "manifest.yaml").write_text((d / "manifest.yaml").read_text().replace(">= v1.7.0", "soon")),
         "error parsing Talos version constraint"),
        (lambda d: (d / "rootfs/usr/local/share/hello.txt").chmod(0o666), 'world-writeable files are not allowed: "/usr/local/share/hello.txt"'),
        (lambda d: os.mkfifo(d / "rootfs/usr/local/fifo"), 'special files are not allowed: "/usr/local/fifo"'),
        (lambda d: (d / "rootfs/etc").mkdir() or (d / "rootfs/etc/passwd").write_text("x"), 'path "/etc/passwd" is not allowed in extensions'),
        (lambda d: (d / "rootfs/bin").mkdir() or (d / "rootfs/bin/sh").symlink_to("/usr/local/bin/sh"), 'path "/bin/sh" is not allowed in extensions'),
        (lambda d: (d / "rootfs/lib/modules/5.15.0/extra").mkdir(parents=True) or (d / "rootfs/lib/modules/5.15.0/extra/x.ko").write_text("x"),
         f"it ships kernel modules for 5.15.0 (/lib/modules/5.15.0), the image's kernel is {KVER}"),
    ],
)  # fmt: skip
def test_each_rule_is_refused_naming_the_extension_and_the_rule(
    tmp_path: Path, change: object, message: str
) -> None:
    ext = make_extension(tmp_path / "ext")
    change(ext)  # type: ignore[operator]
    text = refused([str(ext)], tmp_path / "work")
    assert text.startswith(f"--system-extension-image {ext}: error validating extension ")
    assert message in text
    if (ext / "manifest.yaml").exists() and "version: v2" not in (ext / "manifest.yaml").read_text():
        assert 'error validating extension "hello"' in text


def test_two_extensions_of_one_name_are_refused(tmp_path: Path) -> None:
    a, b = make_extension(tmp_path / "a"), make_extension(tmp_path / "b")
    assert f'extension "hello" is already given by --system-extension-image {a}' in refused(
        [str(a), str(b)], tmp_path / "w"
    )


def test_sources_that_are_not_extensions_are_refused_with_what_to_pass(tmp_path: Path) -> None:
    assert "no such directory" in refused([str(tmp_path / "nope")], tmp_path / "w")
    (tmp_path / "file").write_text("x")
    assert "not a directory" in refused([str(tmp_path / "file")], tmp_path / "w")
    assert "is not a file" in refused([f"oci-archive:{tmp_path}/nope.tar"], tmp_path / "w")
    assert "registry ghcr.io is not on this machine or a private network" in refused(
        ["ghcr.io/siderolabs/gvisor:v1"], tmp_path / "w"
    )
    assert "registry 8.8.8.8:5000 is not on this machine" in refused(
        ["docker://8.8.8.8:5000/x:v1"], tmp_path / "w"
    )
    for local in (
        "127.0.0.1:5000/ext/hello:v1",
        "docker://localhost:5000/ext/hello",
        "10.5.0.1:5000/ext/hello:v2",
    ):
        source = _extensions.parse_source(local)
        assert source.kind is _extensions.SourceKind.REGISTRY and source.reference is not None, local
    assert "is not an OCI image layout" in refused([f"oci:{tmp_path}/file"], tmp_path / "w")


def test_an_oci_layout_and_an_oci_archive_are_unpacked_and_checked(tmp_path: Path) -> None:
    layout = tmp_path / "layout"
    build_layout(make_extension(tmp_path / "src"), layout, tag="v1", spec=ImageSpec(env=()))
    archive = tmp_path / "hello.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(layout, arcname=".")
    build_layout(
        make_extension(tmp_path / "src2", "other"), tmp_path / "layout2", tag="v2", spec=ImageSpec(env=())
    )
    loaded = _extensions.load_image_extensions(
        [f"oci-archive:{archive}", str(tmp_path / "layout2")], tmp_path / "work", kernel_release=KVER
    )  # fmt: skip
    assert [e.metadata.name for e in loaded] == ["hello", "other"]
    assert (loaded[0].rootfs / "usr/local/share/hello.txt").read_bytes() == b"hello\n"
    (via_tag,) = _extensions.load_image_extensions(
        [f"oci:{layout}:v1"], tmp_path / "work2", kernel_release=KVER
    )
    assert via_tag.metadata.name == "hello"
    bad = tmp_path / "bad"
    build_layout(
        make_extension(tmp_path / "src3", "bad", files={"etc/x": b"x"}), bad, tag="v1", spec=ImageSpec(env=())
    )
    assert 'error validating extension "bad": path "/etc/x" is not allowed' in refused(
        [f"oci:{bad}:v1"], tmp_path / "w3"
    )


# --- layers ---------------------------------------------------------------------------------


def fake_base(tmp_path: Path) -> Path:
    """A base layer holding a module tree: two fake modules, their order and depmod's index."""
    tree = tmp_path / "base-tree"
    moddir = tree / "lib/modules" / KVER
    for module in ("kernel/fs/xfs/xfs.ko", "kernel/drivers/block/loop.ko"):
        (moddir / module).parent.mkdir(parents=True, exist_ok=True)
        (moddir / module).write_bytes(b"not elf\0vermagic=" + KVER.encode() + b" SMP\0")
    (moddir / "modules.order").write_text("kernel/fs/xfs/xfs.ko\nkernel/drivers/block/loop.ko\n")
    proc.run(["depmod", "-b", str(tree), KVER])
    image = tmp_path / "base.sqsh"
    _layers.squash(tree, image)
    return image


def builder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: str = "cache", **kw: object
) -> _build._Builder:
    base = tmp_path / "base.sqsh"
    if not base.exists():
        fake_base(tmp_path)
    monkeypatch.setattr(_build._Builder, "kernel", lambda self: (tmp_path / "kernel-root", KVER))
    monkeypatch.setattr(_build._Builder, "base_layer", lambda self: base)
    work = tmp_path / f"work-{cache}"
    work.mkdir()
    options = _build.BuildOptions(output=tmp_path / "out", cache=tmp_path / cache, **kw)  # type: ignore[arg-type]
    return _build._Builder(options, work)


def listing(layer: Path) -> list[str]:
    out = proc.run(["unsquashfs", "-l", "-no-progress", str(layer)]).stdout
    return sorted(
        line.removeprefix("squashfs-root/") for line in out.splitlines() if line.startswith("squashfs-root/")
    )


def read_from(layer: Path, path: str, tmp_path: Path) -> bytes:
    target = tmp_path / f"x-{hashlib.sha256((str(layer) + path).encode()).hexdigest()[:8]}"
    proc.run(["unsquashfs", "-no-progress", "-quiet", "-d", str(target), str(layer), path])
    return (target / path).read_bytes()


def test_each_extension_is_a_layer_in_order_with_extensions_yaml_and_a_merged_module_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fw = make_extension(tmp_path / "fw", "firmware-x", files={"lib/firmware/x.bin": b"blob"})
    mod = make_extension(
        tmp_path / "mod", "osw-hello", files={f"lib/modules/{KVER}/extras/osw_hello.ko": b"ko\0"}
    )
    b = builder(tmp_path, monkeypatch, system_extension_images=(str(fw), str(mod)))
    b.check_inputs()
    layers = b.extra_layers()
    names = [name for name, _ in layers]
    assert names == [
        "30-ext-000-firmware-x.sqsh",
        "30-ext-001-osw-hello.sqsh",
        "40-modules.dep.sqsh",
        "45-extensions.sqsh",
    ]
    # Stage 1 stacks layers/*.sqsh in name order over rootfs.sqsh: the extensions lie over ichor.
    assert sorted([_build.PYDEPS_LAYER, _build.ICHOR_LAYER, *names]) == [
        _build.PYDEPS_LAYER,
        _build.ICHOR_LAYER,
        *names,
    ]
    by_name = dict(layers)
    assert "lib/firmware/x.bin" in listing(by_name["30-ext-000-firmware-x.sqsh"])
    assert f"lib/modules/{KVER}/extras/osw_hello.ko" in listing(by_name["30-ext-001-osw-hello.sqsh"])
    index = listing(by_name["40-modules.dep.sqsh"])
    assert f"lib/modules/{KVER}/modules.dep" in index and f"lib/modules/{KVER}/modules.alias" in index
    assert not any(p.endswith(".ko") for p in index)  # only the index, as Talos's modules.dep extension
    dep = read_from(by_name["40-modules.dep.sqsh"], f"lib/modules/{KVER}/modules.dep", tmp_path).decode()
    assert {line.split(":")[0] for line in dep.splitlines()} == {
        "kernel/fs/xfs/xfs.ko", "kernel/drivers/block/loop.ko", "extras/osw_hello.ko"
    }  # fmt: skip
    yaml = read_from(by_name["45-extensions.sqsh"], "etc/extensions.yaml", tmp_path)
    statuses = read_extension_layers(yaml)  # what machined publishes as ExtensionStatuses
    assert [(s.image, s.metadata.name) for s in statuses] == [
        ("30-ext-000-firmware-x.sqsh", "firmware-x"), ("30-ext-001-osw-hello.sqsh", "osw-hello"),
        ("40-modules.dep.sqsh", "modules.dep"),
    ]  # fmt: skip
    assert statuses[1].metadata.author == "Ichor tests" and statuses[1].metadata.version == "1.0.0"
    assert statuses[2].metadata.version == KVER and statuses[2].metadata.author == "Talos Machinery"


def test_no_module_layer_without_extension_modules_and_no_layers_without_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ext = make_extension(tmp_path / "ext")
    b = builder(tmp_path, monkeypatch, system_extension_images=(str(ext),))
    assert [name for name, _ in b.extra_layers()] == ["30-ext-000-hello.sqsh", "45-extensions.sqsh"]
    assert builder(tmp_path, monkeypatch, cache="c2").extra_layers() == []


def test_the_same_extensions_give_the_same_layer_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = make_extension(
        tmp_path / "mod", "m", files={f"lib/modules/{KVER}/extras/a.ko": b"a\0", "usr/local/x": b"x"}
    )
    first = builder(tmp_path, monkeypatch, cache="one", system_extension_images=(str(mod),)).extra_layers()
    os.utime(mod / "rootfs/usr/local/x", (1, 1))  # times are not inputs
    second = builder(tmp_path, monkeypatch, cache="two", system_extension_images=(str(mod),)).extra_layers()
    digest = [[hashlib.sha256(p.read_bytes()).hexdigest() for _, p in run] for run in (first, second)]
    assert digest[0] == digest[1] and first[0][1] != second[0][1]


def test_a_refused_extension_stops_the_build_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_build._Builder, "kernel", lambda self: (tmp_path, KVER))
    built: list[str] = []
    monkeypatch.setattr(_build._Builder, "base_layer", lambda self: built.append("base"))
    ext = make_extension(tmp_path / "ext", files={"etc/shadow": b"x"})
    out = tmp_path / "out"
    code = main(["initramfs", "--output", str(out), "--cache-dir", str(tmp_path / "cache"),
                 "--system-extension-image", str(ext)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and built == []
    assert (
        f'error: --system-extension-image {ext}: error validating extension "hello": path "/etc/shadow" is not allowed in extensions'
        in err
    )
    assert "hint: files may live under /etc/cri/conf.d" in err
    assert list(out.iterdir()) == []


def test_the_cmdline_profile_refuses_customisation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["cmdline", "--output", str(tmp_path), "--rm", "/usr/share/doc"])
    assert code == 1 and "the cmdline profile takes no extensions" in capsys.readouterr().err


def test_an_extensions_directories_never_close_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """overlayfs shows the topmost layer's mode of a directory every layer has: a 0700 ``usr`` in an
    extension would close ``/usr`` to every service that is not root."""
    ext = make_extension(tmp_path / "ext", files={"usr/local/bin/tool": b"#!/bin/sh\n"})
    (ext / "rootfs/usr/local/bin/tool").chmod(0o750)
    for directory in (ext / "rootfs", ext / "rootfs/usr", ext / "rootfs/usr/local"):
        directory.chmod(0o700)
    (_, layer), _ = builder(tmp_path, monkeypatch, system_extension_images=(str(ext),)).extra_layers()
    out = proc.run(["unsquashfs", "-lls", "-no-progress", str(layer)]).stdout
    modes = {
        line.split()[-1].removeprefix("squashfs-root"): line.split()[0]
        for line in out.splitlines()
        if "squashfs-root" in line
    }
    assert modes[""] == modes["/usr"] == modes["/usr/local"] == "drwxr-xr-x", modes
    assert modes["/usr/local/bin/tool"] == "-rwxr-x---"  # files keep theirs
