"""``cluster create --extension <dir>``: checked up front, layered into container nodes, listed by them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ichor.machined.controllers.extensions import read_extension_layers
from ichor.machinery.errors import MachineryError
from ichor.provision._extensions import check_extensions, extensions_yaml

MANIFEST = """\
version: v1alpha1
metadata:
  name: {name}
  version: 1.2.3
  author: Ichor tests
  description: says hello
  compatibility:
    talos:
      version: ">= v1.7.0"
"""
SPEC = "name: hello\ncontainer:\n  entrypoint: ./hello\nrestart: always\n"


def make_extension(root: Path, name: str = "hello") -> Path:
    ext = root / name
    (ext / "rootfs/usr/local/etc/containers").mkdir(parents=True)
    (ext / "rootfs/usr/local/lib/containers/hello").mkdir(parents=True)
    (ext / "rootfs/usr/local/etc/containers/hello.yaml").write_text(SPEC)
    (ext / "rootfs/usr/local/lib/containers/hello/hello").write_text("#!/bin/sh\necho hello\n")
    (ext / "manifest.yaml").write_text(MANIFEST.format(name=name))
    return ext


def test_extensions_yaml_lists_the_layers_machined_reads(tmp_path: Path) -> None:
    exts = check_extensions(
        [str(make_extension(tmp_path)), str(make_extension(tmp_path, "two"))], container=True
    )
    layers = read_extension_layers(extensions_yaml(exts))
    assert [(layer.image, layer.metadata.name, layer.metadata.version) for layer in layers] == [
        ("hello", "hello", "1.2.3"),
        ("two", "two", "1.2.3"),
    ]
    assert layers[0].metadata.compatibility.talos.version == ">= v1.7.0"


def _refused(dirs: list[str], *, container: bool = True) -> MachineryError:
    with pytest.raises(MachineryError) as info:
        check_extensions(dirs, container=container)
    assert info.value.hint
    return info.value


def test_bad_extensions_are_refused_naming_the_flag(tmp_path: Path) -> None:
    ext = make_extension(tmp_path)
    assert "--extension needs container nodes" in str(_refused([str(ext)], container=False))
    missing = _refused([str(tmp_path / "nope")])
    assert str(missing).startswith(f"--extension {tmp_path / 'nope'}: ")
    assert "manifest.yaml and rootfs/" in (missing.hint or "")
    (ext / "manifest.yaml").write_text("version: [\n")
    assert "invalid YAML" in str(_refused([str(ext)]))
    (ext / "manifest.yaml").unlink()
    assert "extension manifest is missing" in str(_refused([str(ext)]))
    (ext / "manifest.yaml").write_text(MANIFEST.format(name="hello"))
    (ext / "rootfs/usr/local/etc/containers/hello.yaml").rename(tmp_path / "keep.yaml")
    (ext / "rootfs/usr/local/escape").symlink_to("../../../etc/shadow")
    assert "points out of the extension's rootfs" in str(_refused([str(ext)]))
    (ext / "rootfs/usr/local/escape").unlink()
    (ext / "rootfs/lib/firmware").mkdir(parents=True)
    (ext / "rootfs/lib/firmware/blob").write_text("x")
    refused = _refused([str(ext)])
    assert "rootfs/lib: container nodes layer only /usr/local" in str(refused)
    (ext / "rootfs/lib/firmware/blob").unlink()
    (ext / "rootfs/lib/firmware").rmdir()
    (ext / "rootfs/lib").rmdir()
    assert "already given by --extension" in str(_refused([str(ext), str(ext)]))
    odd = tmp_path / "a:b"
    make_extension(tmp_path, "a:b")
    assert "overlayfs cannot take" in str(_refused([str(odd)]))
