"""ichor.kubeapi against a fake HTTPS API server: discovery, create, Status errors, bounds, timeouts,
and every kubeconfig mistake refused with what to fix."""

from __future__ import annotations

import asyncio
import json

import pytest
from kube_helpers import PKI, Reply, fake_apiserver, json_reply, new_kube_pki, status_reply

from ichor import kubeapi

CORE = {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
    {"name": "namespaces", "kind": "Namespace", "namespaced": False},
    {"name": "configmaps", "kind": "ConfigMap", "namespaced": True},
    {"name": "pods/log", "kind": "Pod", "namespaced": True},
]}  # fmt: skip


def _client(url: str, **kwargs: float) -> kubeapi.KubeClient:
    return kubeapi.KubeClient(kubeapi.load_kubeconfig(PKI.kubeconfig(url)), field_manager="talos", **kwargs)


def test_create_discovers_the_plural_posts_with_the_field_manager_and_maps_status_errors() -> None:
    posted: list[tuple[str, dict]] = []  # type: ignore[type-arg]

    async def handler(method: str, target: str, body: bytes) -> Reply:
        if target == "/api/v1":
            return json_reply(200, CORE)
        if method == "POST":
            obj = json.loads(body)
            posted.append((target, obj))
            if obj["metadata"]["name"] == "exists":
                return status_reply(409, "AlreadyExists", 'configmaps "exists" already exists')
            return json_reply(201, obj)
        if target == "/api/v1/namespaces/kube-system/configmaps/gone":
            return status_reply(404, "NotFound", 'configmaps "gone" not found')
        return status_reply(404, "NotFound", "the server could not find the requested resource")

    async def main() -> None:
        async with fake_apiserver(handler) as url:
            client = _client(url)
            cm = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "kube-system"},
            }
            await client.create(cm)
            await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
            assert posted[0][0] == "/api/v1/namespaces/kube-system/configmaps?fieldManager=talos"
            assert posted[1][0] == "/api/v1/namespaces?fieldManager=talos"
            with pytest.raises(kubeapi.KubeAlreadyExistsError) as exists:
                await client.create({**cm, "metadata": {"name": "exists"}})
            assert exists.value.code == 409 and exists.value.reason == "AlreadyExists"
            with pytest.raises(kubeapi.KubeNotFoundError, match='configmaps "gone" not found'):
                await client.get("/api/v1/namespaces/kube-system/configmaps/gone")
            with pytest.raises(kubeapi.KubeUnknownKindError, match="does not serve kind 'Widget'"):
                await client.create(
                    {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
                )
            with pytest.raises(kubeapi.KubeUnknownKindError, match=r"metadata\.name"):
                await client.create({"apiVersion": "v1", "kind": "ConfigMap"})
            with pytest.raises(kubeapi.KubeUnknownKindError):  # only pods/log is listed: a subresource
                await client.resource_for("v1", "Pod")

    asyncio.run(main())


@pytest.mark.parametrize(
    ("reply", "error", "text"),
    [
        ((200, b"x" * 2048, {}), kubeapi.KubeResponseError, "byte bound"),
        ((200, b"not json", {}), kubeapi.KubeResponseError, "not JSON"),
        (
            (200, b"800\r\n" + b"y" * 2048 + b"\r\n0\r\n\r\n", {"Transfer-Encoding": "chunked"}),
            kubeapi.KubeResponseError,
            "byte bound",
        ),
        (
            (403, b'{"kind":"Status","reason":"Forbidden","message":"no"}', {}),
            kubeapi.KubeStatusError,
            "Forbidden",
        ),
    ],
)
def test_bad_replies_are_refused_with_the_reason(reply: Reply, error: type[Exception], text: str) -> None:
    async def handler(method: str, target: str, body: bytes) -> Reply:
        return reply

    async def main() -> None:
        async with fake_apiserver(handler) as url:
            with pytest.raises(error, match=text):
                await _client(url, max_response_bytes=1024).get("/api")

    asyncio.run(main())


def test_unreachable_slow_and_untrusted_servers_are_connection_errors() -> None:
    async def slow(method: str, target: str, body: bytes) -> Reply:
        await asyncio.sleep(30)
        raise AssertionError("unreachable")

    async def main() -> None:
        with pytest.raises(kubeapi.KubeConnectionError, match="cannot connect"):
            await _client("https://127.0.0.1:1").get("/api")
        async with fake_apiserver(slow) as url:
            with pytest.raises(kubeapi.KubeConnectionError, match=r"within 0\.3s"):
                await _client(url, timeout=0.3).get("/api")
        other = new_kube_pki()
        async with fake_apiserver(slow, other) as url:
            with pytest.raises(kubeapi.KubeConnectionError, match="TLS"):
                await _client(url).get("/api")

    asyncio.run(main())


def test_readyz_says_which_checks_failed_until_the_server_is_ready() -> None:
    replies: list[Reply] = [
        (500, b"[+]ping ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n"
              b"readyz check failed\n", {}),
        (503, b"not yet", {}),
        (200, b"ok", {}),
    ]  # fmt: skip
    asked: list[str] = []

    async def handler(method: str, target: str, body: bytes) -> Reply:
        asked.append(f"{method} {target}")
        return replies.pop(0)

    async def main() -> None:
        with pytest.raises(kubeapi.KubeConnectionError, match="cannot connect"):
            await _client("https://127.0.0.1:1").readyz()
        async with fake_apiserver(handler) as url:
            client = _client(url)
            assert await client.readyz() == (
                "GET /readyz: 500 (poststarthook/rbac/bootstrap-roles failed: reason withheld)"
            )
            assert await client.readyz() == "GET /readyz: 503 not yet"
            assert await client.readyz() is None
        assert asked == ["GET /readyz"] * 3

    asyncio.run(main())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("just text", "one YAML mapping"),
        ("apiVersion: v1\nkind: Config\n", "current-context"),
        (PKI.kubeconfig("http://127.0.0.1:6443"), "https:// URL"),
        (
            PKI.kubeconfig("https://127.0.0.1:6443").replace("client-key-data: ", "client-key-data: x!"),
            "not base64",
        ),
        (
            PKI.kubeconfig("https://127.0.0.1:6443").replace(
                "current-context: admin@test", "current-context: nope"
            ),
            "no context named 'nope'",
        ),
        ("a: [", "invalid YAML"),
    ],
)
def test_a_bad_kubeconfig_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(kubeapi.KubeconfigInvalidError, match=message) as err:
        kubeapi.load_kubeconfig(text)
    assert err.value.hint


def test_a_kubeconfig_whose_ca_is_not_a_certificate_is_refused() -> None:
    config = kubeapi.load_kubeconfig(PKI.kubeconfig("https://127.0.0.1:6443", ca=b"garbage"))
    with pytest.raises(kubeapi.KubeconfigInvalidError, match="CA"):
        kubeapi.KubeClient(config)


def test_a_kubeconfig_naming_files_reads_them_through_read_file_and_says_which_is_missing() -> None:
    text = PKI.kubeconfig("https://127.0.0.1:6443")
    for key in ("client-certificate", "client-key"):
        text = text.replace(f"{key}-data:", f"{key}: /pki/pair.pem\n    unused-{key}:")
    files = {"/pki/pair.pem": PKI.admin.crt + PKI.admin.key}
    loaded = kubeapi.load_kubeconfig(text, read_file=lambda path: files[path])
    assert (loaded.cert, loaded.key) == (PKI.admin.crt, PKI.admin.key)
    kubeapi.KubeClient(loaded)  # the pair is usable

    def missing(path: str) -> bytes:
        raise FileNotFoundError(2, "No such file or directory", path)

    with pytest.raises(
        kubeapi.KubeconfigInvalidError, match=r"client-certificate /pki/pair.pem: No such file"
    ):
        kubeapi.load_kubeconfig(text, read_file=missing)
    with pytest.raises(kubeapi.KubeconfigInvalidError, match="client-certificate-data is missing"):
        kubeapi.load_kubeconfig(text)
