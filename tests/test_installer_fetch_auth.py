"""The installer fetch with ``machine.registries.config``: credentials and TLS per endpoint host (``images._access``).

A registry double on loopback (Python's http.server, in this process) asks for ``Basic`` or
``Bearer`` credentials the way distribution and token servers do; the expectations are Talos
1.7.6's resolver rules (``PrepareAuth``, the config looked up by the endpoint's ``host:port``, TLS
refused on plain HTTP) and containerd's token requests (an OAuth2 POST first when there is a
secret, a GET with Basic credentials when the POST is not supported). A real registry with
htpasswd and TLS is in ``tests/test_e2e_installer_registry_auth.py``.
"""

from __future__ import annotations

import base64
import http.server
import json
import threading
import urllib.error
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from test_installer_fetch import INSTALLER, REPO, Registry

from ichor.images import (
    ImageError,
    MirrorEndpoints,
    Registries,
    RegistryAccess,
    access_from_config,
    fetch_installer,
    prepare_auth,
)
from ichor.machined.configstore import LoadedConfig
from ichor.machined.upgrade import upgrade_inputs
from ichor.machinery.config import load_config

USER, PASSWORD = "ichor", "s3cret:with-colon"


@dataclass
class Guarded:
    """How the double guards its API: ``basic`` (user and password) or ``bearer`` (a token server
    at ``/token`` that wants the credentials; ``post`` False answers POST with 404)."""

    scheme: str
    post: bool = True
    identity_token: str = ""
    token_requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)


@pytest.fixture
def guarded() -> Iterator[tuple[Registry, Guarded, str]]:
    reg, guard = Registry(), Guarded("basic")
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
            guard.token_requests.append(("POST", form))
            if not guard.post:
                return self._send(404, b"{}")
            good = (form.get("grant_type") == "password" and form.get("username") == USER
                    and form.get("password") == PASSWORD) or (
                form.get("grant_type") == "refresh_token" and form.get("refresh_token") == guard.identity_token != "")  # fmt: skip
            ok = good and form.get("client_id") == "containerd-client" and form.get("service") == "reg"
            return (
                self._send(200, json.dumps({"access_token": "t0k"}).encode())
                if ok
                else self._send(401, b"{}")
            )

        def do_GET(self) -> None:
            reg.requests.append(self.path)
            if self.path.startswith("/token"):
                guard.token_requests.append(("GET", {"authorization": self.headers.get("Authorization", "")}))
                if self.headers.get("Authorization") != basic:
                    return self._send(401, b"{}")
                return self._send(200, json.dumps({"token": "t0k"}).encode())
            wanted = basic if guard.scheme == "basic" else "Bearer t0k"
            if self.headers.get("Authorization") != wanted:
                self.send_response(401)
                if guard.scheme == "basic":
                    self.send_header("WWW-Authenticate", 'Basic realm="Registry Realm"')
                else:
                    realm = f"http://{self.headers['Host']}/token"
                    self.send_header("WWW-Authenticate",
                                     f'Bearer realm="{realm}",service="reg",scope="repository:{REPO}:pull"')  # fmt: skip
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            prefix = f"/v2/{REPO}/"
            kind, _, ref = self.path[len(prefix) :].partition("/")
            store = reg.manifests if kind == "manifests" else reg.blobs
            return self._send(200, store[ref]) if ref in store else self._send(404, b"{}")

        def _send(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield reg, guard, f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _registries(address: str, config: dict[str, RegistryAccess]) -> Registries:
    return Registries({"ghcr.io": MirrorEndpoints((f"http://{address}",))}, config)


def test_basic_credentials_are_sent_only_to_the_endpoint_host_they_are_configured_for(
    guarded: tuple[Registry, Guarded, str], tmp_path: Path
) -> None:
    reg, _guard, address = guarded
    reg.add_image("v2", entrypoint=INSTALLER, version="v2")
    image = "ghcr.io/siderolabs/installer:v2"
    with pytest.raises(ImageError, match="HTTP 401 Unauthorized"):
        fetch_installer(image, _registries(address, {}), tmp_path / "none", fallback=False)
    # Talos looks the settings up by the endpoint's host:port, not by the registry's name
    by_name = {"ghcr.io": RegistryAccess(username=USER, password=PASSWORD, has_auth=True)}
    with pytest.raises(ImageError, match="HTTP 401 Unauthorized"):
        fetch_installer(image, _registries(address, by_name), tmp_path / "by-name", fallback=False)
    by_host = {address: RegistryAccess(username=USER, password=PASSWORD, has_auth=True)}
    assets = fetch_installer(image, _registries(address, by_host), tmp_path / "ok", fallback=False)
    assert assets.version == "v2" and assets.kernel.read_bytes() == b"kernel-v2"
    # the docker-config ``auth`` form of the same credentials
    packed = {
        address: RegistryAccess(auth=base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(), has_auth=True)
    }
    assert (
        fetch_installer(image, _registries(address, packed), tmp_path / "auth", fallback=False).version
        == "v2"
    )


def test_a_bearer_token_is_asked_for_with_the_credentials_post_first_then_get(
    guarded: tuple[Registry, Guarded, str], tmp_path: Path
) -> None:
    reg, guard, address = guarded
    guard.scheme = "bearer"
    reg.add_image("v2", entrypoint=INSTALLER, version="v2")
    image = "ghcr.io/siderolabs/installer:v2"
    config = {address: RegistryAccess(username=USER, password=PASSWORD, has_auth=True)}
    assert (
        fetch_installer(image, _registries(address, config), tmp_path / "post", fallback=False).version
        == "v2"
    )
    assert guard.token_requests[0][0] == "POST" and guard.token_requests[0][1]["grant_type"] == "password"
    assert guard.token_requests[0][1]["scope"] == f"repository:{REPO}:pull"
    assert all(method == "POST" for method, _ in guard.token_requests)

    guard.token_requests.clear()
    guard.post = False  # a token server without the OAuth2 POST (404): a GET with Basic credentials
    assert (
        fetch_installer(image, _registries(address, config), tmp_path / "get", fallback=False).version == "v2"
    )
    assert [method for method, _ in guard.token_requests] == ["POST", "GET"]
    assert guard.token_requests[1][1]["authorization"].startswith("Basic ")

    guard.token_requests.clear()
    with pytest.raises(ImageError, match="no token"):  # anonymous: a GET without credentials, refused
        fetch_installer(image, _registries(address, {}), tmp_path / "anon", fallback=False)
    assert guard.token_requests == [("GET", {"authorization": ""})]


def test_an_identity_token_is_a_refresh_token_without_a_user(
    guarded: tuple[Registry, Guarded, str], tmp_path: Path
) -> None:
    reg, guard, address = guarded
    guard.scheme, guard.identity_token = "bearer", "id-tok"
    reg.add_image("v2", entrypoint=INSTALLER, version="v2")
    config = {address: RegistryAccess(identity_token="id-tok", has_auth=True)}
    assets = fetch_installer("ghcr.io/siderolabs/installer:v2", _registries(address, config), tmp_path,
                             fallback=False)  # fmt: skip
    assert assets.version == "v2"
    form = guard.token_requests[0][1]
    assert form["grant_type"] == "refresh_token" and "username" not in form


def test_prepare_auth_as_talos() -> None:
    host = "registry.lan:5000"
    packed = base64.b64encode(b"u:p\x00\x00").decode()
    assert prepare_auth(RegistryAccess(username="u", password="p", identity_token="t", has_auth=True), host,
                        host) == ("u", "p")  # fmt: skip
    assert prepare_auth(RegistryAccess(identity_token="t", auth=packed, has_auth=True), host, host) == (
        "",
        "t",
    )
    assert prepare_auth(RegistryAccess(auth=packed, has_auth=True), host, host) == ("u", "p")
    assert prepare_auth(RegistryAccess(username="u", has_auth=True), host, "other:5000") == ("", "")
    assert prepare_auth(None, host, host) == ("", "") == prepare_auth(RegistryAccess(), host, host)
    with pytest.raises(ImageError) as failed:
        prepare_auth(RegistryAccess(has_auth=True), host, host)
    assert str(failed.value) == 'invalid auth config for "registry.lan:5000"'
    with pytest.raises(ImageError) as failed:
        prepare_auth(RegistryAccess(auth=base64.b64encode(b"nocolon").decode(), has_auth=True), host, host)
    assert str(failed.value) == 'invalid decoded auth for "registry.lan:5000": "nocolon"'
    with pytest.raises(ImageError) as failed:
        prepare_auth(RegistryAccess(auth="dXNl*jpw", has_auth=True), host, host)
    assert (
        str(failed.value) == 'error parsing auth for "registry.lan:5000": illegal base64 data at input byte 4'
    )


def test_tls_settings_on_a_plain_http_endpoint_are_refused_before_any_request(tmp_path: Path) -> None:
    config = {"127.0.0.1:1": RegistryAccess(has_tls=True, insecure_skip_verify=True)}
    with pytest.raises(ImageError) as failed:
        fetch_installer("ghcr.io/siderolabs/installer:v2", _registries("127.0.0.1:1", config), tmp_path,
                        fallback=False)  # fmt: skip
    assert str(failed.value) == 'TLS config specified for non-HTTPS registry: "127.0.0.1:1"'
    bad_ca = RegistryAccess(has_tls=True, ca="not base64!")
    with pytest.raises(
        ImageError, match='error preparing TLS config for "r:443": PEM material that is not base64'
    ):
        bad_ca.ssl_context("r:443")
    skip = RegistryAccess(has_tls=True, insecure_skip_verify=True).ssl_context("r:443")
    assert skip is not None and not skip.check_hostname
    assert RegistryAccess(username="u", has_auth=True).ssl_context("r:443") is None


def test_upgrade_inputs_carry_registries_config_from_the_machine_config() -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    text = (
        "version: v1alpha1\nmachine:\n  type: worker\n  install:\n    disk: /dev/vda\n  registries:\n"
        "    mirrors:\n      ghcr.io:\n        endpoints: [https://registry.lan:5000]\n"
        "    config:\n      registry.lan:5000:\n        auth:\n          username: u\n          password: p\n"
        f"        tls:\n          ca: {ca}\n          insecureSkipVerify: true\n"
        "      other.lan:\n        auth:\n          identityToken: t\n"
    )
    registries, _cmdline = upgrade_inputs(LoadedConfig(load_config(text), text).config)
    assert isinstance(registries, Registries)
    assert dict(registries) == {"ghcr.io": MirrorEndpoints(("https://registry.lan:5000",))}
    lan = registries.config["registry.lan:5000"]
    assert (lan.username, lan.password, lan.has_tls, lan.insecure_skip_verify, lan.ca) == (
        "u",
        "p",
        True,
        True,
        ca,
    )
    assert registries.config["other.lan"] == RegistryAccess(identity_token="t", has_auth=True)
    plain = access_from_config({"h": {"auth": {"auth": "dTpw"}, "tls": None}})
    assert plain == {"h": RegistryAccess(auth="dTpw", has_auth=True)}


def test_a_node_s_registries_never_fall_back_to_the_registry_itself(tmp_path: Path) -> None:
    """Talos's resolver asks a configured mirror's endpoints only; a plain mapping keeps the CRI order."""
    mirrors = {"ghcr.io": MirrorEndpoints(("http://127.0.0.1:1",))}
    asked: list[str] = []

    def opener(request: Any, timeout: float) -> Any:
        asked.append(request.full_url)
        raise urllib.error.URLError("refused")

    image = "ghcr.io/siderolabs/installer:v2"
    with pytest.raises(ImageError):
        fetch_installer(image, Registries(mirrors, {}), tmp_path / "node", opener=opener)
    assert asked == ["http://127.0.0.1:1/v2/siderolabs/installer/manifests/v2"]
    asked.clear()
    with pytest.raises(ImageError):
        fetch_installer(image, mirrors, tmp_path / "plain", opener=opener)
    assert asked[-1] == "https://ghcr.io/v2/siderolabs/installer/manifests/v2"
    asked.clear()
    with pytest.raises(ImageError):  # an endpoint already ending in /v2 keeps it (Talos: no /v2/v2)
        fetch_installer(image, Registries({"ghcr.io": MirrorEndpoints(("http://127.0.0.1:1/v2/",))}, {}),
                        tmp_path / "v2", opener=opener)  # fmt: skip
    assert asked == ["http://127.0.0.1:1/v2/siderolabs/installer/manifests/v2"]
