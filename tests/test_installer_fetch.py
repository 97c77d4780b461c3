"""A node fetching an installer image over the registry API through its mirrors (``images._fetch``).

A small registry (Python's http.server on loopback) serves an image laid out as ``imager installer``
lays it out: a root-filesystem layer and a top layer with ``usr/install/amd64``. The node must try
its mirrors in order, fetch only the layer with the boot files, check every digest, refuse what is
not an Ichor installer image, and say what each endpoint answered when none had it.
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ichor.images import ImageError, MirrorEndpoints, fetch_installer, mirrors_from_config

REPO = "siderolabs/installer"


def _layer(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Registry:
    """Blobs and manifests by repository; records each request path."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    manifests: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    token: str | None = None
    corrupt: set[str] = field(default_factory=set)

    def add_image(self, tag: str, *, entrypoint: list[str], version: str, assets: bool = True) -> str:
        rootfs = _layer({"usr/bin/python3.11": b"#!python\n"})
        top = _layer({"usr/install/amd64/vmlinuz": b"kernel-" + version.encode(),
                      "usr/install/amd64/initramfs.xz": b"initramfs-" + version.encode(),
                      "usr/install/amd64/grub/core.img": b"core"} if assets else {"etc/x": b"x"})  # fmt: skip
        config = json.dumps({"config": {"Entrypoint": entrypoint,
                                        "Labels": {"org.opencontainers.image.version": version}}}).encode()  # fmt: skip
        for blob in (rootfs, top, config):
            self.blobs[_digest(blob)] = blob
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": _digest(b), "size": len(b)}
                       for b in (rootfs, top)],
        }).encode()  # fmt: skip
        self.manifests[tag] = manifest
        self.manifests[_digest(manifest)] = manifest
        return _digest(manifest)


@pytest.fixture
def registry() -> Iterator[tuple[Registry, str]]:
    reg = Registry()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            reg.requests.append(self.path)
            if self.path.startswith("/token"):
                return self._send(200, json.dumps({"token": "t0k"}).encode())
            if reg.token is not None and self.headers.get("Authorization") != f"Bearer {reg.token}":
                self.send_response(401)
                realm = f"http://{self.headers['Host']}/token"
                self.send_header(
                    "WWW-Authenticate", f'Bearer realm="{realm}",service="reg",scope="repository:{REPO}:pull"'
                )
                self.end_headers()
                return None
            prefix = f"/v2/{REPO}/"
            if not self.path.startswith(prefix):
                return self._send(404, b"{}")
            kind, _, ref = self.path[len(prefix) :].partition("/")
            store = reg.manifests if kind == "manifests" else reg.blobs
            if ref not in store:
                return self._send(404, b"{}")
            data = store[ref]
            if ref in reg.corrupt:
                data = data[:-1] + bytes([data[-1] ^ 1])
            return self._send(200, data)

        def _send(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield reg, f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


INSTALLER = ["/usr/bin/python3.11", "-I", "-m", "ichor.installer"]


def test_the_boot_files_come_through_the_mirror_and_only_their_layer_is_fetched(
    registry: tuple[Registry, str], tmp_path: Path
) -> None:
    reg, address = registry
    digest = reg.add_image("v1.7.7", entrypoint=INSTALLER, version="v1.7.7")
    # The first mirror answers nothing: the second one serves it, the upstream is never asked.
    mirrors = {"ghcr.io": MirrorEndpoints(("http://127.0.0.1:1", f"http://{address}"))}
    assets = fetch_installer("ghcr.io/siderolabs/installer:v1.7.7", mirrors, tmp_path / "work", timeout=2)
    assert assets.version == "v1.7.7" and assets.endpoint == f"http://{address}/v2"
    assert assets.kernel.read_bytes() == b"kernel-v1.7.7"
    assert assets.initramfs.read_bytes() == b"initramfs-v1.7.7"
    assert (assets.directory / "grub" / "core.img").read_bytes() == b"core"
    blobs = [p for p in reg.requests if "/blobs/" in p]
    assert len(blobs) == 2, blobs  # the config and the top layer; not the root filesystem
    assert assets.manifest_digest == digest
    # Asked again (a refused upgrade, then the same one): the manifest and config only.
    before = len(reg.requests)
    again = fetch_installer("ghcr.io/siderolabs/installer:v1.7.7", mirrors, tmp_path / "work", timeout=2)
    assert again.kernel.read_bytes() == b"kernel-v1.7.7"
    assert [p for p in reg.requests[before:] if "/blobs/" in p] == [blobs[0]]


def test_a_bearer_challenge_is_answered_with_an_anonymous_token(
    registry: tuple[Registry, str], tmp_path: Path
) -> None:
    reg, address = registry
    reg.add_image("v2", entrypoint=INSTALLER, version="v2")
    reg.token = "t0k"
    mirrors = mirrors_from_config({"*": {"endpoints": [f"http://{address}"]}})
    assets = fetch_installer("10.0.0.1:5000/siderolabs/installer:v2", mirrors, tmp_path / "w", timeout=2)
    assert assets.version == "v2"
    assert any(p.startswith("/token?") and "scope=repository" in p for p in reg.requests)


def test_a_layer_whose_bytes_do_not_match_its_digest_is_refused(
    registry: tuple[Registry, str], tmp_path: Path
) -> None:
    reg, address = registry
    reg.add_image("v3", entrypoint=INSTALLER, version="v3")
    manifest = json.loads(reg.manifests["v3"])
    reg.corrupt.add(manifest["layers"][-1]["digest"])
    with pytest.raises(ImageError) as err:
        fetch_installer("ghcr.io/siderolabs/installer:v3",
                        {"ghcr.io": MirrorEndpoints((f"http://{address}",))}, tmp_path / "w", timeout=2,
                        fallback=False)  # fmt: skip
    assert "do not match the digest" in str(err.value)
    assert str(err.value).startswith("failed to pull ghcr.io/siderolabs/installer:v3: ")


@pytest.mark.parametrize(
    ("entrypoint", "assets", "why"),
    [
        (["/usr/bin/installer"], True, "its entry point is ['/usr/bin/installer']"),
        (INSTALLER, False, "it has no usr/install/amd64/vmlinuz"),
    ],
)
def test_an_image_that_is_not_an_ichor_installer_is_refused_at_once(
    registry: tuple[Registry, str], tmp_path: Path, entrypoint: list[str], assets: bool, why: str
) -> None:
    reg, address = registry
    reg.add_image("other", entrypoint=entrypoint, version="v9", assets=assets)
    mirrors = {"ghcr.io": MirrorEndpoints((f"http://{address}", "http://127.0.0.1:1"))}
    with pytest.raises(ImageError) as err:
        fetch_installer("ghcr.io/siderolabs/installer:other", mirrors, tmp_path / "w", timeout=2)
    assert f"ghcr.io/siderolabs/installer:other is not an Ichor installer image: {why}" in str(err.value)
    assert err.value.hint == "build it with `python -m ichor.imager installer`"
    assert not any("127.0.0.1:1" in p for p in reg.requests)


def test_every_endpoint_is_named_when_none_has_the_image(
    registry: tuple[Registry, str], tmp_path: Path
) -> None:
    _, address = registry
    # The registry itself is asked last, over HTTPS (this one speaks plain HTTP: it fails too).
    mirrors = {address: MirrorEndpoints((f"http://{address}/mirror/v2",), override_path=True)}
    with pytest.raises(ImageError) as err:
        fetch_installer(f"{address}/siderolabs/installer:nope", mirrors, tmp_path / "w", timeout=2)
    text = str(err.value)
    assert f"http://{address}/mirror/v2/siderolabs/installer/manifests/nope: HTTP 404" in text
    assert f"https://{address}/v2/siderolabs/installer/manifests/nope: " in text
