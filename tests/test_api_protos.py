"""Ichor's Talos 1.7 API: protos vs the spec, generated stubs vs the protos, and mTLS with grpclib.

The mutual-TLS test builds its own Ed25519 PKI with ``cryptography`` (as Talos does) rather than
using ``ichor.machinery.pki``, so it checks the transport stack alone.
"""

from __future__ import annotations

import asyncio
import filecmp
import ipaddress
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from google.protobuf import empty_pb2
from google.protobuf.descriptor import FieldDescriptor
from grpclib.client import Channel
from grpclib.const import Status as GRPCStatus
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.server import Server, Stream

from ichor.api.gen.cluster import cluster_grpc
from ichor.api.gen.common import common_pb2
from ichor.api.gen.inspectapi import inspect_grpc
from ichor.api.gen.machine import machine_grpc, machine_pb2
from ichor.api.gen.security import security_grpc
from ichor.api.gen.storage import storage_grpc
from ichor.api.gen.timeapi import time_grpc, time_pb2
from ichor.api.gen.v1alpha1 import meta_pb2, resource_pb2, state_grpc, state_pb2

ROOT = Path(__file__).resolve().parent.parent
GEN_DIR = ROOT / "src" / "ichor" / "api" / "gen"
TIMEOUT = 10.0


# --------------------------------------------------------------------------- regeneration


def _tree_diff(left: Path, right: Path) -> list[str]:
    problems: list[str] = []

    def walk(cmp: filecmp.dircmp[str], rel: str) -> None:
        problems.extend(f"only in checked-in gen/: {rel}{n}" for n in cmp.left_only if n != "__pycache__")
        problems.extend(f"only in regenerated: {rel}{n}" for n in cmp.right_only if n != "__pycache__")
        _, mismatch, errors = filecmp.cmpfiles(cmp.left, cmp.right, cmp.common_files, shallow=False)
        problems.extend(f"differs: {rel}{n}" for n in mismatch + errors)
        for name, sub in sorted(cmp.subdirs.items()):
            if name != "__pycache__":
                walk(sub, f"{rel}{name}/")

    walk(filecmp.dircmp(left, right), "")
    return problems


def test_regenerating_gives_no_diff(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    problems = _tree_diff(GEN_DIR, out)
    assert not problems, (
        "src/ichor/api/gen is stale: run `.venv/bin/python scripts/gen_protos.py` "
        "(with the grpcio-tools pinned in pyproject) and commit the result\n" + "\n".join(problems)
    )


def test_regenerating_twice_is_byte_identical(tmp_path: Path) -> None:
    for name in ("a", "b"):
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--out", str(tmp_path / name)],
            capture_output=True,
            timeout=120,
            check=True,
        )
    assert _tree_diff(tmp_path / "a", tmp_path / "b") == []


def test_generator_refuses_to_replace_a_foreign_directory(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "not a generated tree" in result.stderr
    assert precious.read_text() == "keep me"


def test_generated_code_does_not_import_grpcio() -> None:
    code = (
        "import sys\n"
        "from ichor.api.gen.machine import machine_grpc\n"
        "from ichor.api.gen.v1alpha1 import state_grpc\n"
        "from ichor.api.gen.timeapi import time_grpc\n"
        "print(sorted(m for m in sys.modules if m == 'grpc' or m.startswith('grpc.')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


# --------------------------------------------------------------------------- spec spot checks


def _mapping(base_cls: type) -> dict[str, Any]:
    # __mapping__ only reads bound methods, so a bare subclass with no-op handlers is enough.
    stub = type("Probe", (base_cls,), {name: None for name in base_cls.__abstractmethods__})
    return stub().__mapping__()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("base_cls", "path", "request_type", "reply_type"),
    [
        (machine_grpc.MachineServiceBase, "/machine.MachineService/Version", "Empty", "VersionResponse"),
        (machine_grpc.MachineServiceBase, "/machine.MachineService/ApplyConfiguration", "ApplyConfigurationRequest", "ApplyConfigurationResponse"),
        (machine_grpc.MachineServiceBase, "/machine.MachineService/EtcdRecover", "Data", "EtcdRecoverResponse"),
        (machine_grpc.MachineServiceBase, "/machine.MachineService/ImageList", "ImageListRequest", "ImageListResponse"),
        (time_grpc.TimeServiceBase, "/time.TimeService/Time", "Empty", "TimeResponse"),
        (time_grpc.TimeServiceBase, "/time.TimeService/TimeCheck", "TimeRequest", "TimeResponse"),
        (state_grpc.StateBase, "/cosi.resource.State/Get", "GetRequest", "GetResponse"),
        (state_grpc.StateBase, "/cosi.resource.State/Watch", "WatchRequest", "WatchResponse"),
        (security_grpc.SecurityServiceBase, "/securityapi.SecurityService/Certificate", "CertificateRequest", "CertificateResponse"),
        (cluster_grpc.ClusterServiceBase, "/cluster.ClusterService/HealthCheck", "HealthCheckRequest", "HealthCheckProgress"),
        (storage_grpc.StorageServiceBase, "/storage.StorageService/Disks", "Empty", "DisksResponse"),
        (inspect_grpc.InspectServiceBase, "/inspect.InspectService/ControllerRuntimeDependencies", "Empty", "ControllerRuntimeDependenciesResponse"),
    ],
)  # fmt: skip
def test_method_paths_match_talos(base_cls: type, path: str, request_type: str, reply_type: str) -> None:
    handler = _mapping(base_cls)[path]
    assert handler.request_type.DESCRIPTOR.name == request_type
    assert handler.reply_type.DESCRIPTOR.name == reply_type


def test_service_sizes_match_spec() -> None:
    assert len(_mapping(machine_grpc.MachineServiceBase)) == 51
    assert len(_mapping(state_grpc.StateBase)) == 6
    assert len(_mapping(time_grpc.TimeServiceBase)) == 2
    assert len(_mapping(cluster_grpc.ClusterServiceBase)) == 1
    assert len(_mapping(storage_grpc.StorageServiceBase)) == 1
    assert len(_mapping(security_grpc.SecurityServiceBase)) == 1
    assert len(_mapping(inspect_grpc.InspectServiceBase)) == 1


def test_streaming_shapes_match_spec() -> None:
    service = machine_pb2.DESCRIPTOR.services_by_name["MachineService"]
    server_streaming = sorted(m.name for m in service.methods if m.server_streaming)
    client_streaming = sorted(m.name for m in service.methods if m.client_streaming)
    assert server_streaming == [
        "Copy", "DiskUsage", "Dmesg", "EtcdSnapshot", "Events", "ImageList", "Kubeconfig", "List", "Logs",
        "PacketCapture", "Read",
    ]  # fmt: skip
    assert client_streaming == ["EtcdRecover"]
    state = state_pb2.DESCRIPTOR.services_by_name["State"]
    assert sorted(m.name for m in state.methods if m.server_streaming) == ["List", "Watch"]


def _fields(message: Any) -> dict[str, tuple[int, str]]:
    out = {}
    for f in message.DESCRIPTOR.fields:
        type_name = (
            f.message_type.full_name if f.message_type else f.enum_type.full_name if f.enum_type else ""
        )
        out[f.name] = (f.number, type_name)
    return out


def test_field_numbers_match_spec() -> None:
    assert _fields(common_pb2.Metadata) == {
        "hostname": (1, ""),
        "error": (2, ""),
        "status": (3, "google.rpc.Status"),
    }
    assert _fields(machine_pb2.Version) == {
        "metadata": (1, "common.Metadata"),
        "version": (2, "machine.VersionInfo"),
        "platform": (3, "machine.PlatformInfo"),
        "features": (4, "machine.FeaturesInfo"),
    }
    assert [(f.name, f.number) for f in machine_pb2.VersionInfo.DESCRIPTOR.fields] == [
        ("tag", 1), ("sha", 2), ("built", 3), ("go_version", 4), ("os", 5), ("arch", 6),
    ]  # fmt: skip
    assert _fields(machine_pb2.ApplyConfigurationRequest) == {
        "data": (1, ""),
        "mode": (4, "machine.ApplyConfigurationRequest.Mode"),
        "dry_run": (5, ""),
        "try_mode_timeout": (6, "google.protobuf.Duration"),
    }
    # Gaps the spec has on purpose: Stat skips 3, EtcdMember starts at 2, LabelTerm skips 4.
    assert [f.number for f in machine_pb2.Stat.DESCRIPTOR.fields] == [1, 2, 4, 5, 6, 7]
    assert [f.number for f in machine_pb2.EtcdMember.DESCRIPTOR.fields] == [2, 3, 4, 5, 6]
    assert [f.number for f in resource_pb2.LabelTerm.DESCRIPTOR.fields] == [1, 2, 3, 5]
    assert len(machine_pb2.MemInfo.DESCRIPTOR.fields) == 48
    assert machine_pb2.MemInfo.DESCRIPTOR.fields_by_name["directmap1g"].number == 48


def test_enum_values_match_spec() -> None:
    mode = machine_pb2.ApplyConfigurationRequest.Mode
    assert dict(mode.items()) == {
        "REBOOT": 0, "AUTO": 1, "NO_REBOOT": 2, "STAGED": 3, "TRY": 4,
    }  # fmt: skip
    assert machine_pb2.ServiceStateEvent.Action.Value("STARTING") == 8
    assert machine_pb2.MachineStatusEvent.MachineStage.Value("UPGRADING") == 8
    assert state_pb2.EventType.Value("BOOTSTRAPPED") == 3
    assert resource_pb2.LabelTerm.Operation.Value("LTE_NUMERIC") == 7
    assert meta_pb2.ResourceDefinitionSpec.Sensitivity.Value("SENSITIVE") == 1


def test_labels_and_presence_match_spec() -> None:
    def label(message: Any, name: str) -> str:
        f = message.DESCRIPTOR.fields_by_name[name]
        if f.is_repeated:
            return "map" if f.message_type and f.message_type.GetOptions().map_entry else "repeated"
        return "optional" if f.has_presence and f.type != FieldDescriptor.TYPE_MESSAGE else "singular"

    assert label(state_pb2.WatchRequest, "id") == "optional"
    assert label(state_pb2.Event, "error") == "optional"
    assert label(state_pb2.WatchRequest, "namespace") == "singular"
    assert label(resource_pb2.Metadata, "labels") == "map"
    assert label(resource_pb2.LabelTerm, "value") == "repeated"
    assert label(machine_pb2.ListRequest, "types") == "repeated"


def test_time_package_keeps_its_protobuf_name() -> None:
    # Relocated for Python only: the protobuf package must still be `time`.
    assert time_pb2.DESCRIPTOR.package == "time"
    assert time_pb2.Time.DESCRIPTOR.full_name == "time.Time"


def test_empty_spec_is_present_on_the_wire() -> None:
    # talosctl dereferences spec without a nil check, so "present but empty" must survive encoding.
    encoded = resource_pb2.Resource(spec=resource_pb2.Spec()).SerializeToString()
    assert encoded == b"\x12\x00"
    assert resource_pb2.Resource.FromString(encoded).HasField("spec")


# --------------------------------------------------------------------------- §2.2 merge rule


def test_appended_hostname_merges_into_node_metadata() -> None:
    """apid appends an encoded common.Empty{metadata{hostname}} to each node's reply element."""
    element = machine_pb2.Version(
        metadata=common_pb2.Metadata(error="boom"),
        version=machine_pb2.VersionInfo(tag="v1.7.6"),
    ).SerializeToString()
    tag = common_pb2.Empty(metadata=common_pb2.Metadata(hostname="10.5.0.2")).SerializeToString()

    merged = machine_pb2.Version.FromString(element + tag)
    assert merged.metadata.hostname == "10.5.0.2"
    assert merged.metadata.error == "boom"
    assert merged.version.tag == "v1.7.6"

    # Concatenated per-node bodies form one response with one element per node.
    body = b"".join(
        machine_pb2.VersionResponse(
            messages=[machine_pb2.Version.FromString(element + t)]
        ).SerializeToString()
        for t in (tag, common_pb2.Empty(metadata=common_pb2.Metadata(hostname="n2")).SerializeToString())
    )
    assert [m.metadata.hostname for m in machine_pb2.VersionResponse.FromString(body).messages] == [
        "10.5.0.2",
        "n2",
    ]


def test_per_node_error_decodes_as_any_reply_type() -> None:
    failure = common_pb2.EmptyResponse(
        messages=[common_pb2.Empty(metadata=common_pb2.Metadata(hostname="n1", error="rpc error: x"))]
    ).SerializeToString()
    decoded = machine_pb2.VersionResponse.FromString(failure)
    assert len(decoded.messages) == 1
    assert decoded.messages[0].metadata.error == "rpc error: x"
    assert not decoded.messages[0].HasField("version")


# --------------------------------------------------------------------------- mutual TLS with grpclib


@dataclass(frozen=True)
class _Issued:
    cert: x509.Certificate
    key: ed25519.Ed25519PrivateKey

    def write(self, directory: Path, name: str) -> tuple[Path, Path]:
        crt = directory / f"{name}.crt"
        key = directory / f"{name}.key"
        crt.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        key.write_bytes(
            self.key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return crt, key

    @property
    def pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()


def _issue(
    subject: x509.Name,
    issuer: _Issued | None,
    *,
    ca: bool = False,
    usage: x509.ObjectIdentifier | None = None,
    ip: str | None = None,
) -> _Issued:
    key = ed25519.Ed25519PrivateKey.generate()
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if ip is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), critical=False
        )
    signer = issuer.key if issuer else key
    return _Issued(builder.sign(signer, algorithm=None), key)


def _org(name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, name)])


@dataclass(frozen=True)
class _PKI:
    ca: _Issued
    server: tuple[Path, Path]
    admin: tuple[Path, Path]
    stranger: tuple[Path, Path]


@pytest.fixture
def pki(tmp_path: Path) -> _PKI:
    ca = _issue(_org("talos"), None, ca=True)
    other_ca = _issue(_org("talos"), None, ca=True)
    node = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "node.example")])
    server = _issue(node, ca, usage=ExtendedKeyUsageOID.SERVER_AUTH, ip="127.0.0.1")
    admin = _issue(_org("os:admin"), ca, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    # Same issuer name as the real CA, different key: only the signature check can refuse it.
    stranger = _issue(_org("os:admin"), other_ca, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    return _PKI(
        ca=ca,
        server=server.write(tmp_path, "server"),
        admin=admin.write(tmp_path, "admin"),
        stranger=stranger.write(tmp_path, "stranger"),
    )


def _server_context(pki: _PKI, handshake_failures: list[str]) -> ssl.SSLContext:
    class _Recording(ssl.SSLObject):
        # asyncio drops a failed server handshake silently (the client only sees the connection
        # close), so record why OpenSSL refused the peer.
        def do_handshake(self) -> None:
            try:
                super().do_handshake()
            except ssl.SSLWantReadError:
                raise
            except ssl.SSLError as exc:
                handshake_failures.append(str(exc.reason))
                raise

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.sslobject_class = _Recording
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(*pki.server)
    ctx.load_verify_locations(cadata=pki.ca.pem)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.set_alpn_protocols(["h2"])
    return ctx


def _client_context(pki: _PKI, client: tuple[Path, Path] | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the server and its SAN
    ctx.load_verify_locations(cadata=pki.ca.pem)
    if client is not None:
        ctx.load_cert_chain(*client)
    ctx.set_alpn_protocols(["h2"])
    return ctx


def _organizations(peer_cert: dict[str, Any] | None) -> list[str]:
    """Organization values of a verified peer, from ssl's getpeercert() dict (what RBAC reads)."""
    if not peer_cert:
        return []
    return [value for rdn in peer_cert.get("subject", ()) for key, value in rdn if key == "organizationName"]


class _Machine(machine_grpc.MachineServiceBase):
    """Only Version is served; the rest answer UNIMPLEMENTED like an `out` RPC."""

    def __init__(self) -> None:
        self.callers: list[list[str]] = []

    async def Version(self, stream: Stream[empty_pb2.Empty, machine_pb2.VersionResponse]) -> None:
        async with asyncio.timeout(TIMEOUT):
            await stream.recv_message()
            self.callers.append(_organizations(stream.peer.cert()))
            reply = machine_pb2.Version(version=machine_pb2.VersionInfo(tag="v1.7.6"))
            await stream.send_message(machine_pb2.VersionResponse(messages=[reply]))


# Every other RPC answers UNIMPLEMENTED, as the spec allows for RPCs Ichor does not serve.
async def _unimplemented(self: Any, stream: Stream[Any, Any]) -> None:
    raise GRPCError(GRPCStatus.UNIMPLEMENTED)


for _name in machine_grpc.MachineServiceBase.__abstractmethods__ - {"Version"}:
    setattr(_Machine, _name, _unimplemented)
_Machine.__abstractmethods__ = frozenset()


@contextmanager
def _listening_socket() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))  # the kernel picks a free port
        yield sock
    finally:
        sock.close()


async def _version_call(port: int, ctx: ssl.SSLContext) -> str:
    channel = Channel("127.0.0.1", port, ssl=ctx)
    try:
        async with asyncio.timeout(TIMEOUT):
            reply = await machine_grpc.MachineServiceStub(channel).Version(empty_pb2.Empty())
        return reply.messages[0].version.tag
    finally:
        channel.close()


async def _handshake_facts(port: int, ctx: ssl.SSLContext) -> tuple[str | None, str | None, type]:
    """ALPN protocol, TLS version and server key type a plain stdlib client gets."""
    async with asyncio.timeout(TIMEOUT):
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        tls = writer.get_extra_info("ssl_object")
        server_cert = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))
        return tls.selected_alpn_protocol(), tls.version(), type(server_cert.public_key())
    finally:
        # The server has already sent its HTTP/2 SETTINGS, which a TLS close_notify exchange would
        # trip over; this probe only needed the handshake, so drop the connection.
        writer.transport.abort()


async def _refused_by_grpclib(port: int, ctx: ssl.SSLContext) -> None:
    # With TLS 1.3 the client finishes its side of the handshake before the server checks the
    # client certificate, and asyncio's server then just closes the socket (no TLS alert reaches
    # the client), so grpclib reports a lost connection rather than a certificate error.
    with pytest.raises(StreamTerminatedError, match="Connection lost"):
        await _version_call(port, ctx)


def test_grpclib_mutual_tls_with_ed25519(pki: _PKI) -> None:
    service = _Machine()
    handshake_failures: list[str] = []

    async def scenario() -> None:
        with _listening_socket() as sock:
            port = sock.getsockname()[1]
            server = Server([service])
            async with asyncio.timeout(TIMEOUT):
                await server.start(sock=sock, ssl=_server_context(pki, handshake_failures))
            try:
                assert await _version_call(port, _client_context(pki, pki.admin)) == "v1.7.6"
                assert service.callers == [["os:admin"]]

                alpn, version, server_key = await _handshake_facts(port, _client_context(pki, pki.admin))
                assert (alpn, version) == ("h2", "TLSv1.3")
                assert issubclass(server_key, ed25519.Ed25519PublicKey)
                assert handshake_failures == []

                await _refused_by_grpclib(port, _client_context(pki, None))
                await _refused_by_grpclib(port, _client_context(pki, pki.stranger))
                # And it refused them for the reason that matters, not some unrelated failure.
                assert handshake_failures == [
                    "PEER_DID_NOT_RETURN_A_CERTIFICATE",
                    "CERTIFICATE_VERIFY_FAILED",
                ]
                assert service.callers == [["os:admin"]], "a refused client reached the handler"

                # The server keeps serving good clients after refusing bad ones, and an RPC it
                # does not implement gets the standard UNIMPLEMENTED status.
                assert await _version_call(port, _client_context(pki, pki.admin)) == "v1.7.6"
                channel = Channel("127.0.0.1", port, ssl=_client_context(pki, pki.admin))
                try:
                    with pytest.raises(GRPCError) as unimplemented:
                        async with asyncio.timeout(TIMEOUT):
                            await machine_grpc.MachineServiceStub(channel).Hostname(empty_pb2.Empty())
                    assert unimplemented.value.status is GRPCStatus.UNIMPLEMENTED
                finally:
                    channel.close()
            finally:
                server.close()
                async with asyncio.timeout(TIMEOUT):
                    await server.wait_closed()

    asyncio.run(scenario())
