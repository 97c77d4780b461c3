"""apid end to end: real TLS sockets on loopback addresses, fake machineds on unix sockets.

Node A is 127.0.0.2 and node B 127.0.0.3, both with apid on the same (free) port, each in front
of its own fake machined that authorizes with ``ichor.machined.authz`` as machined will.
127.0.0.4 has nothing listening: a node that is down.

Every test runs twice: with apid reaching its machined over the unix socket, and in-process
(``MachineApi``, as on a node, where apid runs inside machined and the socket is not dialled).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import socket
import ssl
import struct
import tempfile
import tracemalloc
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from google.protobuf import empty_pb2
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.metadata import decode_grpc_message
from grpclib.server import Server, Stream

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_grpc, machine_pb2
from ichor.api.gen.v1alpha1 import state_grpc, state_pb2
from ichor.machined import authz
from ichor.machined.apid import MAX_MESSAGE_SIZE, METHODS, Apid, MachineApi, RawCodec
from ichor.machined.platform import Layout
from ichor.machinery import pki

TIMEOUT = 10.0
A, B, DOWN = "127.0.0.2", "127.0.0.3", "127.0.0.4"


# --------------------------------------------------------------------------- PKI


@dataclass(frozen=True)
class PKI:
    ca: pki.CertKey
    other_ca: pki.CertKey

    def leaf(self, *orgs: str, server_ip: str | None = None, expired: bool = False) -> pki.CertKey:
        now = datetime.now(UTC) - timedelta(days=3) if expired else None
        return pki.new_keypair(
            self.ca,
            organizations=orgs,
            common_name=server_ip,
            ttl=timedelta(hours=1),
            server=server_ip is not None,
            client=server_ip is None,
            ip_addresses=[server_ip] if server_ip else [],
            now=now,
        )


@pytest.fixture(scope="module")
def ca() -> PKI:
    return PKI(
        pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1)),
        pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1)),
    )


def _with_usages(ca: pki.CertKey, org: str, usages: list[x509.ObjectIdentifier]) -> pki.CertKey:
    key = pki.load_private_key(pki.new_ed25519_key())
    ca_cert = ca.certificate()
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .sign(ca.private_key(), algorithm=None)  # type: ignore[arg-type]
    )
    return pki.CertKey(cert.public_bytes(serialization.Encoding.PEM), pki.encode_private_key(key))


def client_ssl(ca: pki.CertKey, cert: pki.CertKey | None) -> ssl.SSLContext:
    """What talosctl sets up: verify the node against the CA, present the talosconfig cert."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=ca.crt.decode())
    if cert is not None:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "c").write_bytes(cert.crt)
            key = pki.load_private_key(cert.key).private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            (Path(tmp) / "k").write_bytes(key)
            ctx.load_cert_chain(Path(tmp) / "c", Path(tmp) / "k")
    ctx.set_alpn_protocols(["h2"])
    return ctx


# --------------------------------------------------------------------------- fake machined


@dataclass
class Seen:
    method: str
    metadata: dict[str, list[str]]


@dataclass
class FakeMachined:
    """Serves a few MachineService RPCs on a unix socket; authorizes like machined."""

    name: str
    seen: list[Seen] = field(default_factory=list)
    logs_cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    recover_chunk_seen: asyncio.Event = field(default_factory=asyncio.Event)

    def _enter(self, stream: Stream[Any, Any], method: str) -> None:
        md = stream.metadata or {}
        self.seen.append(Seen(method, {k: list(md.getall(k)) for k in set(md.keys())}))  # type: ignore[union-attr]
        authz.check(f"/machine.MachineService/{method}", authz.roles_from_metadata(stream.metadata))

    async def Version(self, stream: Stream[empty_pb2.Empty, machine_pb2.VersionResponse]) -> None:
        await stream.recv_message()
        self._enter(stream, "Version")
        reply = machine_pb2.Version(
            version=machine_pb2.VersionInfo(tag="v1.7.6"), platform=machine_pb2.PlatformInfo(name=self.name)
        )
        await stream.send_message(machine_pb2.VersionResponse(messages=[reply]))

    async def Bootstrap(self, stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        self._enter(stream, "Bootstrap")
        await stream.send_message(machine_pb2.BootstrapResponse(messages=[machine_pb2.Bootstrap()]))

    async def Hostname(self, stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        self._enter(stream, "Hostname")
        await stream.send_initial_metadata(metadata={"x-node": self.name})
        raise GRPCError(Status.NOT_FOUND, f"no hostname on {self.name}")

    async def Logs(self, stream: Stream[machine_pb2.LogsRequest, common_pb2.Data]) -> None:
        request = await stream.recv_message()
        self._enter(stream, "Logs")
        assert request is not None
        for i in range(request.tail_lines):
            await stream.send_message(common_pb2.Data(bytes=f"{self.name} {i}\n".encode()))
        if request.follow:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.logs_cancelled.set()
                raise

    async def EtcdRecover(self, stream: Stream[common_pb2.Data, machine_pb2.EtcdRecoverResponse]) -> None:
        self._enter(stream, "EtcdRecover")
        size = 0
        async for chunk in stream:
            size += len(chunk.bytes)
            self.recover_chunk_seen.set()
        reply = machine_pb2.EtcdRecover(metadata=common_pb2.Metadata(error=f"{self.name} got {size}"))
        await stream.send_message(machine_pb2.EtcdRecoverResponse(messages=[reply]))


class _FakeMachineService(machine_grpc.MachineServiceBase):
    pass


async def _unimplemented(self: Any, stream: Stream[Any, Any]) -> None:
    raise GRPCError(Status.UNIMPLEMENTED)


def _servable(fake: FakeMachined) -> machine_grpc.MachineServiceBase:
    methods = {name: _unimplemented for name in machine_grpc.MachineServiceBase.__abstractmethods__}
    cls = type("Machine", (machine_grpc.MachineServiceBase,), methods)
    service = cls()
    for name in ("Version", "Bootstrap", "Hostname", "Logs", "EtcdRecover"):
        setattr(service, name, getattr(fake, name))
    return service


# --------------------------------------------------------------------------- cluster of apids


def _free_port() -> int:
    for _ in range(50):
        port = random.randint(20000, 60000)
        socks = []
        try:
            for addr in (A, B, DOWN):
                s = socket.socket()
                socks.append(s)
                s.bind((addr, port))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port on the test loopback addresses")


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    # Unix socket paths are limited to ~107 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="apid-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class Node:
    address: str
    machined: FakeMachined
    apid: Apid


@dataclass
class Cluster:
    pki: PKI
    port: int
    nodes: dict[str, Node]

    def channel(self, address: str, cert: pki.CertKey | None) -> Channel:
        """A talosctl-like client of the apid at ``address`` presenting ``cert``."""
        return Channel(address, self.port, ssl=client_ssl(self.pki.ca, cert))


#: How apid reaches its machined in the running test: "socket" or "in-process".
TRANSPORT = "socket"


@pytest.fixture(autouse=True, params=["socket", "in-process"])
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    global TRANSPORT
    TRANSPORT = request.param
    try:
        yield TRANSPORT
    finally:
        TRANSPORT = "socket"


@asynccontextmanager
async def cluster(
    ca: PKI, root: Path, *, worker: bool = False, rbac: bool = True, check_eku: bool = True
) -> AsyncIterator[Cluster]:
    port = _free_port()
    nodes: dict[str, Node] = {}
    async with AsyncExitStack() as stack:
        for address in (A, B):
            layout = Layout(root=root / address, address=address)
            layout.ensure()
            fake = FakeMachined(address)
            machine_api: MachineApi | None = None
            if TRANSPORT == "in-process":
                machine_api = MachineApi()
                machine_api.publish([_servable(fake)])
                stack.callback(machine_api.withdraw)
            else:
                server = Server([_servable(fake)])
                await server.start(path=str(layout.machined_socket))
                stack.push_async_callback(server.wait_closed)
                stack.callback(server.close)
            apid = Apid(
                machine_api=machine_api,
                address=address,
                port=port,
                machined_socket=layout.machined_socket,
                server_cert=ca.leaf(server_ip=address),
                accepted_cas=[ca.ca.crt],
                client_cert=None if worker else ca.leaf("os:impersonator"),
                rbac=rbac,
                check_ext_key_usage=check_eku,
                dial_timeout=3.0,
            )
            await stack.enter_async_context(apid)
            nodes[address] = Node(address, fake, apid)
        yield Cluster(ca, port, nodes)


def run(coro: Any) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(4 * TIMEOUT):
            return await coro

    return asyncio.run(bounded())


async def version(channel: Channel, *metadata: tuple[str, str]) -> machine_pb2.VersionResponse:
    try:
        async with asyncio.timeout(TIMEOUT):
            return await machine_grpc.MachineServiceStub(channel).Version(
                empty_pb2.Empty(), metadata=list(metadata)
            )
    finally:
        channel.close()


async def grpc_error(coro: Any) -> GRPCError:
    with pytest.raises(GRPCError) as caught:
        async with asyncio.timeout(TIMEOUT):
            await coro
    return caught.value


# --------------------------------------------------------------------------- tests


def test_local_call_passes_through_with_roles_and_proxyfrom(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            reply = await version(c.channel(A, ca.leaf("os:admin")))
            (element,) = reply.messages
            assert element.version.tag == "v1.7.6"
            assert element.platform.name == A
            assert not element.HasField("metadata"), "direct calls get no hostname"
            (seen,) = c.nodes[A].machined.seen
            assert seen.metadata["talos-role"] == ["os:admin"]
            assert seen.metadata["proxyfrom"] == [f"{A}:{c.port}"]
            assert c.nodes[B].machined.seen == []

    run(scenario())


def test_one_to_many_unary_fans_out_and_tags_hostnames(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            reply = await version(c.channel(A, ca.leaf("os:reader")), ("nodes", A), ("nodes", B))
            got = [(m.metadata.hostname, m.platform.name, m.metadata.error) for m in reply.messages]
            assert got == [(A, A, ""), (B, B, "")]
            for address in (A, B):
                (seen,) = c.nodes[address].machined.seen
                # B was reached through A's impersonator hop: the caller's role survived it.
                assert seen.metadata["talos-role"] == ["os:reader"]
                assert "proxyfrom" in seen.metadata
                assert "nodes" not in seen.metadata and "node" not in seen.metadata

    run(scenario())


def test_call_naming_the_node_itself_reaches_its_machined_as_through_the_self_hop(
    ca: PKI, short_tmp: Path
) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            reader = ca.leaf("os:reader")
            one_to_many = await version(c.channel(A, reader), ("nodes", A))
            assert [(m.metadata.hostname, m.platform.name) for m in one_to_many.messages] == [(A, A)]
            one_to_one = await version(c.channel(A, reader), ("node", A))
            assert [m.platform.name for m in one_to_one.messages] == [A]
            for seen in c.nodes[A].machined.seen:
                # What A's apid would have passed on had it dialled itself: its own proxyfrom once
                # and the caller's role, not the impersonator's.
                assert seen.metadata["proxyfrom"] == [f"{A}:{c.port}"]
                assert seen.metadata["talos-role"] == ["os:reader"]
                assert "nodes" not in seen.metadata and "node" not in seen.metadata
            assert len(c.nodes[A].machined.seen) == 2

    run(scenario())


def test_one_to_many_down_node_is_an_in_band_error(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            reply = await version(c.channel(A, ca.leaf("os:admin")), ("nodes", B), ("nodes", DOWN))
            ok, down = reply.messages
            assert (ok.metadata.hostname, ok.platform.name, ok.metadata.error) == (B, B, "")
            assert down.metadata.hostname == DOWN
            assert down.metadata.error.startswith("rpc error: code = Unavailable desc = connection error")
            assert down.metadata.status.code == Status.UNAVAILABLE.value
            assert "connection refused" in down.metadata.status.message
            assert not down.HasField("version")

    run(scenario())


def test_one_to_many_node_errors_keep_status(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            # A reader may not Bootstrap: apid answers for each node, in band, as each node's
            # machined would (Talos's shape), without dialing any of them.
            channel = c.channel(A, ca.leaf("os:reader"))
            try:
                async with asyncio.timeout(TIMEOUT):
                    reply = await machine_grpc.MachineServiceStub(channel).Bootstrap(
                        machine_pb2.BootstrapRequest(), metadata=[("nodes", A), ("nodes", B)]
                    )
            finally:
                channel.close()
            assert [(m.metadata.hostname, m.metadata.error) for m in reply.messages] == [
                (A, "rpc error: code = PermissionDenied desc = not authorized"),
                (B, "rpc error: code = PermissionDenied desc = not authorized"),
            ]
            assert {m.metadata.status.code for m in reply.messages} == {Status.PERMISSION_DENIED.value}
            assert c.nodes[A].machined.seen == [] and c.nodes[B].machined.seen == []

    run(scenario())


async def _logs(
    channel: Channel, request: machine_pb2.LogsRequest, *md: tuple[str, str]
) -> list[common_pb2.Data]:
    try:
        async with asyncio.timeout(TIMEOUT):
            async with machine_grpc.MachineServiceStub(channel).Logs.open(metadata=list(md)) as stream:
                await stream.send_message(request, end=True)
                return [frame async for frame in stream]
    finally:
        channel.close()


def test_one_to_many_stream_tags_every_frame(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            frames = await _logs(
                c.channel(A, ca.leaf("os:reader")),
                machine_pb2.LogsRequest(id="kubelet", tail_lines=3),
                ("nodes", A),
                ("nodes", B),
                ("nodes", DOWN),
            )
            by_node: dict[str, list[str]] = {}
            for frame in frames:
                by_node.setdefault(frame.metadata.hostname, []).append(
                    frame.bytes.decode() or frame.metadata.error
                )
            assert by_node[A] == [f"{A} 0\n", f"{A} 1\n", f"{A} 2\n"]
            assert by_node[B] == [f"{B} 0\n", f"{B} 1\n", f"{B} 2\n"]
            (error,) = by_node[DOWN]
            assert error.startswith("rpc error: code = Unavailable")

    run(scenario())


def test_one_to_one_passes_replies_and_errors_unchanged(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            reply = await version(c.channel(A, ca.leaf("os:admin")), ("node", B))
            (element,) = reply.messages
            assert element.platform.name == B and not element.HasField("metadata")
            assert [s.method for s in c.nodes[B].machined.seen] == ["Version"]
            assert c.nodes[A].machined.seen == []

            frames = await _logs(
                c.channel(A, ca.leaf("os:admin")), machine_pb2.LogsRequest(tail_lines=2), ("node", B)
            )
            assert [f.bytes for f in frames] == [f"{B} 0\n".encode(), f"{B} 1\n".encode()]
            assert all(not f.HasField("metadata") for f in frames)

            channel = c.channel(A, ca.leaf("os:admin"))
            try:
                async with asyncio.timeout(TIMEOUT):
                    async with machine_grpc.MachineServiceStub(channel).Hostname.open(
                        metadata=[("node", B)]
                    ) as call:
                        await call.send_message(empty_pb2.Empty(), end=True)
                        with pytest.raises(GRPCError) as failed:
                            assert await call.recv_message() is None
                            await call.recv_trailing_metadata()
                        assert call.initial_metadata is not None
                        assert call.initial_metadata["x-node"] == B
            finally:
                channel.close()
            assert (failed.value.status, failed.value.message) == (Status.NOT_FOUND, f"no hostname on {B}")

    run(scenario())


def test_client_streaming_etcd_recover(ca: PKI, short_tmp: Path) -> None:
    async def recover(channel: Channel, *md: tuple[str, str]) -> machine_pb2.EtcdRecoverResponse:
        try:
            async with asyncio.timeout(TIMEOUT):
                async with machine_grpc.MachineServiceStub(channel).EtcdRecover.open(
                    metadata=list(md)
                ) as call:
                    for chunk in (b"a" * 1000, b"b" * 24):
                        await call.send_message(common_pb2.Data(bytes=chunk))
                    await call.end()
                    reply = await call.recv_message()
                    assert reply is not None
                    return reply
        finally:
            channel.close()

    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            direct = await recover(c.channel(A, ca.leaf("os:admin")))
            assert [m.metadata.error for m in direct.messages] == [f"{A} got 1024"]
            fanned = await recover(c.channel(A, ca.leaf("os:admin")), ("nodes", A), ("nodes", B))
            assert [(m.metadata.hostname, m.metadata.error) for m in fanned.messages] == [
                (A, f"{A} got 1024"),
                (B, f"{B} got 1024"),
            ]

    run(scenario())


def test_routing_refusals_reach_the_client(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            err = await grpc_error(version(c.channel(A, ca.leaf("os:admin")), ("node", A), ("node", B)))
            assert (err.status, err.message) == (
                Status.INVALID_ARGUMENT,
                "node metadata must be single-valued",
            )

            channel = c.channel(A, ca.leaf("os:admin"))
            try:
                err = await grpc_error(
                    state_grpc.StateStub(channel).Get(
                        state_pb2.GetRequest(namespace="network", type="Hostnames", id="hostname"),
                        metadata=[("nodes", A)],
                    )
                )
            finally:
                channel.close()
            assert (err.status, err.message) == (
                Status.INVALID_ARGUMENT,
                "one-2-many proxying is not supported for COSI methods",
            )
            err = await grpc_error(version(c.channel(A, ca.leaf("os:admin")), ("nodes", f"{B}:50000")))
            assert (err.status, err.message) == (Status.INTERNAL, f'invalid target "{B}:50000"')
            assert c.nodes[A].machined.seen == [] and c.nodes[B].machined.seen == []

    run(scenario())


def test_apid_refuses_a_reader_calling_an_admin_method(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            channel = c.channel(A, ca.leaf("os:reader"))
            try:
                err = await grpc_error(
                    machine_grpc.MachineServiceStub(channel).Bootstrap(machine_pb2.BootstrapRequest())
                )
            finally:
                channel.close()
            assert (err.status, err.message) == (Status.PERMISSION_DENIED, "not authorized")
            # A reader cannot lift itself by sending talos-role: only impersonators may.
            err = await grpc_error(_bootstrap(c.channel(A, ca.leaf("os:reader")), ("talos-role", "os:admin")))
            assert err.status is Status.PERMISSION_DENIED
            assert c.nodes[A].machined.seen == [], "apid refuses before forwarding"
            # An impersonator acts for the roles it names.
            await _bootstrap(c.channel(A, ca.leaf("os:impersonator")), ("talos-role", "os:admin"))
            err = await grpc_error(
                _bootstrap(c.channel(A, ca.leaf("os:impersonator")), ("talos-role", "os:reader"))
            )
            assert err.status is Status.PERMISSION_DENIED
            assert [s.metadata["talos-role"] for s in c.nodes[A].machined.seen] == [["os:admin"]]

    run(scenario())


async def _bootstrap(channel: Channel, *md: tuple[str, str]) -> None:
    try:
        async with asyncio.timeout(TIMEOUT):
            await machine_grpc.MachineServiceStub(channel).Bootstrap(
                machine_pb2.BootstrapRequest(), metadata=list(md)
            )
    finally:
        channel.close()


def test_rbac_off_gives_every_role(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp, rbac=False) as c:
            await _bootstrap(c.channel(A, ca.leaf("os:reader")))
            (seen,) = c.nodes[A].machined.seen
            assert set(seen.metadata["talos-role"]) == {r.value for r in authz.ALL_ROLES}

    run(scenario())


async def _refused_by_tls(channel: Channel) -> None:
    # TLS 1.3: the server checks the client certificate after the client finished its handshake,
    # sends its alert and closes; grpclib's client reports the connection lost.
    with pytest.raises(StreamTerminatedError, match="Connection lost"):
        await version(channel)


def test_bad_client_certificates_are_refused(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            await _refused_by_tls(c.channel(A, None))
            stranger = pki.new_keypair(
                ca.other_ca, organizations=["os:admin"], ttl=timedelta(hours=1), server=False, client=True
            )
            await _refused_by_tls(c.channel(A, stranger))
            await _refused_by_tls(c.channel(A, ca.leaf("os:admin", expired=True)))
            both = _with_usages(
                ca.ca, "os:admin", [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            )
            await _refused_by_tls(c.channel(A, both))
            server_only = _with_usages(ca.ca, "os:admin", [ExtendedKeyUsageOID.SERVER_AUTH])
            await _refused_by_tls(c.channel(A, server_only))
            assert c.nodes[A].machined.seen == [], "a refused client reached machined"
            # Still serving good clients afterwards.
            assert (await version(c.channel(A, ca.leaf("os:admin")))).messages[0].version.tag == "v1.7.6"

    run(scenario())


def test_ext_key_usage_check_can_be_disabled(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp, check_eku=False) as c:
            both = _with_usages(
                ca.ca, "os:admin", [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            )
            assert (await version(c.channel(A, both))).messages[0].version.tag == "v1.7.6"

    run(scenario())


def test_worker_apid_does_not_forward(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp, worker=True) as c:
            assert not c.nodes[A].apid.forwarding
            for md in ([("nodes", A), ("nodes", B)], [("nodes", B)], [("node", B)]):
                err = await grpc_error(version(c.channel(A, ca.leaf("os:admin")), *md))
                assert (err.status, err.message) == (Status.PERMISSION_DENIED, "no request forwarding")
            # A single target naming the worker itself is served locally, untouched.
            for md in ([("nodes", A)], [("node", A)]):
                reply = await version(c.channel(A, ca.leaf("os:admin")), *md)
                assert reply.messages[0].platform.name == A
                assert not reply.messages[0].HasField("metadata")
            assert c.nodes[B].machined.seen == []

    run(scenario())


def test_proxyfrom_is_served_locally(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            reply = await version(c.channel(A, ca.leaf("os:admin")), ("proxyfrom", "x"), ("nodes", B))
            assert reply.messages[0].platform.name == A
            assert c.nodes[B].machined.seen == []

    run(scenario())


def test_close_cancels_running_calls(ca: PKI, short_tmp: Path) -> None:
    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            channel = c.channel(A, ca.leaf("os:admin"))
            try:
                async with machine_grpc.MachineServiceStub(channel).Logs.open(
                    metadata=[("nodes", B)]
                ) as call:
                    await call.send_message(machine_pb2.LogsRequest(tail_lines=1, follow=True), end=True)
                    first = await call.recv_message()
                    assert first is not None and first.metadata.hostname == B
                    async with asyncio.timeout(TIMEOUT):
                        await c.nodes[A].apid.close()
                    async with asyncio.timeout(TIMEOUT):
                        await c.nodes[B].machined.logs_cancelled.wait()
                    # The client's stream ends with a status instead of hanging.
                    with pytest.raises(GRPCError) as ended:
                        async with asyncio.timeout(TIMEOUT):
                            assert await call.recv_message() is None
                            await call.recv_trailing_metadata()
                    assert (ended.value.status, ended.value.message) == (
                        Status.UNAVAILABLE,
                        "apid is shutting down",
                    )
            finally:
                channel.close()

    run(scenario())


# --------------------------------------------------------------------------- hostile callers

MiB = 1024 * 1024
VERSION = "/machine.MachineService/Version"
RECOVER = "/machine.MachineService/EtcdRecover"


def _data(size: int) -> bytes:
    """An encoded ``common.Data{bytes: <size zero bytes>}``: one EtcdRecover chunk."""
    return common_pb2.Data(bytes=bytes(size)).SerializeToString()  # type: ignore[no-any-return]


@asynccontextmanager
async def raw_call(c: Cluster, cert: pki.CertKey, path: str, *md: tuple[str, str]) -> AsyncIterator[Any]:
    """A call whose request bytes the test writes itself (``call._stream.send_data``)."""
    cardinality = METHODS[path].cardinality
    channel = Channel(A, c.port, ssl=client_ssl(c.pki.ca, cert), codec=RawCodec())
    try:
        call = await channel.request(path, cardinality, bytes, bytes, metadata=list(md)).__aenter__()
        await call.send_request()
        yield call
    finally:
        channel.close()


async def _send_quietly(call: Any, *frames: bytes, repeat: int = 1, end: bool = False) -> None:
    """Write ``frames`` (``repeat`` times) until done or the server stops the stream."""
    with contextlib.suppress(Exception):
        for _ in range(repeat):
            for frame in frames:
                await call._stream.send_data(frame)
        if end:
            await call._stream.end()


def _raise_for_status(headers: list[tuple[str, str]]) -> None:
    fields = dict(headers)
    status = Status(int(fields["grpc-status"]))
    if status is not Status.OK:
        raise GRPCError(status, decode_grpc_message(fields.get("grpc-message", "")))


async def _reply_while_sending(call: Any, sender: Coroutine[Any, Any, None]) -> bytes:
    """The single reply of ``call`` while ``sender`` writes its request; a status raises.

    Read at the HTTP/2 level, as grpc-go reads it: a server that answers before the request has
    ended follows its answer with RST_STREAM(NO_ERROR), which grpclib's client turns into an
    error that hides the status it did receive.
    """
    task = asyncio.create_task(sender)
    h2_stream = call._stream
    try:
        async with asyncio.timeout(TIMEOUT):
            headers = await h2_stream.recv_headers()
            if "grpc-status" in dict(headers):  # trailers-only: an error
                _raise_for_status(headers)
            size = struct.unpack(">?I", await h2_stream.recv_data(5))[1]
            reply = bytes(await h2_stream.recv_data(size))
            _raise_for_status(await h2_stream.recv_trailers())
            return reply
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_oversized_message_is_refused_from_its_length_prefix(ca: PKI, short_tmp: Path) -> None:
    """100 MiB announced, streamed in 1 MiB pieces: refused without apid holding it."""
    size = 100 * MiB
    prefix = struct.pack(">?I", False, size)
    piece = bytes(MiB)

    async def scenario() -> int:
        async with cluster(ca, short_tmp) as c, raw_call(c, ca.leaf("os:admin"), VERSION) as call:
            tracemalloc.start()
            try:
                sender = _send_quietly(call, prefix, *[piece] * (size // MiB), end=True)
                with pytest.raises(GRPCError) as refused:
                    await _reply_while_sending(call, sender)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert (refused.value.status, refused.value.message) == (
                Status.RESOURCE_EXHAUSTED,
                f"grpc: received message larger than max ({size} vs. {MAX_MESSAGE_SIZE})",
            )
            assert c.nodes[A].machined.seen == []
            return peak

    peak = run(scenario())
    # What HTTP/2 flow control lets the client have in flight (4 MiB windows), not the message.
    assert peak < 16 * MiB, f"apid held {peak / MiB:.0f} MiB for a refused message"


def test_certificate_without_a_role_is_refused_before_the_body_is_read(ca: PKI, short_tmp: Path) -> None:
    """Any certificate of the cluster passes TLS; without a role it may call nothing."""
    no_role = ca.leaf()
    # A message is announced but its body never comes: only a refusal from the prefix-less
    # facts (method path, certificate) can answer this call.
    announce = struct.pack(">?I", False, 1024)

    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            for md in [(), (("node", B),)]:
                async with raw_call(c, no_role, VERSION, *md) as call:
                    with pytest.raises(GRPCError) as denied:
                        await _reply_while_sending(call, _send_quietly(call, announce))
                    assert (denied.value.status, denied.value.message) == (
                        Status.PERMISSION_DENIED,
                        "not authorized",
                    )
            # Fanned out, each node's refusal comes in band, as each machined's would in Talos.
            async with raw_call(c, no_role, VERSION, ("nodes", A), ("nodes", B)) as call:
                reply = machine_pb2.VersionResponse.FromString(
                    await _reply_while_sending(call, _send_quietly(call, announce))
                )
            assert [(m.metadata.hostname, m.metadata.error) for m in reply.messages] == [
                (A, "rpc error: code = PermissionDenied desc = not authorized"),
                (B, "rpc error: code = PermissionDenied desc = not authorized"),
            ]
            assert c.nodes[A].machined.seen == [] and c.nodes[B].machined.seen == []

    run(scenario())


def test_client_stream_to_a_forbidden_method_is_refused_before_buffering(ca: PKI, short_tmp: Path) -> None:
    """A reader streaming EtcdRecover to two nodes: refused while the stream is still open."""
    chunk = _data(MiB)
    message = struct.pack(">?I", False, len(chunk)) + chunk

    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            md = (("nodes", A), ("nodes", B))
            async with raw_call(c, ca.leaf("os:reader"), RECOVER, *md) as call:
                # Never ends its stream: an apid that collected the stream first would wait forever.
                sender = _send_quietly(call, message, repeat=8)
                reply = machine_pb2.EtcdRecoverResponse.FromString(await _reply_while_sending(call, sender))
            assert [(m.metadata.hostname, m.metadata.status.code) for m in reply.messages] == [
                (A, Status.PERMISSION_DENIED.value),
                (B, Status.PERMISSION_DENIED.value),
            ]
            assert c.nodes[A].machined.seen == [] and c.nodes[B].machined.seen == []

    run(scenario())


def test_fanned_out_client_stream_is_relayed_not_collected(ca: PKI, short_tmp: Path) -> None:
    """An admin's EtcdRecover to two nodes reaches both while the caller is still sending."""
    chunk = _data(MiB)
    message = struct.pack(">?I", False, len(chunk)) + chunk

    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            md = (("nodes", A), ("nodes", B))
            async with raw_call(c, ca.leaf("os:admin"), RECOVER, *md) as call:

                async def sender() -> None:
                    await call._stream.send_data(message)
                    # An apid that collected the stream before dialing would never get here.
                    for node in (A, B):
                        await c.nodes[node].machined.recover_chunk_seen.wait()
                    await _send_quietly(call, message, repeat=3, end=True)

                reply = machine_pb2.EtcdRecoverResponse.FromString(await _reply_while_sending(call, sender()))
            size = 4 * MiB
            assert [(m.metadata.hostname, m.metadata.error) for m in reply.messages] == [
                (A, f"{A} got {size}"),
                (B, f"{B} got {size}"),
            ]

    run(scenario())


def test_oversized_message_in_a_fanned_out_stream_ends_the_call(ca: PKI, short_tmp: Path) -> None:
    chunk = _data(1024)
    good = struct.pack(">?I", False, len(chunk)) + chunk
    oversized = struct.pack(">?I", False, MAX_MESSAGE_SIZE + 1)

    async def scenario() -> None:
        async with cluster(ca, short_tmp) as c:
            md = (("nodes", A), ("nodes", B))
            async with raw_call(c, ca.leaf("os:admin"), RECOVER, *md) as call:
                with pytest.raises(GRPCError) as refused:
                    await _reply_while_sending(call, _send_quietly(call, good, oversized))
            assert refused.value.status is Status.RESOURCE_EXHAUSTED
            assert f"({MAX_MESSAGE_SIZE + 1} vs. {MAX_MESSAGE_SIZE})" in (refused.value.message or "")

    run(scenario())
