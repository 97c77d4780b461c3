"""``cluster create|destroy`` for container nodes: the network around the nodes, and starting them.

A container node is machined as PID 1 of its own namespaces (:mod:`._namespaces`), run by a launcher
in container mode; this module builds what lies outside the nodes, in the host's network namespace
(:mod:`._network`): the blackhole route first, the cluster's nftables table (the host forwards
nothing for the bridge), the bridge, dnsmasq on it (DHCP, and DNS for the nodes' names), then each node's launcher
and its veth. It boots every node with its machine config (as Talos's docker provisioner passes
USERDATA), so no maintenance-mode step is needed. Removal is the reverse, the blackhole last, and only
once every process of the cluster has gone (:func:`remove_network`).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

from ichor.machinery import proc
from ichor.machinery.errors import MachineryError
from ichor.provision import _cgroups, _remains
from ichor.provision import _network as net
from ichor.provision._namespaces import network_namespace_of
from ichor.provision._processes import ProcessId, tags
from ichor.provision._provisioner import Provisioner, ProvisionerName
from ichor.provision._record import ClusterRecord, NodeRecord, cluster_flags, launcher_state_file

__all__ = [
    "PROVISIONER",
    "ContainerProvisioner",
    "check_host",
    "create_network",
    "remove_network",
    "start_nodes",
    "static_address_patch",
    "time_server_patch",
]

NAMESPACE_TIMEOUT = 30.0
"""How long a launcher may take to make its namespaces."""


def check_host() -> None:
    """Refuse a host that cannot run container nodes, naming what is missing."""
    if os.geteuid() != 0:
        raise MachineryError(
            "container nodes need root (namespaces, a bridge and routes)",
            hint="run as root for container nodes, the only ones that run Kubernetes; or pass --provisioner "
            "process for node processes on the loopback (Talos's API, etcd and discovery, but no Kubernetes)",
        )
    if shutil.which("ip") is None:
        raise MachineryError(
            "`ip` (iproute2) is not installed", hint="install it (Debian: apt-get install -y iproute2)"
        )
    if shutil.which("dnsmasq") is None:
        raise MachineryError(
            "dnsmasq (the container cluster's DHCP server) is not installed", hint=net.DNSMASQ_HINT
        )
    if shutil.which("nft") is None:
        raise MachineryError(
            "nft (nftables: the container cluster's forwarding guard and the nodes' firewall) is not installed",
            hint=net.NFT_HINT,
        )


def check_cidr(name: str, cidr: str, state: Path, extra_cidr: str = "") -> None:
    """The CIDR (and the extra one) is free on this machine and the cluster's bridge names are not taken."""

    def hinter(flag: str) -> Callable[[ipaddress.IPv4Network], str]:
        def hint(network: ipaddress.IPv4Network) -> str:
            for path in sorted(state.expanduser().glob("*/cluster.yaml")):
                try:
                    other = ClusterRecord.load(state, path.parent.name)
                    used = [("--cidr", other.cidr)] + (
                        [("--extra-cidr", other.extra_cidr)] if other.extra_cidr else []
                    )
                    overlapping = [
                        (f, c) for f, c in used if ipaddress.ip_network(c, strict=False).overlaps(network)
                    ]
                except (MachineryError, ValueError):
                    continue
                if overlapping or other.bridge == net.bridge_name(name):
                    theirs, their_cidr = overlapping[0] if overlapping else used[0]
                    return (
                        f"cluster {other.name!r} uses {theirs} {their_cidr}: pick another {flag}, or destroy it "
                        f"with `talosctl cluster destroy {cluster_flags(state, other.name)}`"
                    )
            return f"pick a {flag} nothing on this machine uses (see `ip route show table all`), or another --name"

        return hint

    net.check_cidr(cidr, net.bridge_name(name), hinter("--cidr"))
    if not extra_cidr:
        return
    extra = net.network(extra_cidr, flag="--extra-cidr")
    if extra.overlaps(net.network(cidr)):
        raise MachineryError(
            f"--extra-cidr {extra_cidr} overlaps --cidr {cidr}",
            hint="the second network needs a range of its own, e.g. --cidr 10.5.0.0/24 --extra-cidr 10.6.0.0/24",
        )
    net.check_cidr(extra_cidr, net.extra_bridge_name(name), hinter("--extra-cidr"), flag="--extra-cidr")


def static_address_patch(record: ClusterRecord, node: NodeRecord) -> str:
    """eth0's address and the default route through the bridge, as machine config (the
    hidden ``--static-addresses`` switch, instead of :func:`dhcp_patch`)."""
    prefix = ipaddress.ip_network(record.cidr, strict=False).prefixlen
    text = (
        "machine:\n  network:\n    interfaces:\n      - interface: eth0\n"
        f"        addresses: [{node.address}/{prefix}]\n        mtu: {record.mtu}\n"
        f"        routes:\n          - network: 0.0.0.0/0\n            gateway: {net.gateway(record.cidr)}\n"
        f"{_vip(record, node)}"
    )
    if record.extra_cidr:
        extra_prefix = net.network(record.extra_cidr).prefixlen
        text += f"      - interface: eth1\n        addresses: [{node.extra_address}/{extra_prefix}]\n        mtu: {record.mtu}\n"
    if record.nameservers:
        text += f"    nameservers: [{', '.join(record.nameservers)}]\n"
    return text


def dhcp_patch(record: ClusterRecord, node: NodeRecord) -> str:
    """eth0 by DHCP from the cluster's dnsmasq (a reservation per MAC). Talos's default DHCP covers
    physical links only and eth0 is a veth, so the config names it, as a user of a bridged VM would."""
    text = (
        "machine:\n  network:\n    interfaces:\n      - interface: eth0\n        dhcp: true\n"
        f"        mtu: {record.mtu}\n{_vip(record, node)}"
    )
    if record.extra_cidr:
        text += f"      - interface: eth1\n        dhcp: true\n        mtu: {record.mtu}\n"
    return text


def _vip(record: ClusterRecord, node: NodeRecord) -> str:
    """eth0's ``vip`` on a control plane with ``--use-vip`` (Talos's ``WithNetworkInterfaceVirtualIP``
    on the provisioner's first interface); nothing otherwise."""
    if not record.vip or node.type != "controlplane":
        return ""
    return f"        vip:\n          ip: {record.vip}\n"


def time_server_patch(record: ClusterRecord) -> str:
    """The nodes ask the cluster's own time server (chronyd on the bridge), as Talos's QEMU clusters
    do with theirs: nothing outside the machine is reachable, so time.cloudflare.com never answers."""
    return f"machine:\n  time:\n    servers: [{net.gateway(record.cidr)}]\n"


def create_network(record: ClusterRecord, progress: Callable[[str], None]) -> None:
    """Blackhole route, forwarding guard, bridge and DHCP/DNS server, each recorded as soon as it exists."""
    progress(
        f"routing {record.cidr} to a blackhole (metric {net.BLACKHOLE_METRIC}) before anything can send there"
    )
    net.install_blackhole(record.cidr)
    record.blackhole = record.cidr
    record.save()
    if record.extra_cidr:
        progress(
            f"routing {record.extra_cidr} (--extra-cidr) to a blackhole (metric {net.BLACKHOLE_METRIC}) too"
        )
        net.install_blackhole(record.extra_cidr)
        record.extra_blackhole = record.extra_cidr
        record.save()
    bridge = net.bridge_name(record.name)
    record.firewall = net.firewall_table(bridge)
    record.save()
    net.install_firewall(bridge)
    progress(f"nftables table inet {record.firewall}: the host forwards nothing from or to {bridge}")
    progress(f"creating bridge {bridge} with gateway {net.gateway(record.cidr)}")
    record.bridge = bridge
    record.save()
    net.create_bridge(bridge, record.cidr, record.mtu)
    state_dir = Path(record.state_dir)
    reservations = [(n.mac, n.address, n.name) for n in record.nodes]
    arguments = net.dnsmasq_arguments(
        state_dir, bridge, record.cidr, reservations, record.nameservers, record.mtu
    )
    record.dhcp_pid = net.start_dhcp(state_dir, bridge, arguments)
    record.save()
    progress(
        f"DHCP server (dnsmasq) on {bridge}: {len(reservations)} reservation(s) by MAC; DNS on "
        f"{net.gateway(record.cidr)} for the nodes' names only"
    )
    record.ntp_pid = net.start_ntp(state_dir, record.cidr)
    record.save()
    progress(f"time server (chronyd, never setting the clock) on {net.gateway(record.cidr)}")
    if record.extra_cidr:
        _create_extra_network(record, progress)


def _create_extra_network(record: ClusterRecord, progress: Callable[[str], None]) -> None:
    """The second network (``--extra-cidr``): its own blackhole, bridge and DHCP server, which hands
    out addresses only - no router, no DNS - so a node's default route stays on eth0."""
    bridge = net.extra_bridge_name(record.name)
    progress(f"creating bridge {bridge} with gateway {net.gateway(record.extra_cidr)} (--extra-cidr)")
    record.extra_bridge = bridge
    record.save()
    net.create_bridge(bridge, record.extra_cidr, record.mtu)
    reservations = [(n.extra_mac, n.extra_address, n.name) for n in record.nodes]
    state_dir = Path(record.state_dir)
    arguments = net.dnsmasq_arguments(
        state_dir,
        bridge,
        record.extra_cidr,
        reservations,
        (),
        record.mtu,
        label="dnsmasq-extra",
        router=False,
    )
    record.extra_dhcp_pid = net.start_dhcp(state_dir, bridge, arguments, label="dnsmasq-extra")
    record.save()
    progress(
        f"DHCP server (dnsmasq) on {bridge}: {len(reservations)} reservation(s) by MAC, no default route"
    )


def _start_launcher(
    cluster: str, node: NodeRecord, state_dir: Path, config: Path, extensions: list[str]
) -> proc.Background:
    command = [
        sys.executable, "-m", "ichor.provision.launcher", "--root", node.root, "--address", node.address,
        "--log", str(state_dir / f"{node.name}.log"),
        "--state-file", str(launcher_state_file(state_dir, node.name)),
        "--container", str(state_dir / f"{node.name}.rootfs"), "--hostname", node.name, "--config", str(config),
        "--cgroup", f"{cluster}/{node.name}",
        *(arg for ext in extensions for arg in ("--extension", ext)),
    ]  # fmt: skip
    background = proc.start(
        command, output=state_dir / f"{node.name}.launcher.log", env=tags(state_dir, node.name)
    )
    identity = ProcessId.of(background.pid)
    node.launcher_pid, node.launcher_start = background.pid, identity.start if identity else 0
    return background


def start_nodes(record: ClusterRecord, progress: Callable[[str], None]) -> None:
    """Each node's cgroups and launcher (which makes the node's namespaces), then its veth into them."""
    state_dir = Path(record.state_dir)
    host_ns = network_namespace_of(os.getpid())
    hierarchies = _cgroups.current()
    record.cgroups = [str(d) for d in _cgroups.cluster_dirs(hierarchies, record.name)]
    record.save()
    for node in record.nodes:
        Path(node.root).mkdir(parents=True, exist_ok=True, mode=0o700)
        made = _cgroups.create(hierarchies, record.name, node.name)
        limits = _cgroups.Limits.of(record.cpus.get(node.type, ""), record.memory_mb.get(node.type, 0))
        for line in _cgroups.limit(hierarchies, made, limits):
            progress(f"{node.name}: {line}")
        config = state_dir / f"{node.name}.yaml"
        launcher = _start_launcher(record.name, node, state_dir, config, record.extensions)
        record.save()
        deadline = time.monotonic() + NAMESPACE_TIMEOUT
        while network_namespace_of(launcher.pid) in (host_ns, None):
            if launcher.poll() is not None or time.monotonic() > deadline:
                log = state_dir / f"{node.name}.launcher.log"
                raise MachineryError(
                    f"{node.name}'s launcher did not make its namespaces: {_tail(log)}", hint=f"see {log}"
                )
            time.sleep(0.02)
        net.add_veth(record.bridge, net.veth_name(record.name, node.name), node.mac, launcher.pid, record.mtu)
        extra = ""
        if record.extra_cidr:
            host_end = net.veth_name(record.name, node.name, network=2)
            net.add_veth(
                record.extra_bridge, host_end, node.extra_mac, launcher.pid, record.mtu, inner="eth1"
            )
            extra = f"; eth1 {node.extra_mac} on {record.extra_bridge}, {node.extra_address}"
        progress(
            f"started {node.name} in its own namespaces: eth0 {node.mac} on {record.bridge}, {node.address}{extra}"
        )


def _tail(path: Path) -> str:
    try:
        return path.read_text().strip()[-400:] or "(no output)"
    except OSError:
        return "(no output)"


def remove_network(record: ClusterRecord, progress: Callable[[str], None]) -> None:
    """The nodes' cgroups, the veths, the bridge, the forwarding guard, then the blackhole route,
    last (:func:`._remains.remove`): what ``record`` names. Only once no process of the cluster runs."""
    _remains.remove(_remains.recorded(record), _remains.LinuxHost(), progress)


class ContainerProvisioner:
    """The ``container`` provisioner (:class:`~._provisioner.Provisioner`): each node in namespaces of
    its own on the cluster's bridge, booted with its config as Talos's docker nodes are."""

    name = ProvisionerName.CONTAINER
    nodes_noun = "container nodes"
    owns_network = True
    node_limits = True
    runs_kubernetes = True
    kubernetes_wait_skipped = ""
    maintenance_timeout = timedelta(seconds=60)

    def check_host(self) -> None:
        check_host()

    def check_flags(self, flags: dict[str, object]) -> None:
        from ichor.provision._qemu import refuse_vm_flags

        refuse_vm_flags(flags, "container nodes")
        extra_cidr, count = str(flags.get("extra_cidr") or ""), int(str(flags.get("nodes", 0)))
        if extra_cidr:
            net.node_addresses(extra_cidr, count, flag="--extra-cidr")

    def addresses(self, cidr: str, count: int) -> list[str]:
        return net.node_addresses(cidr, count)

    def check_free(self, name: str, cidr: str, state: Path, addresses: Sequence[str], controlplanes: int,
                   extra_cidr: str) -> None:  # fmt: skip
        check_cidr(name, cidr, state, extra_cidr)

    def plan_node(self, record: ClusterRecord, node: NodeRecord) -> None:
        node.mac = net.node_mac(record.name, node.name)
        if record.extra_cidr:
            index = record.nodes.index(node)
            extra = net.node_addresses(record.extra_cidr, len(record.nodes), flag="--extra-cidr")
            node.extra_address, node.extra_mac = extra[index], net.node_mac(record.name, f"{node.name}/eth1")

    def create_network(self, record: ClusterRecord, progress: Callable[[str], None]) -> None:
        create_network(record, progress)

    def node_patches(self, record: ClusterRecord, node: NodeRecord) -> list[str]:
        address = static_address_patch if record.static_addresses else dhcp_patch
        return [time_server_patch(record), address(record, node)]

    def start_nodes(self, record: ClusterRecord, progress: Callable[[str], None]) -> bool:
        start_nodes(
            record, progress
        )  # booted with their configs, as Talos's docker provisioner passes USERDATA
        return False

    def host_parts(
        self, record: ClusterRecord | None, name: str, state_dir: Path, host: _remains.Host
    ) -> _remains.HostParts:
        found = _remains.recorded(record) if record is not None else _remains.HostParts()
        return _remains.merged(found, _remains.derived(name, state_dir, host))

    def show_rows(self, record: ClusterRecord) -> list[list[str]]:
        return []


PROVISIONER: Provisioner = ContainerProvisioner()
