"""System extension directories (manifest.yaml + rootfs/), checked as Talos 1.7 checks them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ichor.machinery.errors import ExtensionError
from ichor.machinery.extensions import load_extension, version_satisfies

MANIFEST = """\
version: v1alpha1
metadata:
  name: hello
  version: 1.0.0
  author: Ichor tests
  description: says hello
  compatibility:
    talos:
      version: ">= v1.7.0"
"""


def make_extension(root: Path, manifest: str = MANIFEST) -> Path:
    ext = root / "hello"
    (ext / "rootfs/usr/local/etc/containers").mkdir(parents=True)
    (ext / "rootfs/usr/local/lib/containers/hello").mkdir(parents=True)
    (ext / "rootfs/usr/local/etc/containers/hello.yaml").write_text("name: hello\n")
    (ext / "manifest.yaml").write_text(manifest)
    return ext


def test_a_talos_extension_directory_loads(tmp_path: Path) -> None:
    ext = load_extension(make_extension(tmp_path))
    assert ext.metadata.name == "hello"
    assert ext.metadata.version == "1.0.0"
    assert ext.metadata.to_yaml()["compatibility"] == {"talos": {"version": ">= v1.7.0"}}
    assert ext.rootfs == tmp_path / "hello/rootfs"


def _refused(path: Path) -> ExtensionError:
    with pytest.raises(ExtensionError) as info:
        load_extension(path)
    assert info.value.hint
    return info.value


def test_missing_parts_are_refused_with_talos_texts(tmp_path: Path) -> None:
    ext = make_extension(tmp_path)
    (ext / "manifest.yaml").unlink()
    assert "extension manifest is missing" in str(_refused(ext))
    (ext / "manifest.yaml").write_text(MANIFEST)
    (ext / "notes.txt").write_text("x")
    assert 'unexpected file "notes.txt"' in str(_refused(ext))
    (ext / "notes.txt").unlink()
    os.rename(ext / "rootfs", tmp_path / "elsewhere")
    assert "extension rootfs is missing" in str(_refused(ext))
    (ext / "rootfs").symlink_to(tmp_path / "elsewhere")
    assert "rootfs must be a directory, not a link" in str(_refused(ext))
    assert "does not exist" in str(_refused(tmp_path / "nope"))
    assert "is not a directory" in str(_refused(ext / "manifest.yaml"))


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ("version: [\n", "invalid YAML"),
        ("- a\n", "expected a mapping with version and metadata"),
        (MANIFEST.replace("v1alpha1", "v2"), 'unsupported manifest version: "v2"'),
        ("version: v1alpha1\n", "metadata is missing"),
        ("version: v1alpha1\nmetadata: {name: x}\n", "metadata.name and metadata.version are required"),
        ("version: v1alpha1\nmetadata: {name: [x], version: 1}\n", "metadata.name: expected a string"),
        (MANIFEST.replace(">= v1.7.0", ">= v1.8.0"), "version constraint >= v1.8.0 can't be satisfied with Talos version v1.7.6"),
        (MANIFEST.replace(">= v1.7.0", "about one"), "error parsing Talos version constraint"),
    ],
)  # fmt: skip
def test_bad_manifests_are_refused(tmp_path: Path, manifest: str, expected: str) -> None:
    assert expected in str(_refused(make_extension(tmp_path, manifest)))


def test_bad_contents_are_refused(tmp_path: Path) -> None:
    ext = make_extension(tmp_path)
    spec = ext / "rootfs/usr/local/etc/containers/hello.yaml"
    spec.chmod(0o666)
    assert 'world-writeable files are not allowed: "/usr/local/etc/containers/hello.yaml"' in str(
        _refused(ext)
    )
    spec.chmod(0o644)
    (ext / "rootfs/etc").mkdir()
    (ext / "rootfs/etc/shadow").write_text("x")
    assert 'path "/etc/shadow" is not allowed in extensions' in str(_refused(ext))
    (ext / "rootfs/etc/shadow").unlink()
    os.mkfifo(ext / "rootfs/usr/local/fifo")
    assert "special files are not allowed" in str(_refused(ext))
    (ext / "rootfs/usr/local/fifo").unlink()
    (ext / "rootfs/usr/local/escape").symlink_to("../../../../etc/passwd")
    assert "points out of the extension's rootfs" in str(_refused(ext))
    (ext / "rootfs/usr/local/escape").unlink()
    (ext / "rootfs/usr/local/inside").symlink_to("etc/containers/hello.yaml")
    (ext / "rootfs/usr/local/absolute").symlink_to("/usr/bin/env")  # resolves in the node, as in Talos
    assert load_extension(ext).metadata.name == "hello"


@pytest.mark.parametrize(
    ("constraint", "ok"),
    [(">= v1.7.0", True), (">=1.7.0 <1.8.0", True), ("< v1.7.0", False), ("> 1.7.6", False),
     ("= v1.6.0 || >= v1.7.5", True), ("!= 1.7.6", False), ("v1.7.6", True)],
)  # fmt: skip
def test_version_constraints(constraint: str, ok: bool) -> None:
    assert version_satisfies(constraint, "v1.7.6") is ok
