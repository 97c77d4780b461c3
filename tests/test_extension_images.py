"""``--extension`` given an image: OCI layouts, archives and local registries, unpacked safely."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from test_provision_extensions import MANIFEST, SPEC, make_extension

from ichor.images import ImageError, ImageSpec, build_layout, open_layout, unpack_image
from ichor.machinery.errors import MachineryError
from ichor.provision._extension_images import SourceKind, fetch_extensions, plan_extensions

CIDR = "10.5.0.0/24"


def _layout(tmp_path: Path, name: str = "hello") -> Path:
    layout = tmp_path / f"{name}-image"
    build_layout(make_extension(tmp_path / "src", name), layout, tag="v1", spec=ImageSpec(env=()))
    return layout


def _fetch(values: list[str], state: Path) -> list[str]:
    return fetch_extensions(plan_extensions(values, cidr=CIDR, container=True), state)


def test_an_oci_layout_becomes_the_extension_directory(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    (dir_ext,) = _fetch([str(make_extension(tmp_path / "plain", "plain"))], tmp_path / "state0")
    assert dir_ext == str((tmp_path / "plain/plain").resolve())
    for n, value in enumerate([f"oci:{layout}:v1", f"oci:{layout}", str(layout)]):
        (unpacked,) = _fetch([value], tmp_path / f"state{n + 1}")
        root = Path(unpacked)
        assert root.parent == tmp_path / f"state{n + 1}" / "extensions"
        assert (root / "manifest.yaml").read_text() == MANIFEST.format(name="hello")
        assert (root / "rootfs/usr/local/etc/containers/hello.yaml").read_text() == SPEC


def test_an_oci_archive_becomes_the_extension_directory(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    archive = tmp_path / "hello.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(layout, arcname=".")
    (unpacked,) = _fetch([f"oci-archive:{archive}"], tmp_path / "state")
    assert (Path(unpacked) / "rootfs/usr/local/etc/containers/hello.yaml").read_text() == SPEC
    assert [p.name for p in (tmp_path / "state/extensions").iterdir()] == [Path(unpacked).name]


def test_the_kind_of_each_value_is_told_apart(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    sources = plan_extensions(
        [f"oci:{layout}:v1", "127.0.0.1:5000/siderolabs/hello:v1", "docker://10.5.0.1:5000/siderolabs/gvisor"],
        cidr=CIDR, container=True,
    )  # fmt: skip
    assert [s.kind for s in sources] == [SourceKind.LAYOUT, SourceKind.REGISTRY, SourceKind.REGISTRY]
    assert (sources[0].path, sources[0].tag) == (layout, "v1")
    assert str(sources[2].reference) == "10.5.0.1:5000/siderolabs/gvisor:latest"


def _refused(values: list[str], state: Path | None = None) -> MachineryError:
    with pytest.raises(MachineryError) as info:
        if state is None:
            plan_extensions(values, cidr=CIDR, container=True)
        else:
            _fetch(values, state)
    assert info.value.hint
    assert str(info.value).startswith("--extension")
    return info.value


@pytest.mark.parametrize("reference", ["docker.io/siderolabs/hello:v1", "ghcr.io/siderolabs/gvisor:v1",
                                       "docker://busybox", "10.6.0.1:5000/x/y:v1", "registry.local:5000/x:v1"])  # fmt: skip
def test_a_registry_off_this_machine_is_refused(reference: str) -> None:
    refused = _refused([reference])
    assert "is not on this machine" in str(refused)
    assert "local registry" in (refused.hint or "")


def test_a_missing_layout_or_archive_is_refused_before_anything_starts(tmp_path: Path) -> None:
    assert "is not an OCI image layout" in str(_refused([f"oci:{tmp_path}/nope"]))
    assert "is not a file" in str(_refused([f"oci-archive:{tmp_path}/nope.tar"]))
    layout = _layout(tmp_path)
    assert "no image tagged 'v2'" in str(_refused([f"oci:{layout}:v2"]))
    assert "is not a file" in str(_refused([f"oci-archive:{tmp_path}/nope.tar"], tmp_path / "state"))
    assert not (tmp_path / "state").exists()


def _set_layer(
    layout: Path, layer: bytes, media_type: str = "application/vnd.oci.image.layer.v1.tar+gzip"
) -> None:
    """Replace the image's one layer (and fix the manifest and index digests to match)."""

    def blob(data: bytes) -> dict[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        (layout / "blobs/sha256" / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    index = json.loads((layout / "index.json").read_text())
    old = index["manifests"][0]["digest"].removeprefix("sha256:")
    manifest = json.loads((layout / "blobs/sha256" / old).read_text())
    manifest["layers"] = [{"mediaType": media_type, **blob(layer)}]
    index["manifests"][0].update(blob(json.dumps(manifest).encode()))
    (layout / "index.json").write_text(json.dumps(index))


def _tar(*entries: tarfile.TarInfo, data: bytes = b"x") -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for entry in entries:
            if entry.isreg():
                entry.size = len(data)
                tar.addfile(entry, io.BytesIO(data))
            else:
                tar.addfile(entry)
    return gzip.compress(raw.getvalue())


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    entry = tarfile.TarInfo(name)
    entry.type, entry.linkname = kind, link
    return entry


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([_entry("../etc/passwd")], "climbs out with '..'"),
        ([_entry("/etc/passwd")], "is absolute"),
        ([_entry("rootfs/usr/local/x", tarfile.SYMTYPE, "../../../../etc")], "points out of the image's root"),
        ([_entry("up", tarfile.SYMTYPE, "rootfs/.."), _entry("up2", tarfile.SYMTYPE, ".."),], "points out of the image's root"),
        ([_entry("etc", tarfile.SYMTYPE, "/etc"), _entry("etc/passwd")], "through 'etc', which is not a directory"),
        ([_entry("passwd", tarfile.LNKTYPE, "../etc/passwd")], "climbs out with '..'"),
        ([_entry("dev/null", tarfile.CHRTYPE)], "device, FIFO or socket"),
        ([_entry("fifo", tarfile.FIFOTYPE)], "device, FIFO or socket"),
        ([_entry("x/.wh..")], "names no entry"),
    ],
)  # fmt: skip
def test_an_unsafe_layer_is_refused_and_writes_nothing_outside(
    tmp_path: Path, entries: list[tarfile.TarInfo], message: str
) -> None:
    layout = _layout(tmp_path)
    _set_layer(layout, _tar(*entries))
    with pytest.raises(ImageError) as info:
        unpack_image(layout, tmp_path / "out" / "root")
    assert message in str(info.value)
    assert info.value.hint
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["root"]
    refused = _refused([f"oci:{layout}"], tmp_path / "state")
    assert message in str(refused)


def test_the_wrong_media_type_and_a_damaged_blob_are_refused(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    _set_layer(layout, _tar(_entry("a")), media_type="application/vnd.oci.image.layer.v1.tar+zstd")
    assert "layer media type 'application/vnd.oci.image.layer.v1.tar+zstd' cannot be unpacked" in str(
        _refused([f"oci:{layout}"], tmp_path / "s1")
    )
    index = json.loads((layout / "index.json").read_text())
    index["manifests"][0]["mediaType"] = "application/vnd.oci.image.config.v1+json"
    (layout / "index.json").write_text(json.dumps(index))
    assert "is not an image manifest" in str(_refused([f"oci:{layout}"], tmp_path / "s2"))
    layout = _layout(tmp_path, "two")
    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads((layout / "blobs/sha256" / index["manifests"][0]["digest"][7:]).read_text())
    blob = layout / "blobs/sha256" / manifest["layers"][0]["digest"][7:]
    blob.write_bytes(bytes(blob.stat().st_size))
    assert "does not match its digest" in str(_refused([f"oci:{layout}"], tmp_path / "s3"))


def test_an_image_without_manifest_yaml_is_not_an_extension(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    _set_layer(layout, _tar(_entry("rootfs/usr/local/bin/hello")))
    refused = _refused([f"oci:{layout}"], tmp_path / "state")
    assert "has no manifest.yaml at its root" in str(refused)


def test_whiteouts_remove_what_lower_layers_put_there(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    lower = _tar(_entry("keep"), _entry("gone"), _entry("d/old"), _entry("d/older"))
    upper = _tar(_entry(".wh.gone"), _entry("d/new"), _entry("d/.wh..wh..opq"))
    _set_layer(layout, lower)
    index = json.loads((layout / "index.json").read_text())
    manifest_blob = layout / "blobs/sha256" / index["manifests"][0]["digest"].removeprefix("sha256:")
    first = json.loads(manifest_blob.read_text())["layers"][0]
    _set_layer(layout, upper)
    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads(
        (layout / "blobs/sha256" / index["manifests"][0]["digest"].removeprefix("sha256:")).read_text()
    )
    manifest["layers"].insert(0, first)
    data = json.dumps(manifest).encode()
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs/sha256" / digest).write_bytes(data)
    index["manifests"][0].update({"digest": f"sha256:{digest}", "size": len(data)})
    (layout / "index.json").write_text(json.dumps(index))
    assert len(open_layout(layout)) == 2
    root = unpack_image(layout, tmp_path / "out")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == ["d", "d/new", "keep"]


def test_the_unpack_size_is_bounded(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    with pytest.raises(ImageError, match="over 10 bytes of files"):
        unpack_image(layout, tmp_path / "out", max_bytes=10)
