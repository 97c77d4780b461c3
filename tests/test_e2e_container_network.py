"""End to end: the seed network features on ONE container cluster of a control plane and a worker
(root only, as CI runs).

Each feature is its own test on the shared cluster, in this order (the last one re-addresses the
worker): host DNS on 127.0.0.53 answered by the gateway's dnsmasq, the ingress firewall
(``NetworkDefaultActionConfig`` + ``NetworkRuleConfig``) seen from the other node, time from the
gateway's chronyd, ``netstat`` and ``pcap`` on a node, and the Advanced Networking guide's static
addressing applied to the worker. Every packet goes to the cluster's own hosts; the fixture destroys
the cluster and removes what destroy could not.
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster_helpers import cli_env
from container_helpers import CONTAINER_NODES, ContainerCluster, container_cluster

from ichor.machinery import proc
from ichor.machinery.yamlio import dump_document, load_documents, to_plain
from ichor.provision._network import node_mac

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

NAME = "net"
CP, WORKER = f"{NAME}-controlplane-1", f"{NAME}-worker-1"
ALLOWED, BLOCKED = 7071, 7072

DNS_QUERY = """
import socket, struct, sys
name, server = sys.argv[1], sys.argv[2]
body = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\\0"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + body + struct.pack("!HH", 1, 1), (server, 53))
data = s.recv(4096)
rcode, answers = data[3] & 15, struct.unpack("!H", data[6:8])[0]
print(rcode, socket.inet_ntoa(data[-4:]) if answers else "-")
"""

LISTEN = """
import socket, sys
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", int(sys.argv[1])))
server.listen()
print("listening", flush=True)
while True:
    conn, _ = server.accept()
    conn.sendall(b"hello")
    conn.close()
"""

CONNECT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3) as conn:
        print("open", conn.recv(5).decode())
except socket.timeout:
    print("timeout")
except OSError as err:
    print("refused" if isinstance(err, ConnectionRefusedError) else f"error {err}")
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContainerCluster]:
    with container_cluster(tmp_path_factory.mktemp("network"), NAME) as made:
        made.create()
        yield made


def _ok(done: proc.Completed) -> str:
    assert done.exit_code == 0, done.stdout + done.stderr
    return done.stdout


def _wait(what: str, check: Callable[[], object], limit: float = 60) -> object:
    deadline = time.monotonic() + limit
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"{what}: not within {limit:g}s"
        time.sleep(0.5)


def _python_in(cluster: ContainerCluster, node: str, script: str, *args: str) -> str:
    return _ok(cluster.in_node(node, sys.executable, "-c", script, *args, timeout=20)).strip()


def test_host_dns_answers_the_other_nodes_name_from_the_gateway(cluster: ContainerCluster) -> None:
    gateway, worker = cluster.address(1), cluster.address(3)
    queries = cluster.state_dir / "dnsmasq.log"
    asked = f"query[A] {CP} from {worker}"
    assert asked not in queries.read_text()
    # The node's own caching resolver on 127.0.0.53 forwards to the gateway (DHCP handed it out).
    assert _python_in(cluster, WORKER, DNS_QUERY, CP, "127.0.0.53") == f"0 {cluster.address(2)}"
    assert asked in queries.read_text(), queries.read_text()[-800:]
    # The gateway's dnsmasq answers the nodes' names and nothing else (NXDOMAIN, never forwarded).
    assert _python_in(cluster, WORKER, DNS_QUERY, CP, gateway) == f"0 {cluster.address(2)}"
    assert _python_in(cluster, WORKER, DNS_QUERY, "example.com", gateway) == "3 -"
    assert _python_in(cluster, WORKER, DNS_QUERY, "example.com", "127.0.0.53") == "3 -"
    resolvers = _ok(cluster.talosctl("-n", cluster.address(3), "get", "resolvers"))
    assert gateway in resolvers, resolvers
    hostdns = _ok(cluster.talosctl("-n", cluster.address(3), "get", "hostdnsconfigs", "-o", "yaml"))
    assert "enabled: true" in hostdns and "127.0.0.53" in hostdns, hostdns


def _firewall_docs(cidr: str) -> str:
    def rule(name: str, ports: str) -> str:
        return (
            f"---\napiVersion: v1alpha1\nkind: NetworkRuleConfig\nname: {name}\n"
            f"portSelector:\n  ports: {ports}\n  protocol: tcp\ningress:\n  - subnet: {cidr}\n"
        )

    return (
        "apiVersion: v1alpha1\nkind: NetworkDefaultActionConfig\ningress: block\n"
        + rule("apid-trustd", "[50000, 50001]")
        + rule("etcd", "[2379, 2380]")
        + rule("allowed", f"[{ALLOWED}]")
    )


def _connect(cluster: ContainerCluster, port: int) -> str:
    return _python_in(cluster, WORKER, CONNECT, cluster.address(2), str(port))


def test_the_ingress_firewall_blocks_all_but_the_allowed_ports(
    cluster: ContainerCluster, tmp_path: Path
) -> None:
    cp = cluster.address(2)
    pid = cluster.launcher_pid(CP)
    listeners = [
        proc.start(
            ["nsenter", f"--net=/proc/{pid}/ns/net", sys.executable, "-c", LISTEN, str(port)],
            output=tmp_path / f"listen-{port}.log",
        )
        for port in (ALLOWED, BLOCKED)
    ]
    try:
        _wait("listeners", lambda: all("listening" in (tmp_path / f"listen-{p}.log").read_text()
                                       for p in (ALLOWED, BLOCKED)), 20)  # fmt: skip
        assert _connect(cluster, BLOCKED) == "open hello"
        original = cluster.state_dir / f"{CP}.yaml"
        firewalled = tmp_path / "firewalled.yaml"
        firewalled.write_text(original.read_text().rstrip("\n") + "\n---\n" + _firewall_docs(cluster.cidr))
        _ok(cluster.talosctl("-n", cp, "apply-config", "--file", str(firewalled)))
        _wait(
            "the ingress chain",
            lambda: "ingress" in cluster.talosctl("-n", cp, "get", "nftableschains").stdout,
        )
        _wait("the blocked port to be blocked", lambda: _connect(cluster, BLOCKED) == "timeout")
        assert _connect(cluster, ALLOWED) == "open hello"
        # The node still answers its API and etcd through its own rules.
        assert "etcd" in _ok(cluster.talosctl("-n", cp, "service"))
        chains = _ok(cluster.talosctl("-n", cp, "get", "nftableschains", "-o", "yaml"))
        assert "policy: drop" in chains and str(ALLOWED) in chains, chains

        # The config without the documents: no ingress chain, every port reachable again.
        _ok(cluster.talosctl("-n", cp, "apply-config", "--file", str(original)))
        _wait("the blocked port to open again", lambda: _connect(cluster, BLOCKED) == "open hello")
        assert "ingress" not in _ok(cluster.talosctl("-n", cp, "get", "nftableschains"))
    finally:
        for listener in listeners:
            listener.stop(timeout=5)


def test_time_comes_from_the_gateways_chronyd_without_setting_the_clock(cluster: ContainerCluster) -> None:
    node = cluster.address(2)
    servers = _ok(cluster.talosctl("-n", node, "get", "timeservers"))
    assert cluster.address(1) in servers, servers
    status = _wait(
        "time synced",
        lambda: (
            '"synced": true' in (s := cluster.talosctl("-n", node, "get", "timestatus", "-o", "json").stdout)
            and s
        ),
    )
    assert '"syncDisabled": false' in str(status), status
    log = (cluster.state_dir / f"{CP}.log").read_text()
    synced = [line for line in log.splitlines() if "time synced" in line]
    assert synced and f'"server": "{cluster.address(1)}"' in synced[0] and '"offset": ' in synced[0], synced
    # Container mode: the offset is logged, the shared kernel clock never set.
    assert not [line for line in log.splitlines() if "clock set" in line.lower() or "adjtime" in line.lower()]


def test_netstat_lists_the_nodes_sockets_not_the_hosts(cluster: ContainerCluster) -> None:
    with socket.socket() as host_only:
        host_only.bind(("127.0.0.1", 0))
        host_only.listen()
        host_port = host_only.getsockname()[1]
        listening = _ok(cluster.talosctl("-n", cluster.address(2), "netstat", "-l", "-t"))
    rows = [line.split() for line in listening.splitlines()]
    column = rows[0].index("Local")
    local = [row[column] for row in rows[1:]]
    assert any(a.endswith(":50000") for a in local), listening
    assert any(a.endswith(":2379") for a in local), listening
    assert not any(a.endswith(f":{host_port}") for a in local), listening


def test_the_nodes_os_release_is_taloss_naming_the_version_it_reports(cluster: ContainerCluster) -> None:
    # The kubelet reports PRETTY_NAME as the Node's OS image: `kubectl get nodes -o wide` shows Talos's.
    node = cluster.address(2)
    release = _ok(cluster.talosctl("-n", node, "read", "/etc/os-release"))
    tags = [line.split()[1] for line in _ok(cluster.talosctl("-n", node, "version")).splitlines()
            if line.strip().startswith("Tag:")]  # fmt: skip
    tag = tags[-1]  # the server's, after the client's
    assert f'PRETTY_NAME="Talos ({tag})"' in release.splitlines(), release
    assert "ID=talos" in release.splitlines() and Path("/etc/os-release").read_text() != release


def _pcap_records(data: bytes) -> list[bytes]:
    magic = struct.unpack("<I", data[:4])[0]
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), hex(magic)
    linktype = struct.unpack("<I", data[20:24])[0]
    assert linktype == 1, linktype  # Ethernet
    records, offset = [], 24
    while offset < len(data):
        _, _, captured, _ = struct.unpack("<IIII", data[offset : offset + 16])
        records.append(data[offset + 16 : offset + 16 + captured])
        offset += 16 + captured
    assert offset == len(data)
    return records


def test_pcap_captures_the_nodes_traffic_as_a_pcap_file(cluster: ContainerCluster, tmp_path: Path) -> None:
    worker = cluster.address(3)
    out = tmp_path / "eth0.pcap"
    capture = proc.start(
        [sys.executable, "-m", "ichor", "-n", worker, "pcap", "-i", "eth0", "-o", str(out), "--duration", "3s"],
        output=tmp_path / "pcap.log", env=cli_env(cluster.home), cwd=cluster.home,
    )  # fmt: skip
    try:
        time.sleep(1)
        for _ in range(5):
            _connect(cluster, 50000)  # from the worker to the control plane's apid
    finally:
        assert capture.wait(timeout=60) == 0, (tmp_path / "pcap.log").read_text()
    records = _pcap_records(out.read_bytes())
    ipv4 = [r for r in records if r[12:14] == b"\x08\x00"]
    addresses = {socket.inet_ntoa(r[26:30]) for r in ipv4} | {socket.inet_ntoa(r[30:34]) for r in ipv4}
    assert worker in addresses and cluster.address(2) in addresses, addresses


def test_static_addressing_as_the_advanced_networking_guide(
    cluster: ContainerCluster, tmp_path: Path
) -> None:
    worker, gateway, extra = cluster.address(3), cluster.address(1), cluster.address(200)
    config = to_plain(load_documents((cluster.state_dir / f"{WORKER}.yaml").read_text())[0])
    config["machine"]["network"] = {
        "hostname": "talos-static",
        "nameservers": [gateway],
        "interfaces": [
            {
                "deviceSelector": {"hardwareAddr": node_mac(NAME, WORKER)},
                "dhcp": False,
                "addresses": [f"{worker}/24", f"{extra}/24"],
                "mtu": 1400,
                "routes": [{"network": "0.0.0.0/0", "gateway": gateway}],
            }
        ],
    }
    path = tmp_path / "static.yaml"
    path.write_text(dump_document(config))
    _ok(cluster.talosctl("-n", worker, "apply-config", "--file", str(path)))

    def shows(resource: str, *texts: str) -> bool:
        got = cluster.talosctl("-n", worker, "get", resource)
        return got.exit_code == 0 and all(t in got.stdout for t in texts)

    _wait("the extra address", lambda: shows("addresses", f"eth0/{extra}/24", f"eth0/{worker}/24"))
    _wait(
        "the mtu",
        lambda: "1400" in cluster.talosctl("-n", worker, "get", "links", "eth0", "-o", "yaml").stdout,
    )
    _wait("the default route", lambda: shows("routes", gateway))
    _wait("the hostname", lambda: shows("hostnamestatus", "talos-static"))
    _wait("the resolvers", lambda: shows("resolvers", gateway))
    operators = _ok(cluster.talosctl("-n", worker, "get", "operatorspecs"))
    assert "dhcp4/eth0" not in operators, operators
    # The node answers on its address and on the added one.
    _ok(cluster.talosctl("-n", worker, "version"))
    with socket.create_connection((extra, 50000), timeout=5):
        pass
