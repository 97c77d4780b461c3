"""A node's installer fetch from a REAL registry that wants credentials over TLS (``machine.registries.config``).

Debian's ``docker-registry`` (distribution 2.8) serves on 127.0.0.1 with ``auth.htpasswd`` (bcrypt,
made here with libcrypt) and a self-signed certificate for 127.0.0.1 (openssl). An installer-shaped
image is pushed to it over its API with the credentials; then the node side,
:func:`ichor.images.fetch_installer` with what :func:`ichor.machined.upgrade.upgrade_inputs` takes
from a real machine config, must: fail without credentials (401), with a wrong password (401) and
without the CA (certificate verify failed); succeed with ``auth.username``/``password`` and
``tls.ca`` (and ``tls.clientIdentity``: the registry's ``clientcas`` wants a client certificate,
and a fetch without one fails), with ``auth.auth`` and ``tls.insecureSkipVerify``. Talos's rules (settings by the
mirror endpoint's ``host:port``) are those of ``tests/test_installer_fetch_auth.py``.

Time budget: about 3 s (measured 0.4 s for the test, the registry starts in well under a second; eight fetches of a tiny image).
No lock is needed for so short a process, but it runs in the e2e tier because it starts one.
"""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import hashlib
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_installer_fetch import INSTALLER, REPO, Registry

from ichor.images import ImageError, fetch_installer
from ichor.machined.configstore import LoadedConfig
from ichor.machined.upgrade import upgrade_inputs
from ichor.machinery import proc
from ichor.machinery.config import load_config

USER, PASSWORD = "upg3", "pa55-word"


def _bcrypt(password: str) -> str | None:
    """A bcrypt hash from the system's libcrypt (None when it has no bcrypt)."""
    name = ctypes.util.find_library("crypt")
    if name is None:
        return None
    lib = ctypes.CDLL(name)
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = lib.crypt_gensalt(b"$2y$", 5, None, 0)
    hashed = lib.crypt(password.encode(), salt) if salt else None
    return hashed.decode() if hashed and hashed.startswith(b"$2") else None


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        any(shutil.which(tool) is None for tool in ("docker-registry", "openssl")),
        reason="needs docker-registry and openssl (bash run.sh installs docker-registry as root)",
    ),
]


@dataclass
class Served:
    address: str
    ca_pem: bytes
    log: Path
    client_crt: Path
    client_key: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Served]:
    hashed = _bcrypt(PASSWORD)
    if hashed is None:
        pytest.skip("needs libcrypt with bcrypt for the registry's htpasswd")
    (tmp_path / "htpasswd").write_text(f"{USER}:{hashed}\n")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(tmp_path / "tls.key"), "-out", str(tmp_path / "tls.crt"), "-days", "1",
         "-subj", "/CN=upg3-registry", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    subprocess.run(  # the client identity the registry asks for (its own CA: the registry's clientcas)
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(tmp_path / "client.key"), "-out", str(tmp_path / "client.crt"), "-days", "1",
         "-subj", "/CN=upg3-node"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    port = _free_port()
    (tmp_path / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: info\n"
        f"storage:\n  filesystem:\n    rootdirectory: {tmp_path / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {tmp_path / 'tls.crt'}\n"
        f"    key: {tmp_path / 'tls.key'}\n    clientcas:\n      - {tmp_path / 'client.crt'}\n"
        f"auth:\n  htpasswd:\n    realm: upg3-registry\n    path: {tmp_path / 'htpasswd'}\n"
    )
    log = tmp_path / "registry.log"
    child = proc.start(["docker-registry", "serve", str(tmp_path / "config.yml")], output=log)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if child.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"docker-registry did not listen on 127.0.0.1:{port}: {log.read_text()[-2000:]}"
                    )
                time.sleep(0.05)
        yield Served(f"127.0.0.1:{port}", (tmp_path / "tls.crt").read_bytes(), log, tmp_path / "client.crt",
                     tmp_path / "client.key")  # fmt: skip
    finally:
        child.stop(timeout=5)


def _push(served: Served, tag: str) -> str:
    """Push an installer-shaped image (the unit tests' layout) with the credentials; its manifest digest."""
    image = Registry()
    digest = image.add_image(tag, entrypoint=INSTALLER, version=tag)
    context = ssl.create_default_context(cadata=served.ca_pem.decode())
    context.load_cert_chain(served.client_crt, served.client_key)
    auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    base = f"https://{served.address}/v2/{REPO}"

    def send(method: str, url: str, body: bytes = b"", content_type: str = "") -> tuple[int, str]:
        headers = {"Authorization": auth, "Content-Length": str(len(body))}
        if content_type:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(
            url, data=body if method != "GET" else None, method=method, headers=headers
        )
        with urllib.request.urlopen(request, timeout=10, context=context) as reply:
            return reply.status, reply.headers.get("Location", "")

    for blob_digest, blob in image.blobs.items():
        status, location = send("POST", f"{base}/blobs/uploads/")
        assert status == 202, status
        location = location if location.startswith("https://") else f"https://{served.address}{location}"
        separator = "&" if "?" in location else "?"
        status, _ = send(
            "PUT", f"{location}{separator}digest={blob_digest}", blob, "application/octet-stream"
        )
        assert status == 201, status
    manifest = image.manifests[tag]
    assert "sha256:" + hashlib.sha256(manifest).hexdigest() == digest
    status, _ = send("PUT", f"{base}/manifests/{tag}", manifest, "application/vnd.oci.image.manifest.v1+json")
    assert status == 201, status
    return digest


def _machine_config(address: str, auth: str, tls: str) -> LoadedConfig:
    text = (
        "version: v1alpha1\nmachine:\n  type: worker\n  install:\n    disk: /dev/vda\n  registries:\n"
        f"    mirrors:\n      ghcr.io:\n        endpoints: [https://{address}]\n"
        f"    config:\n      {address}:\n{auth}{tls}"
    )
    return LoadedConfig(load_config(text), text)


def test_installer_pulled_with_htpasswd_credentials_and_the_registry_ca(
    registry: Served, tmp_path: Path
) -> None:
    """Budget: 3 s."""
    digest = _push(registry, "v1.7.7")
    image = "ghcr.io/siderolabs/installer:v1.7.7"
    ca = base64.b64encode(registry.ca_pem).decode()
    crt, key = (base64.b64encode(p.read_bytes()).decode() for p in (registry.client_crt, registry.client_key))
    identity = f"          clientIdentity:\n            crt: {crt}\n            key: {key}\n"
    with_ca = f"        tls:\n          ca: {ca}\n{identity}"
    login = f"        auth:\n          username: {USER}\n          password: {PASSWORD}\n"

    def fetch(auth: str, tls: str, work: str) -> str:
        registries, _ = upgrade_inputs(_machine_config(registry.address, auth, tls).config)
        return fetch_installer(image, registries, tmp_path / work, fallback=False, timeout=10).manifest_digest

    assert fetch(login, with_ca, "ok") == digest
    assert (tmp_path / "ok" / "assets" / "vmlinuz").read_bytes() == b"kernel-v1.7.7"

    no_login = "        auth:\n          identityToken: ''\n"
    with pytest.raises(ImageError, match="HTTP 401 Unauthorized"):
        fetch("", with_ca, "anonymous")  # tls only: no credentials to answer the Basic challenge
    wrong = f"        auth:\n          username: {USER}\n          password: wrong\n"
    with pytest.raises(ImageError, match="HTTP 401 Unauthorized"):
        fetch(wrong, with_ca, "wrong")
    with pytest.raises(ImageError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        fetch(login, f"        tls:\n{identity}", "no-ca")  # the system roots do not know the registry's cert
    with pytest.raises(ImageError, match=r"(?i)certificate required|handshake|alert|reset|EOF"):
        fetch(login, f"        tls:\n          ca: {ca}\n", "no-identity")  # the registry wants a client cert
    with pytest.raises(ImageError, match=r'invalid auth config for "127\.0\.0\.1'):
        fetch(no_login, with_ca, "empty-auth")

    packed = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    skip = f"        tls:\n          insecureSkipVerify: true\n{identity}"
    assert fetch(f"        auth:\n          auth: {packed}\n", skip, "packed") == digest
    # the registry's own word: the two good fetches were authorized GETs, the others refused by it
    gets = [line for line in registry.log.read_text().splitlines()
            if "http.request.method=GET" in line and "/manifests/v1.7.7" in line]  # fmt: skip
    assert sum('msg="authorized request"' in line for line in gets) == 2, gets
    assert any("invalid authorization credential" in line for line in gets), gets
