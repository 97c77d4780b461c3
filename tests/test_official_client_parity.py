"""What the official talosctl v1.7.6 met on a container cluster and Talos's own answers fix.

Found by driving a 1+1 container cluster with Kubernetes with the official client (issue 25 §4);
each test here fails on what Ichor answered before:

- Go's YAML is case-sensitive: ``HostDNSConfig``'s ``serviceHostDNSAddress`` went out as
  ``serviceHostDnsAddress`` (the protobuf form matched it by number, so only the YAML form lost it).
  Every key of every served spec is checked against Talos's resource YAML tags
  (``tests/data/talos_resource_yaml_keys.txt``, ``scripts/gen_talos_yaml_keys.py``).
- A physical link's ``LinkSpec`` had ``type: ""``: no value of Talos's ``LinkType`` in the YAML form,
  and its protobuf form failed to encode (served empty). Go's zero is ``netrom``.
- ``image ls --namespace system`` asked the system containerd; Talos asks the CRI containerd, whose
  namespace ``system`` holds the kubelet's image.
- ``events --since <not an id>``: Talos's text (``error parsing tail_id: xid: invalid ID``, Unknown).
- ``apply-config --insecure`` against a configured node: apid sends the TLS alert before closing, so
  Talos's client reports ``tls: certificate required`` instead of ``EOF``/``connection reset``.
- ``logs apid`` had no line per call: apid logs each as Talos's gRPC logging middleware does.
- ``netstat --pods`` named no pod: the pods' network namespaces (``/var/run/netns/cni-...``) are
  listed with their names, and ``containers -k`` gives each sandbox that name, as Talos's do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import re
import socket
import ssl
import tempfile
import time
import typing
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from google.protobuf import empty_pb2
from grpclib.client import Channel
from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError
from grpclib.health.service import Health
from grpclib.health.v1.health_grpc import HealthStub
from grpclib.health.v1.health_pb2 import HealthCheckRequest, HealthCheckResponse
from grpclib.server import Server

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_grpc, machine_pb2
from ichor.cli._netstat import _pod_netns
from ichor.machined import authz, cri
from ichor.machined.apid import Apid
from ichor.machined.apid._requestlog import request_line
from ichor.machined.apid._tls import AlertingServer, server_context
from ichor.machined.cosi import spec_to_plain
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout
from ichor.machined.resources import NODE_TYPES
from ichor.machined.resources._hostdns import HostDNSConfigSpec
from ichor.machined.resources._network_stack import LinkSpecSpec
from ichor.machined.resources._protoenc import SPEC_MESSAGES, decode_spec, encode_spec
from ichor.machined.server import _containers
from ichor.machined.server._machine import MachineService
from ichor.machined.server._netstat import named_netns, netstat
from ichor.machinery.pki import load_into_ssl_context, new_ed25519_ca, new_keypair

TIMEOUT = 10.0
TALOS_KEYS = set((Path(__file__).parent / "data" / "talos_resource_yaml_keys.txt").read_text().split())


def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


# ----------------------------------------------------------------------------- typed specs


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _spec_classes() -> list[type]:
    """Every dataclass reachable from the specs of the types Talos has (nested ones too)."""
    seen: list[type] = []

    def visit(tp: Any) -> None:
        if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)) or tp in seen:
            for arg in typing.get_args(tp):
                visit(arg)
            return
        seen.append(tp)
        hints = typing.get_type_hints(tp)
        for f in dataclasses.fields(tp):
            visit(hints.get(f.name))

    for t in NODE_TYPES:
        if t.type in SPEC_MESSAGES:
            visit(t.spec_class)
    return seen


def test_talos_keys_are_loaded() -> None:
    assert len(TALOS_KEYS) > 400 and "serviceHostDNSAddress" in TALOS_KEYS and "linkName" in TALOS_KEYS


def test_every_yaml_key_that_talos_has_is_spelt_as_talos_spells_it() -> None:
    by_lower: dict[str, set[str]] = {}
    for key in TALOS_KEYS:
        by_lower.setdefault(key.lower(), set()).add(key)
    classes = _spec_classes()
    assert len(classes) > 60
    drifted = [
        f"{cls.__name__}.{f.name}: {key!r}, Talos {sorted(by_lower[key.lower()])}"
        for cls in classes
        for f in dataclasses.fields(cls)
        if (key := f.metadata.get("yaml", _camel(f.name))) not in TALOS_KEYS and key.lower() in by_lower
    ]
    assert drifted == []


def test_host_dns_config_names_the_service_address_as_talos() -> None:
    spec = HostDNSConfigSpec(
        enabled=True, listen_addresses=("127.0.0.53:53",), service_host_dns_address="10.96.0.9"
    )
    plain = spec_to_plain(spec)
    assert plain["serviceHostDNSAddress"] == "10.96.0.9" and "serviceHostDnsAddress" not in plain
    decoded = decode_spec(
        "HostDNSConfigs.net.talos.dev", encode_spec("HostDNSConfigs.net.talos.dev", spec) or b""
    )
    assert decoded["service_host_dns_address"] == "10.96.0.9"


def test_a_physical_links_spec_shows_gos_zero_link_type_in_both_forms() -> None:
    spec = LinkSpecSpec(name="eth0", up=True, mtu=1500)
    assert spec_to_plain(spec)["type"] == "netrom"  # Talos's YAML of LinkType 0
    encoded = encode_spec("LinkSpecs.net.talos.dev", spec)
    assert encoded is not None
    decoded = decode_spec("LinkSpecs.net.talos.dev", encoded)
    assert decoded["name"] == "eth0" and decoded.get("type", "netrom") == "netrom"
    # "" stays the zero internally: an upper layer without a type keeps the lower one's.
    assert (
        LinkSpecSpec(name="lo", up=True, type="loopback").merged(LinkSpecSpec(name="lo")).type == "loopback"
    )
    assert spec_to_plain(LinkSpecSpec(name="bond0", logical=True, type="ether"))["type"] == "ether"


def test_every_spec_left_at_its_defaults_encodes_in_talos_types() -> None:
    encoded = 0
    for t in NODE_TYPES:
        if t.type not in SPEC_MESSAGES or not dataclasses.is_dataclass(t.spec_class):
            continue
        try:
            spec = t.spec_class()
        except TypeError:
            continue  # a spec with required fields has no defaults to check
        encode_spec(t.type, spec)  # raises SpecEncodingError for a value Talos's type cannot hold
        encoded += 1
    assert encoded > 50


# ----------------------------------------------------------------------------- MachineService


@asynccontextmanager
async def _machine_service(node: Any) -> AsyncIterator[Any]:
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(
            [MachineService(node, roles_of=lambda stream: authz.roles_from_metadata(stream.metadata))]
        )
        path = str(Path(tmp) / "machine.sock")
        await server.start(path=path)
        channel = Channel(path=path)
        try:
            yield machine_grpc.MachineServiceStub(channel)
        finally:
            channel.close()
            server.close()
            await server.wait_closed()


_ADMIN = [("talos-role", "os:admin")]


def test_a_tail_id_that_is_no_xid_is_refused_with_talos_text_after_the_hello() -> None:
    async def go() -> None:
        async with _machine_service(SimpleNamespace(events=EventBus())) as stub:
            with pytest.raises(GRPCError) as raised:
                async with stub.Events.open(metadata=_ADMIN) as call:
                    await call.send_message(machine_pb2.EventsRequest(tail_id="5m"), end=True)
                    hello = await call.recv_message()
                    assert hello is not None and hello.data.type_url == ""
                    assert await call.recv_message() is None  # the stream ends; its status says why
        assert raised.value.status is Status.UNKNOWN
        assert raised.value.message == "error parsing tail_id: xid: invalid ID"

    _run(go())


class _FakeCtr:
    asked: typing.ClassVar[list[tuple[str, str]]] = []

    def __init__(self, address: Path) -> None:
        self.address = address

    async def images(self, namespace: str) -> list[cri.Image]:
        self.asked.append((str(self.address), namespace))
        return [
            cri.Image(name="ghcr.io/siderolabs/kubelet:v1.30.3", digest="sha256:" + "0" * 64, size=31_000_000)
        ]


@pytest.mark.parametrize(
    ("namespace", "expected"), [(common_pb2.NS_SYSTEM, "system"), (common_pb2.NS_CRI, "k8s.io")]
)
def test_image_list_asks_the_cri_containerd_in_either_namespace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, namespace: int, expected: str
) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.2")
    monkeypatch.setattr(cri, "Ctr", _FakeCtr)
    monkeypatch.setattr(_containers, "skip_reason", lambda layout: "")
    _FakeCtr.asked.clear()

    async def go() -> list[Any]:
        async with _machine_service(SimpleNamespace(layout=layout)) as stub:
            return list(
                await stub.ImageList(machine_pb2.ImageListRequest(namespace=namespace), metadata=_ADMIN)
            )

    replies = _run(go())
    assert [r.name for r in replies] == ["ghcr.io/siderolabs/kubelet:v1.30.3"]
    assert _FakeCtr.asked == [(str(layout.path(cri.CRI.address)), expected)]


# ----------------------------------------------------------------------------- apid's TLS refusal


def _node_tls() -> tuple[ssl.SSLContext, Any]:
    ca = new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    cert = new_keypair(ca, common_name="node", ttl=timedelta(days=1), server=True, client=False,
                       ip_addresses=["127.0.0.1"])  # fmt: skip
    return server_context(cert, [ca.crt], check_ext_key_usage=False), ca


@asynccontextmanager
async def _alerting(ctx: ssl.SSLContext) -> AsyncIterator[int]:
    sock = socket.create_server(("127.0.0.1", 0))
    server = AlertingServer([Health()], tls=ctx)
    await server.start(sock=sock)
    try:
        yield sock.getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def _as_go_client(port: int) -> str:
    """What Go's client does against a node that refuses it: finish its side of the TLS 1.3
    handshake, write its preface, then (without reading) its settings and request, then read. Returns
    what the read raised."""
    insecure = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    insecure.set_alpn_protocols(["h2"])
    raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    with raw, insecure.wrap_socket(raw) as tls:
        tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        time.sleep(0.3)  # the node has refused the handshake by now
        tls.sendall(b"\0" * 65536)  # a reset connection fails here: "broken pipe"
        try:
            tls.recv(100)
        except ssl.SSLError as exc:
            return str(exc)
        return "no error"


def test_a_client_without_a_certificate_reads_the_certificate_required_alert() -> None:
    """Even after writing more once the node refused it: the refused connection gets the alert, a
    FIN and is drained, not reset, so the peer's writes succeed and its read finds the alert."""

    async def go() -> str:
        ctx, _ = _node_tls()
        async with _alerting(ctx) as port:
            return await asyncio.to_thread(_as_go_client, port)

    assert "TLSV13_ALERT_CERTIFICATE_REQUIRED" in _run(go())


def test_a_client_with_a_certificate_of_the_cluster_is_served() -> None:
    async def go() -> None:
        ctx, ca = _node_tls()
        client = new_keypair(ca, common_name="admin", ttl=timedelta(days=1), server=False, client=True)
        async with _alerting(ctx) as port:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            tls.load_verify_locations(cadata=ca.crt.decode())
            load_into_ssl_context(tls, client.crt, client.key)
            tls.set_alpn_protocols(["h2"])
            channel = Channel("127.0.0.1", port, ssl=tls)
            try:
                reply = await HealthStub(channel).Check(HealthCheckRequest())
            finally:
                channel.close()
            assert reply.status == HealthCheckResponse.SERVING

    _run(go())


# ----------------------------------------------------------------------------- apid's request log


def test_a_request_line_is_talos_middlewares() -> None:
    at = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    metadata = [
        (":authority", "10.5.0.2:50000"),
        ("nodes", "10.5.0.3"),
        ("nodes", "10.5.0.4"),
        ("token", "s3cret"),
    ]
    ok = request_line(at, path="/machine.MachineService/Version", streaming=False,
                      took=timedelta(microseconds=1234), status=Status.OK, message="", metadata=metadata)  # fmt: skip
    assert ok == (
        "2024/05/01 12:00:00.123456 log.go:73: OK [/machine.MachineService/Version] 1.234ms unary Success "
        "(:authority=10.5.0.2:50000;nodes=10.5.0.3,10.5.0.4;token=<hidden>)"
    )
    denied = request_line(at, path="/machine.MachineService/Logs", streaming=True, took=timedelta(seconds=2),
                          status=Status.PERMISSION_DENIED, message="not authorized", metadata=[])  # fmt: skip
    assert denied == (
        "2024/05/01 12:00:00.123456 log.go:94: PermissionDenied [/machine.MachineService/Logs] 2s stream "
        "rpc error: code = PermissionDenied desc = not authorized ()"
    )


class _Machined:
    """machined's Version, behind its unix socket."""

    async def version(self, stream: Any) -> None:
        await stream.recv_message()
        await stream.send_message(machine_pb2.VersionResponse(messages=[machine_pb2.Version()]))

    def __mapping__(self) -> dict[str, Handler]:
        return {
            "/machine.MachineService/Version": Handler(
                self.version, Cardinality.UNARY_UNARY, empty_pb2.Empty, machine_pb2.VersionResponse
            )
        }


def test_apid_logs_every_call_with_its_status() -> None:
    address = f"127.{random.randint(100, 199)}.{random.randint(0, 255)}.{random.randint(2, 250)}"
    ca = new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    server_cert = new_keypair(ca, common_name=address, ttl=timedelta(days=1), server=True, client=False,
                              ip_addresses=[address])  # fmt: skip
    lines: list[str] = []

    def client(*roles: str) -> Channel:
        cert = new_keypair(ca, organizations=roles, ttl=timedelta(days=1), server=False, client=True)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        tls.load_verify_locations(cadata=ca.crt.decode())
        load_into_ssl_context(tls, cert.crt, cert.key)
        tls.set_alpn_protocols(["h2"])
        return Channel(address, port, ssl=tls)

    async def go() -> None:
        with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
            machined = Server([_Machined()])
            await machined.start(path=f"{tmp}/machined.sock")
            apid = Apid(address=address, port=port, machined_socket=Path(f"{tmp}/machined.sock"),
                        server_cert=server_cert, accepted_cas=[ca.crt], client_cert=None,
                        request_log=lines.append)  # fmt: skip
            try:
                async with apid:
                    admin, reader = client("os:admin"), client("os:reader")
                    try:
                        await machine_grpc.MachineServiceStub(admin).Version(empty_pb2.Empty())
                        with pytest.raises(GRPCError):
                            await machine_grpc.MachineServiceStub(reader).Reboot(machine_pb2.RebootRequest())
                    finally:
                        admin.close()
                        reader.close()
            finally:
                machined.close()
                await machined.wait_closed()

    port = random.randint(20000, 60000)
    _run(go())
    assert len(lines) == 2, lines
    version, reboot = lines
    assert re.fullmatch(
        r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} log\.go:73: OK \[/machine\.MachineService/Version\] \S+ unary "
        rf"Success \(:authority={re.escape(address)}:{port};content-type=application/grpc;user-agent=grpc-python\S*.*\)",
        version,
    ), version
    assert "PermissionDenied [/machine.MachineService/Reboot]" in reboot
    assert "unary rpc error: code = PermissionDenied desc = not authorized" in reboot


# ----------------------------------------------------------------------------- netstat --pods

_POD_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65532        0 5353 1 ffff 100 0 0 10 0
"""
_HOST_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 ffff 100 0 0 10 0
"""


def _process(proc: Path, pid: int, comm: str, net_inode: int, tcp: str, sockets: list[int]) -> None:
    (proc / str(pid) / "fd").mkdir(parents=True)
    (proc / str(pid) / "net").mkdir()
    (proc / str(pid) / "ns").mkdir()
    (proc / str(pid) / "comm").write_text(comm + "\n")
    (proc / str(pid) / "net" / "tcp").write_text(tcp)
    os.symlink(f"net:[{net_inode}]", proc / str(pid) / "ns" / "net")
    for fd, inode in enumerate(sockets, start=3):
        os.symlink(f"socket:[{inode}]", proc / str(pid) / "fd" / str(fd))


def test_netstat_pods_adds_each_pod_network_namespace_by_its_cri_name(tmp_path: Path) -> None:
    netns_dir = tmp_path / "netns"
    netns_dir.mkdir()
    (netns_dir / "cni-1111").write_text("")  # a bound namespace: its inode is the namespace's
    (netns_dir / "cni-gone").write_text("")  # no process in it any more
    proc = tmp_path / "proc"
    _process(proc, 1, "machined", 1, _HOST_TCP, [4242])
    _process(proc, 40, "coredns", os.stat(netns_dir / "cni-1111").st_ino, _POD_TCP, [5353])
    pod_netns = named_netns(netns_dir, [1, 40], proc)
    assert pod_netns == {"cni-1111": 40}

    request = machine_pb2.NetstatRequest(filter=machine_pb2.NetstatRequest.LISTENING)
    request.l4proto.tcp = True
    request.feature.pid = True
    request.netns.hostnetwork = True
    request.netns.allnetns = True
    host, pod = netstat(request, [1, 40], proc, pod_netns=pod_netns)
    assert (host.netns, host.localport, host.process.name) == ("", 8080, "machined")
    assert (pod.netns, pod.localport, pod.process.pid, pod.process.name) == ("cni-1111", 53, 40, "coredns")
    request.netns.allnetns = False  # without --pods: the node's own sockets only
    assert [r.netns for r in netstat(request, [1, 40], proc, pod_netns=pod_netns)] == [""]
    named = machine_pb2.NetstatRequest(netns=machine_pb2.NetstatRequest.NetNS(netns=["cni-1111"]))
    named.l4proto.tcp = True
    named.filter = machine_pb2.NetstatRequest.ALL
    assert [r.netns for r in netstat(named, [1, 40], proc, pod_netns=pod_netns)] == ["cni-1111"]


def test_a_pod_sandbox_carries_its_network_namespace_name_a_host_network_one_none() -> None:
    labels = {"io.kubernetes.pod.namespace": "kube-system", "io.kubernetes.pod.name": "coredns-abc"}
    spec = {
        "linux": {"namespaces": [{"type": "pid"}, {"type": "network", "path": "/var/run/netns/cni-1111"}]}
    }
    base = cri.Container(id="f" * 64, image="registry.k8s.io/pause:3.8", pid=40, status="RUNNING")
    sandbox = cri.pod_container(base, {"Labels": labels, "Spec": spec}, {})
    assert (sandbox.pod, sandbox.network_namespace, sandbox.status) == (
        "kube-system/coredns-abc",
        "cni-1111",
        "SANDBOX_READY",
    )
    host_network = {"linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]}}
    assert cri.pod_container(base, {"Labels": labels, "Spec": host_network}, {}).network_namespace == ""


def test_the_cli_names_each_pod_namespace_by_its_running_sandbox() -> None:
    sandbox = machine_pb2.ContainerInfo(id="kube-system/coredns-abc", pod_id="kube-system/coredns-abc", pid=40,
                                        network_namespace="cni-1111")  # fmt: skip
    container = machine_pb2.ContainerInfo(id="kube-system/coredns-abc:coredns:0123456789ab",
                                          pod_id="kube-system/coredns-abc", pid=41, network_namespace="cni-1111")  # fmt: skip
    host_network = machine_pb2.ContainerInfo(
        id="kube-system/kube-proxy-x", pod_id="kube-system/kube-proxy-x", pid=50
    )
    message = machine_pb2.Container(containers=[sandbox, container, host_network])
    message.metadata.hostname = "10.5.0.2"
    asked: list[Any] = []

    class _Machine:
        async def Containers(self, request: Any) -> Any:
            asked.append(request)
            return machine_pb2.ContainersResponse(messages=[message])

    client = SimpleNamespace(machine=_Machine(), peer_host="10.5.0.2")
    assert _run(_pod_netns(client)) == {("10.5.0.2", "cni-1111"): "kube-system/coredns-abc"}
    assert (asked[0].namespace, asked[0].driver) == ("k8s.io", common_pb2.ContainerDriver.CRI)
