"""ichor.client against real grpclib servers on 127.0.0.1 with Talos-shaped Ed25519 PKI.

Each test starts its servers on kernel-picked ports and closes them in ``finally``; every await is
bounded by ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
import base64
import random
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from google.protobuf import empty_pb2
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server, Stream

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_grpc, machine_pb2
from ichor.api.gen.v1alpha1 import state_grpc, state_pb2
from ichor.cli._root import GlobalOptions
from ichor.client import (
    CertificateNameError,
    Client,
    ConnectionFailedError,
    ConnectionLostError,
    EndpointUnreachableError,
    FingerprintMismatchError,
    PermissionDeniedError,
    RPCError,
    UnknownAuthorityError,
    node_replies,
    spki_fingerprint,
)
from ichor.machinery.clientconfig import TalosConfig, issue_admin_context
from ichor.machinery.pki import CertKey, load_certificate, load_private_key, new_ed25519_ca, new_keypair
from ichor.machinery.secrets import SecretsBundle

TIMEOUT = 10.0


class _NoShuffle(random.Random):
    def shuffle(self, x: Any, random: Any = None) -> None:  # keep the order given, to test failover
        return None


# --------------------------------------------------------------------------- servers


class _Machine(machine_grpc.MachineServiceBase):
    """Version answers apid-style: one element per ``nodes`` value; node "bad" fails in-band."""

    def __init__(self) -> None:
        self.seen: list[list[tuple[str, str]]] = []

    async def Version(self, stream: Stream[empty_pb2.Empty, machine_pb2.VersionResponse]) -> None:
        async with asyncio.timeout(TIMEOUT):
            await stream.recv_message()
            md = (
                [(k, v) for k, v in stream.metadata.items() if k in ("node", "nodes")]
                if stream.metadata
                else []
            )
            self.seen.append(md)
            nodes = [v for k, v in md if k == "nodes"]
            reply = machine_pb2.VersionResponse()
            for node in nodes or [""]:
                element = reply.messages.add()
                if node == "bad":
                    element.metadata.hostname = node
                    element.metadata.error = "rpc error: code = Unavailable desc = node is down"
                    element.metadata.status.code = Status.UNAVAILABLE.value
                    element.metadata.status.message = "node is down"
                    continue
                if node:
                    element.metadata.hostname = node
                element.version.tag = "v1.7.6"
            await stream.send_message(reply)

    async def Reboot(self, stream: Stream[Any, Any]) -> None:
        raise GRPCError(Status.PERMISSION_DENIED, "not authorized")


async def _unimplemented(self: Any, stream: Stream[Any, Any]) -> None:
    raise GRPCError(Status.UNIMPLEMENTED)


for _name in machine_grpc.MachineServiceBase.__abstractmethods__ - {"Version", "Reboot"}:
    setattr(_Machine, _name, _unimplemented)
_Machine.__abstractmethods__ = frozenset()


class _State(state_grpc.StateBase):
    def __init__(self) -> None:
        self.seen: list[list[tuple[str, str]]] = []

    async def Get(self, stream: Stream[state_pb2.GetRequest, state_pb2.GetResponse]) -> None:
        async with asyncio.timeout(TIMEOUT):
            await stream.recv_message()
            assert stream.metadata is not None
            self.seen.append([(k, v) for k, v in stream.metadata.items() if k in ("node", "nodes")])
            await stream.send_message(state_pb2.GetResponse())


for _name in state_grpc.StateBase.__abstractmethods__ - {"Get"}:
    setattr(_State, _name, _unimplemented)
_State.__abstractmethods__ = frozenset()


def _files(tmp_path: Path, name: str, pair: CertKey) -> tuple[Path, Path]:
    crt, key = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    crt.write_bytes(pair.crt)
    # OpenSSL does not read Talos's "ED25519 PRIVATE KEY" label; the server side uses PKCS#8.
    key.write_bytes(
        load_private_key(pair.key).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return crt, key


def _server_tls(tmp_path: Path, server: CertKey, client_ca: CertKey | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(*_files(tmp_path, "server", server))
    if client_ca is not None:
        ctx.load_verify_locations(cadata=client_ca.crt.decode())
        ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.set_alpn_protocols(["h2"])
    return ctx


@asynccontextmanager
async def _serving(handlers: list[Any], tls: ssl.SSLContext) -> AsyncIterator[int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server = Server(handlers)
    try:
        sock.bind(("127.0.0.1", 0))
        async with asyncio.timeout(TIMEOUT):
            await server.start(sock=sock, ssl=tls)
        yield sock.getsockname()[1]
    finally:
        server.close()
        async with asyncio.timeout(TIMEOUT):
            await server.wait_closed()
        sock.close()


def _closed_port() -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
    finally:
        sock.close()  # never listened: connecting is refused


def _apid_cert(bundle: SecretsBundle, *, ips: list[str], dns: list[str] = ()) -> CertKey:  # type: ignore[assignment]
    return new_keypair(
        bundle.os,
        common_name="node.example",
        ttl=timedelta(days=1),
        server=True,
        client=False,
        ip_addresses=ips,
        dns_names=list(dns),
    )


def _talosconfig(
    tmp_path: Path, bundle: SecretsBundle, *, endpoints: list[str], roles: tuple[str, ...] = ("os:admin",)
) -> Path:
    ctx = issue_admin_context(bundle, endpoints=endpoints, roles=roles)
    return TalosConfig(context="demo", contexts={"demo": ctx}).save(tmp_path / "talosconfig")


def _run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(60):
            await scenario()

    asyncio.run(bounded())


# --------------------------------------------------------------------------- mutual TLS


def test_talosconfig_reaches_an_ed25519_mtls_server_with_nodes_metadata(tmp_path: Path) -> None:
    bundle = SecretsBundle.generate()
    machine, state = _Machine(), _State()
    tls = _server_tls(tmp_path, _apid_cert(bundle, ips=["127.0.0.1"]), bundle.os)

    async def scenario() -> None:
        async with _serving([machine, state], tls) as port:
            path = _talosconfig(tmp_path, bundle, endpoints=[f"127.0.0.1:{port}"])
            opts = GlobalOptions(talosconfig=str(path), nodes=["10.5.0.2", "bad"])
            async with Client.from_options(opts) as c:
                async with asyncio.timeout(TIMEOUT):
                    reply = await c.machine.Version(empty_pb2.Empty())
                assert machine.seen[-1] == [("nodes", "10.5.0.2"), ("nodes", "bad")]
                replies = node_replies(reply, fallback_node=c.peer_host)
                assert [(n, m.version.tag) for n, m in replies] == [("10.5.0.2", "v1.7.6")]
                assert [str(e) for e in replies.errors] == [
                    "bad: rpc error: code = Unavailable desc = node is down"
                ]
                assert c.current_endpoint is not None and c.current_endpoint.port == port

                # COSI goes one node at a time with `node`, never `nodes`.
                async with asyncio.timeout(TIMEOUT):
                    await c.with_node("10.5.0.2").cosi.Get(state_pb2.GetRequest())
                assert state.seen == [[("node", "10.5.0.2")]]

                # No nodes: the endpoint answers itself, without hostname; NODE is the peer.
                async with asyncio.timeout(TIMEOUT):
                    plain = await c.without_nodes().machine.Version(empty_pb2.Empty())
                assert machine.seen[-1] == []
                assert [n for n, _ in node_replies(plain, fallback_node=c.peer_host)] == ["127.0.0.1"]

                # gRPC statuses leave as RPCError in talosctl's words.
                with pytest.raises(RPCError) as unimpl:
                    async with asyncio.timeout(TIMEOUT):
                        await c.machine.Hostname(empty_pb2.Empty())
                assert unimpl.value.code_name == "Unimplemented"
                assert str(unimpl.value).startswith("rpc error: code = Unimplemented desc = ")

    _run(scenario)


def test_permission_denied_names_the_role(tmp_path: Path) -> None:
    bundle = SecretsBundle.generate()
    tls = _server_tls(tmp_path, _apid_cert(bundle, ips=["127.0.0.1"]), bundle.os)

    async def scenario() -> None:
        async with _serving([_Machine()], tls) as port:
            path = _talosconfig(tmp_path, bundle, endpoints=[f"127.0.0.1:{port}"], roles=("os:reader",))
            async with Client.from_options(GlobalOptions(talosconfig=str(path), nodes=["n1"])) as c:
                with pytest.raises(PermissionDeniedError) as err:
                    async with asyncio.timeout(TIMEOUT):
                        await c.machine.Reboot(machine_pb2.RebootRequest())
        assert err.value.roles_needed == ("os:admin", "os:operator")
        assert err.value.hint is not None and "context 'demo' has os:reader" in err.value.hint

    _run(scenario)


# --------------------------------------------------------------------------- failover


def test_failover_to_the_next_endpoint_and_all_down(tmp_path: Path) -> None:
    bundle = SecretsBundle.generate()
    tls = _server_tls(tmp_path, _apid_cert(bundle, ips=["127.0.0.1"]), bundle.os)
    dead = _closed_port()

    async def scenario() -> None:
        ctx = issue_admin_context(bundle)
        async with _serving([_Machine()], tls) as port:  # noqa: SIM117 - the client needs the port
            async with Client.from_context(
                ctx,
                name="demo",
                endpoints=[f"127.0.0.1:{dead}", f"127.0.0.1:{port}"],
                nodes=["n1"],
                rng=_NoShuffle(),
            ) as c:
                assert [e.port for e in c._conn.channel().dial_order] == [dead, port]
                async with asyncio.timeout(TIMEOUT):
                    reply = await c.machine.Version(empty_pb2.Empty())
                assert reply.messages[0].version.tag == "v1.7.6"
                assert c.current_endpoint is not None and c.current_endpoint.port == port

                # Streams fail over the same way when they are established.
                async with asyncio.timeout(TIMEOUT):
                    async with c.machine.Version.open() as stream:
                        await stream.send_message(empty_pb2.Empty(), end=True)
                        assert (await stream.recv_message()) is not None

        dead2 = _closed_port()
        async with Client.from_context(
            ctx, name="demo", endpoints=[f"127.0.0.1:{dead}", f"127.0.0.1:{dead2}"], nodes=["n1"]
        ) as c:
            with pytest.raises(EndpointUnreachableError) as err:
                async with asyncio.timeout(TIMEOUT):
                    await c.machine.Version(empty_pb2.Empty())
        message = str(err.value)
        assert message.startswith("cannot connect to any endpoint:")
        assert f"127.0.0.1:{dead}: connection refused" in message
        assert f"127.0.0.1:{dead2}: connection refused" in message
        assert sorted(f.endpoint for f in err.value.failures) == sorted(
            [f"127.0.0.1:{dead}", f"127.0.0.1:{dead2}"]
        )
        assert err.value.hint is not None and "talosctl config endpoint" in err.value.hint

    _run(scenario)


def test_connect_timeout_is_reported_per_endpoint(tmp_path: Path) -> None:
    bundle = SecretsBundle.generate()
    # A listening socket that never accepts: the TLS handshake cannot finish.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)

    async def scenario() -> None:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        ctx = issue_admin_context(bundle)
        async with Client.from_context(
            ctx, name="demo", endpoints=[f"127.0.0.1:{port}"], nodes=["n1"], connect_timeout=0.3
        ) as c:
            with pytest.raises(EndpointUnreachableError, match=rf"127.0.0.1:{port}: timed out after 0.3s"):
                async with asyncio.timeout(TIMEOUT):
                    await c.machine.Version(empty_pb2.Empty())

    try:
        _run(scenario)
    finally:
        sock.close()


# --------------------------------------------------------------------------- TLS problems


def test_wrong_ca_is_unknown_authority_with_the_mixed_talosconfig_hint(tmp_path: Path) -> None:
    cluster, other = SecretsBundle.generate(), SecretsBundle.generate()
    tls = _server_tls(tmp_path, _apid_cert(cluster, ips=["127.0.0.1"]), cluster.os)

    async def scenario() -> None:
        async with _serving([_Machine()], tls) as port:
            path = _talosconfig(tmp_path, other, endpoints=[f"127.0.0.1:{port}"])
            async with Client.from_options(GlobalOptions(talosconfig=str(path), nodes=["n1"])) as c:
                with pytest.raises(UnknownAuthorityError) as err:
                    async with asyncio.timeout(TIMEOUT):
                        await c.machine.Version(empty_pb2.Empty())
        assert "certificate signed by unknown authority" in str(err.value)
        assert "the context trusts CA key id" in str(err.value)  # the two CAs, side by side
        assert f"127.0.0.1:{port}" in str(err.value)
        assert err.value.hint is not None
        assert "the endpoint's CA differs from the talosconfig context 'demo' CA" in err.value.hint

    _run(scenario)


def test_a_node_in_maintenance_mode_is_named_as_such_not_as_another_cluster(tmp_path: Path) -> None:
    from ichor.client import MaintenanceModeError
    from ichor.client.health import plain_reason
    from ichor.machined._certs import maintenance_certificate

    cluster = SecretsBundle.generate()
    tls = _server_tls(
        tmp_path, maintenance_certificate(address="127.0.0.1", hostname="talos-127-0-0-1"), None
    )

    async def scenario() -> None:
        async with _serving([_Machine()], tls) as port:
            path = _talosconfig(tmp_path, cluster, endpoints=[f"127.0.0.1:{port}"])
            async with Client.from_options(GlobalOptions(talosconfig=str(path), nodes=["n1"])) as c:
                with pytest.raises(MaintenanceModeError) as err:
                    async with asyncio.timeout(TIMEOUT):
                        await c.machine.Version(empty_pb2.Empty())
        assert "the node is in maintenance mode" in str(err.value)
        assert "another cluster" not in str(err.value) and "unknown authority" not in str(err.value)
        assert (
            err.value.hint is not None
            and "talosctl apply-config --insecure --nodes 127.0.0.1" in err.value.hint
        )
        assert plain_reason(err.value) == "still in maintenance mode"

    _run(scenario)


def test_server_certificate_without_the_endpoint_ip_is_a_clear_error(tmp_path: Path) -> None:
    bundle = SecretsBundle.generate()
    tls = _server_tls(tmp_path, _apid_cert(bundle, ips=["10.9.9.9"], dns=["node.example"]), bundle.os)

    async def scenario() -> None:
        async with _serving([_Machine()], tls) as port:
            ctx = issue_admin_context(bundle)
            async with Client.from_context(
                ctx, name="demo", endpoints=[f"127.0.0.1:{port}"], nodes=["n"]
            ) as c:
                with pytest.raises(CertificateNameError) as err:
                    async with asyncio.timeout(TIMEOUT):
                        await c.machine.Version(empty_pb2.Empty())
        assert "certificate is valid for 10.9.9.9, node.example, not 127.0.0.1" in str(err.value)
        assert err.value.hint is not None and "machine.certSANs" in err.value.hint

    _run(scenario)


def test_mixed_failures_list_each_endpoint_with_its_reason(tmp_path: Path) -> None:
    bundle, other = SecretsBundle.generate(), SecretsBundle.generate()
    tls = _server_tls(tmp_path, _apid_cert(other, ips=["127.0.0.1"]), other.os)
    dead = _closed_port()

    async def scenario() -> None:
        async with _serving([_Machine()], tls) as port:
            ctx = issue_admin_context(bundle)
            async with Client.from_context(
                ctx, name="demo", endpoints=[f"127.0.0.1:{dead}", f"127.0.0.1:{port}"], nodes=["n"]
            ) as c:
                with pytest.raises(ConnectionFailedError) as err:
                    async with asyncio.timeout(TIMEOUT):
                        await c.machine.Version(empty_pb2.Empty())
        assert type(err.value) is ConnectionFailedError
        assert {f.kind for f in err.value.failures} == {"unreachable", "unknown-authority"}
        assert err.value.hint is not None and "'demo'" in err.value.hint

    _run(scenario)


# --------------------------------------------------------------------------- maintenance mode


def test_insecure_mode_with_right_and_wrong_fingerprint(tmp_path: Path) -> None:
    maintenance_ca = new_ed25519_ca(organization="maintenance", ttl=timedelta(days=1))
    cert = new_keypair(
        maintenance_ca, common_name="maintenance", ttl=timedelta(days=1), server=True, client=False
    )
    machine = _Machine()
    tls = _server_tls(tmp_path, cert, None)  # server-only TLS, no client certificate
    der = load_certificate(cert.crt).public_bytes(serialization.Encoding.DER)
    right = spki_fingerprint(der)
    wrong = base64.b64encode(bytes(32)).decode()

    async def scenario() -> None:
        async with _serving([machine], tls) as port:
            node = f"127.0.0.1:{port}"
            async with Client.from_options(
                GlobalOptions(nodes=[node]), insecure=True, cert_fingerprints=[right]
            ) as c:
                async with asyncio.timeout(TIMEOUT):
                    reply = await c.machine.Version(empty_pb2.Empty())
                assert reply.messages[0].version.tag == "v1.7.6"
                assert machine.seen[-1] == []  # maintenance mode sends no node/nodes metadata

            async with Client.from_options(GlobalOptions(nodes=[node]), insecure=True) as c:
                async with asyncio.timeout(TIMEOUT):
                    await c.with_node(node).machine.Version(empty_pb2.Empty())

            async with Client.from_options(
                GlobalOptions(nodes=[node]), insecure=True, cert_fingerprints=[wrong]
            ) as c:
                with pytest.raises(FingerprintMismatchError) as err:
                    async with asyncio.timeout(TIMEOUT):
                        await c.machine.Version(empty_pb2.Empty())
            message = str(err.value)
            assert "leaf peer certificate doesn't match the provided fingerprints" in message
            assert wrong in message and right in message
            assert machine.seen == [[], []]  # the mismatched connection never made a call

    _run(scenario)


def test_secure_mode_refuses_a_fingerprint_flag() -> None:
    from ichor.machinery.errors import ClientConfigError

    with pytest.raises(ClientConfigError, match="only applies with --insecure"):
        Client.from_options(GlobalOptions(), cert_fingerprints=["x"])


def test_common_empty_round_trip_is_what_servers_use() -> None:
    # Keeps the hand-built in-band failure honest: it is the wire shape apid sends.
    failure = common_pb2.EmptyResponse(
        messages=[common_pb2.Empty(metadata=common_pb2.Metadata(hostname="bad", error="e"))]
    ).SerializeToString()
    assert machine_pb2.VersionResponse.FromString(failure).messages[0].metadata.hostname == "bad"


class _Streaming(_Machine):
    async def Logs(self, stream: Stream[Any, Any]) -> None:
        async with asyncio.timeout(TIMEOUT):
            await stream.recv_message()
            await stream.send_message(common_pb2.Data(bytes=b"line 1\n"))
            raise GRPCError(Status.NOT_FOUND, "service not found")


_Streaming.__abstractmethods__ = frozenset()


def test_stream_errors_leave_the_block_as_rpc_errors(tmp_path: Path) -> None:
    bundle = SecretsBundle.generate()
    tls = _server_tls(tmp_path, _apid_cert(bundle, ips=["127.0.0.1"]), bundle.os)

    async def scenario() -> None:
        async with _serving([_Streaming()], tls) as port:
            ctx = issue_admin_context(bundle)
            async with Client.from_context(
                ctx, name="demo", endpoints=[f"127.0.0.1:{port}"], nodes=["n"]
            ) as c:
                got: list[bytes] = []
                with pytest.raises(RPCError) as err:
                    async with asyncio.timeout(TIMEOUT), c.machine.Logs.open() as stream:
                        await stream.send_message(machine_pb2.LogsRequest(id="x"), end=True)
                        async for chunk in stream:
                            got.append(chunk.bytes)
        assert got == [b"line 1\n"]
        assert str(err.value) == "rpc error: code = NotFound desc = service not found"
        assert err.value.method == "/machine.MachineService/Logs"

    _run(scenario)


def test_client_certificate_from_another_cluster_is_a_lost_connection_with_a_hint(tmp_path: Path) -> None:
    cluster, other = SecretsBundle.generate(), SecretsBundle.generate()
    tls = _server_tls(tmp_path, _apid_cert(cluster, ips=["127.0.0.1"]), cluster.os)

    async def scenario() -> None:
        async with _serving([_Machine()], tls) as port:
            ctx = issue_admin_context(other)
            ctx.ca = cluster.os.crt_b64()  # trusts the node, but its certificate is another cluster's
            async with Client.from_context(
                ctx, name="demo", endpoints=[f"127.0.0.1:{port}"], nodes=["n"]
            ) as c:
                with pytest.raises(RPCError) as err:
                    async with asyncio.timeout(TIMEOUT):
                        await c.machine.Version(empty_pb2.Empty())
        assert isinstance(err.value, ConnectionLostError)
        assert err.value.code_name == "Unavailable"
        assert err.value.hint is not None and "context 'demo'" in err.value.hint

    _run(scenario)


def test_leaving_the_client_closes_its_sockets_before_returning(tmp_path: Path) -> None:
    """No socket outlives ``async with Client``: TLS closes in loop callbacks, and aclose waits for them."""
    bundle = SecretsBundle.generate()
    machine = _Machine()
    tls = _server_tls(tmp_path, _apid_cert(bundle, ips=["127.0.0.1"]), bundle.os)

    async def scenario() -> None:
        async with _serving([machine, _State()], tls) as port:
            path = _talosconfig(tmp_path, bundle, endpoints=[f"127.0.0.1:{port}"])
            async with Client.from_options(GlobalOptions(talosconfig=str(path))) as c:
                await c.machine.Version(empty_pb2.Empty())
                transport = next(iter(c._conn.channel()._open.values()))
                raw = transport.get_extra_info("socket")
                assert raw.fileno() != -1
            # Right after the block, with no loop turn given: the socket is closed.
            assert raw.fileno() == -1

    _run(scenario)
