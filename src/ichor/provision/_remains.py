"""What a cluster holds on the host outside its state directory, found from its record and from its
name, and removing it in order: what ``cluster destroy`` undoes, and what it checks is gone.

A destroy that was interrupted, or a record that is damaged or gone, must not hide what the host
still holds. Everything a container cluster makes is named after the cluster: the bridges
``talos<hash>`` and ``talos<hash>-2``, the nftables table ``inet ichor-<bridge>``, each node's veths
and the cgroups ``ichor/<name>``; and while a bridge exists its address names the CIDR whose
blackhole route create installed. So destroy takes the union (:func:`merged`) of what the record
says (:func:`recorded`) and what the name derives (:func:`derived`), and a rerun removes whatever is left. :func:`remove` goes cgroups, veths,
bridges, nftables tables, the blackhole routes last; :func:`left` says what is still there.

The host is reached through :class:`Host` (the real one is :class:`LinuxHost`), so the order can be
tested with a fake. Failures are :class:`~ichor.machinery.errors.MachineryError`.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ichor.machinery import proc
from ichor.machinery.errors import MachineryError
from ichor.provision import _cgroups
from ichor.provision import _network as net
from ichor.provision._record import ClusterRecord

__all__ = ["Host", "HostParts", "LinuxHost", "derived", "left", "merged", "recorded", "remove"]

_LAUNCHER_LOG = ".launcher.log"


class Host(Protocol):
    def cgroup_dirs(self, cluster: str) -> list[Path]: ...
    def cgroup_exists(self, directory: Path) -> bool: ...
    def remove_cgroups(self, dirs: list[Path]) -> list[str]: ...
    def link_exists(self, name: str) -> bool: ...
    def link_network(self, name: str) -> str: ...
    def delete_link(self, name: str) -> bool: ...
    def has_firewall(self, table: str) -> bool: ...
    def remove_firewall(self, table: str) -> bool: ...
    def has_blackhole(self, cidr: str) -> bool: ...
    def remove_blackhole(self, cidr: str) -> None: ...


@dataclass
class HostParts:
    """Everything of one cluster the host may hold, in the order of removal."""

    cgroups: list[Path] = field(default_factory=list)
    veths: list[str] = field(default_factory=list)
    taps: list[str] = field(default_factory=list)
    """The VMs' tap devices (qemu nodes)."""
    bridges: list[str] = field(default_factory=list)
    firewalls: list[str] = field(default_factory=list)
    blackholes: list[tuple[str, str]] = field(default_factory=list)
    """CIDRs whose blackhole route (:data:`~._network.BLACKHOLE_METRIC`) create installed, each with
    a note for the progress line ("" or " (--extra-cidr)")."""


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


_EXTRA = " (--extra-cidr)"


def recorded(record: ClusterRecord) -> HostParts:
    """What the record says the cluster made (create records each part before making it)."""
    found = HostParts(cgroups=[Path(d) for d in _unique(record.cgroups)])
    if record.bridge:  # a node on the bridge without taps (a VM's) has veths
        networks = (1, 2) if record.extra_cidr else (1,)
        found.veths = _unique(
            net.veth_name(record.name, n.name, i) for n in record.nodes if not n.taps for i in networks
        )
    found.taps = _unique(tap for n in record.nodes for tap in n.taps)
    found.bridges = _unique([record.extra_bridge, record.bridge])
    found.firewalls = _unique([record.firewall])
    found.blackholes = [
        (c, note) for c, note in ((record.extra_blackhole, _EXTRA), (record.blackhole, "")) if c
    ]
    return found


def derived(name: str, state_dir: Path, host: Host) -> HostParts:
    """Every part the cluster's name derives: the nodes are those with a launcher log in
    ``state_dir``, and each bridge that still exists names a blackhole route's CIDR."""
    nodes = sorted(p.name.removesuffix(_LAUNCHER_LOG) for p in state_dir.glob(f"*{_LAUNCHER_LOG}"))
    bridges = [(net.extra_bridge_name(name), _EXTRA), (net.bridge_name(name), "")]
    return HostParts(
        cgroups=host.cgroup_dirs(name),
        veths=_unique(net.veth_name(name, node, i) for node in nodes for i in (1, 2)),
        bridges=[b for b, _ in bridges],
        firewalls=[net.firewall_table(net.bridge_name(name))],
        blackholes=[(host.link_network(b), note) for b, note in bridges if host.link_exists(b)],
    )


def merged(first: HostParts, second: HostParts) -> HostParts:
    """Both, each part once, ``first``'s first."""
    blackholes = dict(first.blackholes)
    for cidr, note in second.blackholes:
        if cidr:
            blackholes.setdefault(cidr, note)
    return HostParts(
        cgroups=[Path(d) for d in _unique(map(str, [*first.cgroups, *second.cgroups]))],
        veths=_unique([*first.veths, *second.veths]),
        taps=_unique([*first.taps, *second.taps]),
        bridges=_unique([*first.bridges, *second.bridges]),
        firewalls=_unique([*first.firewalls, *second.firewalls]),
        blackholes=list(blackholes.items()),
    )


def remove(found: HostParts, host: Host, progress: Callable[[str], None]) -> None:
    """Remove ``found`` in order, the blackhole routes last; only once no process of the cluster
    runs. A node's namespace goes when its last process has, but the kernel dismantles it a moment
    later: its veth is deleted here rather than left to that. A cgroup that will not go is raised
    only once the network is gone (``cluster destroy`` again retries it)."""
    kept: MachineryError | None = None
    cgroups = [d for d in found.cgroups if host.cgroup_exists(d)]
    try:
        for done in host.remove_cgroups(cgroups):
            progress(done)
        if cgroups:
            progress(
                f"removed the nodes' cgroups ({_cgroups.PARENT}/{cgroups[0].name} in {len(cgroups)} hierarchies)"
            )
    except MachineryError as exc:
        kept = exc
    for link in (*found.veths, *found.taps):
        host.delete_link(link)
    for bridge in found.bridges:
        if host.delete_link(bridge):
            progress(f"removed bridge {bridge}")
    for table in found.firewalls:
        if host.remove_firewall(table):
            progress(f"removed nftables table inet {table}")
    for cidr, note in found.blackholes:
        host.remove_blackhole(cidr)
        progress(f"removed the blackhole route for {cidr}{note}")
    if kept is not None:
        raise kept


def left(found: HostParts, host: Host) -> list[str]:
    """What of ``found`` the host still holds, each with the command that removes it by hand."""
    remains = [f"cgroup {d} (rmdir it once empty)" for d in found.cgroups if host.cgroup_exists(d)]
    links = (*found.veths, *found.taps, *found.bridges)
    remains += [f"link {n} (ip link del {n})" for n in links if host.link_exists(n)]
    remains += [
        f"nftables table inet {t} (nft delete table inet {t})"
        for t in found.firewalls
        if host.has_firewall(t)
    ]
    remains += [
        f"blackhole route {c} (ip route del blackhole {c} metric {net.BLACKHOLE_METRIC}, last)"
        for c, _ in found.blackholes
        if host.has_blackhole(c)
    ]
    return remains


class LinuxHost:
    """This machine: ``ip`` and ``nft`` through :mod:`ichor.machinery.proc`, cgroups under
    ``/sys/fs/cgroup``. On a host without ``ip`` or ``nft`` nothing of theirs can exist."""

    def cgroup_dirs(self, cluster: str) -> list[Path]:
        return _cgroups.cluster_dirs(_cgroups.current(), cluster)

    def cgroup_exists(self, directory: Path) -> bool:
        return directory.is_dir()

    def remove_cgroups(self, dirs: list[Path]) -> list[str]:
        return _cgroups.remove(dirs)

    def link_exists(self, name: str) -> bool:
        return shutil.which("ip") is not None and net.link_exists(name)

    def link_network(self, name: str) -> str:
        shown = proc.run(["ip", "-j", "-4", "address", "show", "dev", name], timeout=15, check=False)
        for link in json.loads(shown.stdout or "[]") if shown.exit_code == 0 else []:
            for info in link.get("addr_info", []):
                return str(ipaddress.ip_interface(f"{info['local']}/{info['prefixlen']}").network)
        return ""

    def delete_link(self, name: str) -> bool:
        return shutil.which("ip") is not None and net.delete_link(name)

    def has_firewall(self, table: str) -> bool:
        return shutil.which("nft") is not None and net.has_firewall(table)

    def remove_firewall(self, table: str) -> bool:
        return shutil.which("nft") is not None and net.remove_firewall(table)

    def has_blackhole(self, cidr: str) -> bool:
        return shutil.which("ip") is not None and net.has_blackhole(cidr)

    def remove_blackhole(self, cidr: str) -> None:
        net.remove_blackhole(cidr)
