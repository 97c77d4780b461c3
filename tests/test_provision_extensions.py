"""``cluster create --extension <dir>``: checked up front, layered into container nodes, listed by them."""

from __future__ import annotations

from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, container_cluster

from ichor.images import ImageSpec, build_layout
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


@pytest.mark.e2e
@CONTAINER_NODES
def test_a_container_node_lists_its_extension_and_sees_its_files(tmp_path: Path) -> None:
    ext = make_extension(tmp_path / "exts")
    image = build_layout(
        make_extension(tmp_path / "exts", "two"), tmp_path / "two-image", tag="v1", spec=ImageSpec()
    )
    with container_cluster(tmp_path, "ext-e2e") as cluster:
        cluster.create("--controlplanes", "1", "--workers", "0", "--extension", str(ext),
                       "--extension", f"oci:{image.layout}:v1")  # fmt: skip
        node = cluster.address(2)
        listed = cluster.talosctl("-n", node, "get", "extensions")
        assert listed.exit_code == 0, listed.stderr
        header, row = listed.stdout.splitlines()[:2]
        assert header.split() == ["NODE", "NAMESPACE", "TYPE", "ID", "VERSION", "NAME", "VERSION"]
        assert row.split()[1:] == ["runtime", "ExtensionStatus", "0", "1", "hello", "1.2.3"]
        # the second came as an OCI image layout, unpacked into the cluster's state directory
        assert listed.stdout.splitlines()[2].split()[1:] == [
            "runtime",
            "ExtensionStatus",
            "1",
            "1",
            "two",
            "1.2.3",
        ]
        spec = cluster.talosctl("-n", node, "read", "/usr/local/etc/containers/hello.yaml")
        assert spec.exit_code == 0, spec.stderr
        assert spec.stdout == SPEC
        listing = cluster.talosctl("-n", node, "ls", "/usr/local/lib/containers/hello")
        assert "hello" in listing.stdout.split(), listing.stdout + listing.stderr
    # destroy left no mount of the extension anywhere on the host
    assert str(ext) not in Path("/proc/self/mountinfo").read_text()
