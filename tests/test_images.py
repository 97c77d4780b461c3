"""ichor.images without a registry: the reproducible OCI layout, and references and mirror values refused when wrong."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ichor.images import (
    ImageError,
    ImageSpec,
    Reference,
    build_layout,
    busybox_rootfs,
    parse_mirror,
    parse_reference,
)

BUSYBOX = pytest.mark.skipif(not Path("/bin/busybox").is_file(), reason="needs busybox-static (bash run.sh)")


def _tree(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "hello").write_text("#!/bin/sh\necho hello\n")
    (root / "bin" / "hello").chmod(0o755)
    (root / "etc").mkdir()
    (root / "etc" / "motd").write_text("welcome\n")
    (root / "bin" / "hi").symlink_to("hello")
    return root


def _blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()


def _members(layout: Path, digest: str) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(_blob(layout, digest)))) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_the_same_directory_gives_the_same_digest_whatever_its_mtimes(tmp_path: Path) -> None:
    source = _tree(tmp_path / "src")
    spec = ImageSpec(entrypoint=["/bin/hello"], cmd=["x"], env=["A=1"])
    first = build_layout(source, tmp_path / "one", tag="v1", spec=spec)
    for path in source.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000), follow_symlinks=False)
    second = build_layout(source, tmp_path / "two", tag="v1", spec=spec)
    assert first.manifest_digest == second.manifest_digest
    (source / "etc" / "motd").write_text("changed\n")
    third = build_layout(source, tmp_path / "three", tag="v1", spec=spec)
    assert third.layer_digest != first.layer_digest and third.manifest_digest != first.manifest_digest


def test_the_layout_is_an_oci_image_with_the_spec_and_one_layer(tmp_path: Path) -> None:
    built = build_layout(_tree(tmp_path / "src"), tmp_path / "layout", tag="1.0",
                         spec=ImageSpec(entrypoint=["/bin/hello"], cmd=["--loud"], env=["GREETING=hi"]))  # fmt: skip
    index = json.loads((built.layout / "index.json").read_text())
    [entry] = index["manifests"]
    assert entry["digest"] == built.manifest_digest
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "1.0"
    manifest = json.loads(_blob(built.layout, built.manifest_digest))
    config = json.loads(_blob(built.layout, manifest["config"]["digest"]))
    assert config["config"]["Entrypoint"] == ["/bin/hello"] and config["config"]["Cmd"] == ["--loud"]
    assert config["config"]["Env"] == ["GREETING=hi"] and config["os"] == "linux"
    members = _members(built.layout, manifest["layers"][0]["digest"])
    assert sorted(members) == ["bin", "bin/hello", "bin/hi", "etc", "etc/motd"]
    assert members["bin/hi"].issym() and members["bin/hi"].linkname == "hello"
    assert members["bin/hello"].mode & 0o777 == 0o755
    assert {(m.mtime, m.uid, m.gid, m.uname) for m in members.values()} == {(0, 0, 0, "")}


def test_a_link_out_of_the_root_is_stored_as_a_link_not_followed(tmp_path: Path) -> None:
    source = _tree(tmp_path / "src")
    secret = tmp_path / "outside-secret"
    secret.write_text("host secret\n")
    (source / "etc" / "leak").symlink_to(secret)
    (source / "escape").symlink_to(tmp_path)  # a directory link: not walked into
    built = build_layout(source, tmp_path / "layout", tag="t", spec=ImageSpec())
    members = _members(built.layout, built.layer_digest)
    assert members["etc/leak"].issym() and members["etc/leak"].linkname == str(secret)
    assert members["escape"].issym() and not any(n.startswith("escape/") for n in members)
    layer = gzip.decompress(_blob(built.layout, built.layer_digest))
    assert b"host secret" not in layer


@pytest.mark.parametrize("what", ["missing", "file", "link"])
def test_a_source_that_is_not_a_directory_is_refused(tmp_path: Path, what: str) -> None:
    source = tmp_path / "src"
    if what == "file":
        source.write_text("x")
    elif what == "link":
        _tree(tmp_path / "real")
        source.symlink_to(tmp_path / "real")
    with pytest.raises(ImageError, match="is not a directory") as caught:
        build_layout(source, tmp_path / "layout", tag="t", spec=ImageSpec())
    assert "directory" in (caught.value.hint or "")
    assert not (tmp_path / "layout").exists()


def test_a_tree_over_the_size_bound_is_refused(tmp_path: Path) -> None:
    source = _tree(tmp_path / "src")
    (source / "big").write_bytes(b"\0" * 5000)
    with pytest.raises(ImageError, match="over 4096 bytes") as caught:
        build_layout(source, tmp_path / "layout", tag="t", spec=ImageSpec(), max_bytes=4096)
    assert "max_bytes" in (caught.value.hint or "")
    assert (
        build_layout(source, tmp_path / "layout", tag="t", spec=ImageSpec(), max_bytes=8192).content_bytes
        > 5000
    )


def test_a_fifo_is_refused_and_a_bad_tag_too(tmp_path: Path) -> None:
    source = _tree(tmp_path / "src")
    with pytest.raises(ImageError, match="is not a tag"):
        build_layout(source, tmp_path / "layout", tag="bad tag!", spec=ImageSpec())
    os.mkfifo(source / "pipe")
    with pytest.raises(ImageError, match="not a file, directory or symbolic link"):
        build_layout(source, tmp_path / "layout", tag="t", spec=ImageSpec())


@BUSYBOX
def test_a_busybox_rootfs_has_its_applets_as_links(tmp_path: Path) -> None:
    root = busybox_rootfs(tmp_path / "rootfs", applets=("sh", "httpd"))
    assert (root / "bin" / "busybox").stat().st_size > 100_000
    assert os.readlink(root / "bin" / "httpd") == "busybox"
    with pytest.raises(ImageError, match="not installed") as caught:
        busybox_rootfs(tmp_path / "other", busybox=tmp_path / "no-busybox")
    assert "busybox-static" in (caught.value.hint or "")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("busybox", Reference("docker.io", "library/busybox", "latest")),
        ("busybox:1.36", Reference("docker.io", "library/busybox", "1.36")),
        ("docker.io/library/busybox:1.36", Reference("docker.io", "library/busybox", "1.36")),
        ("ghcr.io/siderolabs/installer:v1.7.0", Reference("ghcr.io", "siderolabs/installer", "v1.7.0")),
        ("10.5.0.1:5000/pause:3.9", Reference("10.5.0.1:5000", "pause", "3.9")),
        ("localhost/app", Reference("localhost", "app", "latest")),
    ],
)
def test_references_read_as_docker_reads_them(text: str, expected: Reference) -> None:
    assert parse_reference(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is not a repository name"),
        ("BusyBox:1", "is not a repository name"),
        ("busybox:", "empty tag"),
        ("busybox:bad tag", "is not a tag"),
        ("busybox@sha256:abc", "names a digest"),
        ("bad_host!.io/x:1", "is not a registry host"),
        ("a//b", "is not a repository name"),
    ],
)
def test_bad_references_are_refused_with_a_hint(text: str, message: str) -> None:
    with pytest.raises(ImageError, match=message) as caught:
        parse_reference(text)
    assert caught.value.hint


def test_mirror_values_are_host_and_http_url() -> None:
    spec = parse_mirror("docker.io=http://10.5.0.1:5000")
    assert (spec.registry, spec.endpoint) == ("docker.io", "http://10.5.0.1:5000")
    assert parse_mirror("*=https://mirror.lan/").registry == "*"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("foo", "is not <registry>=<endpoint>"),
        ("=http://x", "is not <registry>=<endpoint>"),
        ("docker.io=", "is not <registry>=<endpoint>"),
        ("docker.io=10.5.0.1:5000", "is not an http:// or https:// URL"),
        ("docker.io=ftp://10.5.0.1", "is not an http:// or https:// URL"),
        ("docker.io=http://", "is not an http:// or https:// URL"),
        ("docker.io=http://h:99999", "is not a URL"),
        ("bad host=http://h", "is not a registry host"),
    ],
)
def test_bad_mirror_values_name_the_flag(text: str, message: str) -> None:
    with pytest.raises(ImageError, match=message) as caught:
        parse_mirror(text)
    assert str(caught.value).startswith("--registry-mirror ")
    assert "--registry-mirror docker.io=http://" in (caught.value.hint or "")


@given(st.text(max_size=60))
def test_any_text_is_a_reference_or_an_image_error(text: str) -> None:
    try:
        parsed = parse_reference(text)
    except ImageError:
        return
    assert parse_reference(str(parsed)) == parsed


@given(st.text(max_size=60))
def test_any_text_is_a_mirror_or_an_image_error(text: str) -> None:
    try:
        spec = parse_mirror(text)
    except ImageError as exc:
        assert str(exc).startswith("--registry-mirror ") and exc.hint
        return
    assert parse_mirror(f"{spec.registry}={spec.endpoint}") == spec
