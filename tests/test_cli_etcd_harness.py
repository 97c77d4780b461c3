"""A test double of a node's Talos API for the etcd/bootstrap/kubeconfig/health CLI tests (no tests here).

``FakeNode`` serves ``machine.MachineService`` (and ``cluster.ClusterService``, ``storage.StorageService``) over real
mutual TLS on a 127.77.x.y address from a background thread with its own event loop, so the CLI's
own ``asyncio.run`` talks to it exactly as to apid. Handlers are plain async functions per RPC; any
RPC without one answers Unimplemented. ``targets(stream)`` gives the ``nodes`` metadata so handlers
can answer one element per node, as apid does.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server, Stream

from ichor.api.gen.cluster import cluster_grpc
from ichor.api.gen.machine import machine_grpc
from ichor.api.gen.storage import storage_grpc
from ichor.api.gen.v1alpha1 import state_grpc
from ichor.machinery.clientconfig import TalosConfig, issue_admin_context
from ichor.machinery.pki import load_private_key, new_keypair
from ichor.machinery.secrets import SecretsBundle

CLIENT_TLS_CLOSE_RACE = "ignore::pytest.PytestUnraisableExceptionWarning"
"""Filter for modules using FakeNode: the CLI's client ends its loop a few turns after closing, while
its TLS close_notify exchange with a server in another thread of this process may still be pending, so
asyncio reports the transport unclosed. Client cleanup itself is tested same-loop in test_client_tls."""

Handler = Callable[[Stream[Any, Any]], Awaitable[None]]
TIMEOUT = 20.0


def targets(stream: Stream[Any, Any]) -> list[str]:
    """The ``nodes`` metadata values (one-to-many), or [] for a plain/one-to-one call."""
    if not stream.metadata:
        return []
    return [v for k, v in stream.metadata.items() if k == "nodes"]


def _service(base: type, handlers: dict[str, Handler], calls: list[str], prefix: str = "") -> Any:
    def method(name: str) -> Any:
        async def call(self: Any, stream: Stream[Any, Any]) -> None:
            calls.append(prefix + name)
            handler = handlers.get(prefix + name)
            if handler is None:
                raise GRPCError(Status.UNIMPLEMENTED, f"{name} is not implemented by the test double")
            await handler(stream)

        return call

    attrs = {name: method(name) for name in base.__abstractmethods__}  # type: ignore[attr-defined]
    cls = type(f"Fake{base.__name__}", (base,), attrs)
    cls.__abstractmethods__ = frozenset()  # type: ignore[attr-defined]
    return cls()


@functools.cache
def _cluster_secrets() -> SecretsBundle:
    """One secrets bundle for every test double of this process: generating one (an RSA service
    account key among them) costs 0.4-1 s, and no test here depends on two doubles' CAs differing."""
    return SecretsBundle.generate()


class FakeNode:
    """Mutual-TLS Talos API double; ``handlers[name] = async fn(stream)``; ``calls`` records RPC names
    (COSI State methods as ``State.<name>``, since machine and State both have ``List``)."""

    def __init__(self, tmp_path: Path, address: str) -> None:
        tmp_path = tmp_path / "fake-node"  # keep the double's files out of the directory under test
        tmp_path.mkdir()
        self.address = address
        self.handlers: dict[str, Handler] = {}
        self.calls: list[str] = []
        self.bundle = _cluster_secrets()
        server_pair = new_keypair(
            self.bundle.os,
            common_name="node",
            ttl=timedelta(days=1),
            server=True,
            client=False,
            ip_addresses=[address],
        )
        crt, key = tmp_path / "server.crt", tmp_path / "server.key"
        crt.write_bytes(server_pair.crt)
        key.write_bytes(
            load_private_key(server_pair.key).private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._tls.load_cert_chain(crt, key)
        self._tls.load_verify_locations(cadata=self.bundle.os.crt.decode())
        self._tls.verify_mode = ssl.CERT_REQUIRED
        self._tls.set_alpn_protocols(["h2"])
        self._tmp = tmp_path
        self.port = 0
        self.talosconfig = tmp_path / "talosconfig"

    @contextmanager
    def serving(self) -> Iterator[FakeNode]:
        loop = asyncio.new_event_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((self.address, 0))
        self.port = sock.getsockname()[1]
        services = [
            _service(machine_grpc.MachineServiceBase, self.handlers, self.calls),
            _service(cluster_grpc.ClusterServiceBase, self.handlers, self.calls),
            _service(storage_grpc.StorageServiceBase, self.handlers, self.calls),
            _service(state_grpc.StateBase, self.handlers, self.calls, prefix="State."),
        ]
        servers: list[Server] = []
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)

            async def start() -> None:
                # Built inside the serving loop: grpclib binds a Server to the loop current at creation.
                servers.append(Server(services))
                await servers[0].start(sock=sock, ssl=self._tls)
                ready.set()

            loop.run_until_complete(start())
            loop.run_forever()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            assert ready.wait(TIMEOUT), "test server did not start"
            ctx = issue_admin_context(self.bundle, endpoints=[f"{self.address}:{self.port}"])
            TalosConfig(context="fake", contexts={"fake": ctx}).save(self.talosconfig)
            yield self
        finally:

            async def stop() -> None:
                for server in servers:
                    server.close()
                    async with asyncio.timeout(TIMEOUT):
                        await server.wait_closed()

            asyncio.run_coroutine_threadsafe(stop(), loop).result(TIMEOUT)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(TIMEOUT)
            loop.close()
            sock.close()
            # Collect the CLI's TLS transports now, inside the test (see CLIENT_TLS_CLOSE_RACE).
            gc.collect()

    def args(self, *nodes: str) -> list[str]:
        """Global flags pointing talosctl at this double (and at ``nodes`` when given)."""
        out = ["--talosconfig", str(self.talosconfig)]
        if nodes:
            out += ["-n", ",".join(nodes)]
        return out
