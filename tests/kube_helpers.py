"""Kubernetes PKI for tests: a CA, a server pair for 127.0.0.1/localhost and an admin kubeconfig;
a fake HTTPS server (an API server, a kubelet) that answers with a handler."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

from ichor.machinery.pki import CertKey, load_into_ssl_context, new_ecdsa_ca, new_keypair

DAY = timedelta(days=1)


@dataclass
class KubePKI:
    ca: CertKey
    server: CertKey
    admin: CertKey

    def kubeconfig(self, server_url: str, *, ca: bytes | None = None) -> str:
        b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
        return (
            "apiVersion: v1\nkind: Config\ncurrent-context: admin@test\n"
            f"clusters:\n- name: test\n  cluster:\n    server: {server_url}\n"
            f"    certificate-authority-data: {b64(ca or self.ca.crt)}\n"
            "users:\n- name: admin@test\n  user:\n"
            f"    client-certificate-data: {b64(self.admin.crt)}\n    client-key-data: {b64(self.admin.key)}\n"
            "contexts:\n- name: admin@test\n  context: {cluster: test, user: admin@test}\n"
        )


def new_kube_pki() -> KubePKI:
    ca = new_ecdsa_ca(organization="kubernetes", ttl=DAY)
    server = new_keypair(
        ca, common_name="kube-apiserver", ttl=DAY, server=True, client=False,
        dns_names=["localhost", "kubernetes"], ip_addresses=["127.0.0.1", "10.96.0.1"],
    )  # fmt: skip
    admin = new_keypair(
        ca, organizations=["system:masters"], common_name="admin", ttl=DAY, server=False, client=True
    )
    return KubePKI(ca, server, admin)


PKI = new_kube_pki()

Reply = tuple[int, bytes, dict[str, str]]
Handler = Callable[[str, str, bytes], Awaitable[Reply]]


def json_reply(code: int, body: object) -> Reply:
    return code, json.dumps(body).encode(), {"Content-Type": "application/json"}


def status_reply(code: int, reason: str, message: str) -> Reply:
    return json_reply(
        code, {"kind": "Status", "status": "Failure", "reason": reason, "message": message, "code": code}
    )


@asynccontextmanager
async def fake_apiserver(handler: Handler, pki: KubePKI = PKI) -> AsyncIterator[str]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_into_ssl_context(ctx, pki.server.crt, pki.server.key)
    ctx.load_verify_locations(cadata=pki.ca.crt.decode())
    ctx.verify_mode = ssl.CERT_REQUIRED

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            method, target = head.split(" ")[:2]
            length = next(
                (
                    int(line.split(":")[1])
                    for line in head.split("\r\n")
                    if line.lower().startswith("content-length")
                ),
                0,
            )
            body = await reader.readexactly(length)
            code, data, headers = await handler(method, target, body)
            extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            if "Transfer-Encoding" not in headers:
                extra += f"Content-Length: {len(data)}\r\n"
            writer.write(f"HTTP/1.1 {code} X\r\n{extra}\r\n".encode() + data)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()
