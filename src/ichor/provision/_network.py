"""A container cluster's network in the host's (root) network namespace: blackhole route, bridge,
veths and the DHCP server.

The order is the safety argument. Before anything can send to the cluster's CIDR, a blackhole route
for it is installed with the lowest priority (metric 2^32-1): the bridge's own connected route wins
while the bridge exists, and whatever happens to the bridge a packet to a cluster address never
leaves the machine by the default route. It is removed last, after the bridge, and only once every
process of the cluster has gone. The bridge (``talos<8 hex of sha256(cluster name)>``, the name
Talos's QEMU provisioner gives its bridge) holds the gateway, the CIDR's first address, and does not
forward: nodes reach each other and the host, nothing beyond; a root-namespace nftables table of the
cluster's own (``inet ichor-<bridge>``, :func:`firewall_ruleset`) drops whatever the host would
forward from or to the bridge, whatever the host's ``ip_forward`` and other tables say. Each node's
veth has a deterministic MAC (:func:`node_mac`), so the DHCP server (dnsmasq, bound to the bridge
only) hands every node its reserved address, and the same dnsmasq is the nodes' DNS server on the
gateway: it answers the nodes' hostnames and nothing else (no upstream, NXDOMAIN for every other
name), so a node's resolver never sends a query off the machine.

Everything here runs ``ip`` through :mod:`ichor.machinery.proc` and is idempotent on removal.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ichor.machinery import proc
from ichor.machinery.errors import MachineryError
from ichor.provision._processes import tags

__all__ = [
    "BLACKHOLE_METRIC",
    "DEFAULT_CIDR",
    "add_veth",
    "bridge_name",
    "check_cidr",
    "check_nameservers",
    "create_bridge",
    "delete_link",
    "dnsmasq_arguments",
    "extra_bridge_name",
    "firewall_ruleset",
    "firewall_table",
    "gateway",
    "has_blackhole",
    "has_firewall",
    "install_blackhole",
    "install_firewall",
    "link_exists",
    "network",
    "node_addresses",
    "node_mac",
    "remove_blackhole",
    "remove_firewall",
    "start_dhcp",
    "veth_name",
    "wait_until_logged",
]

DEFAULT_CIDR = "10.5.0.0/24"
"""Talos's docker provisioner's default."""
BLACKHOLE_METRIC = 4294967295
DHCP_TIMEOUT = 10.0
CHRONY_HINT = "install it (Debian: `apt-get install -y chrony`; `bash run.sh` does it as root)"
DNSMASQ_HINT = "install it (Debian: `apt-get install -y dnsmasq-base`; `bash run.sh` does it as root)"
NFT_HINT = "install it (Debian: `apt-get install -y nftables`; `bash run.sh` does it as root)"


def _ip(*args: str, check: bool = True) -> proc.Completed:
    return proc.run(["ip", *args], timeout=15, check=check)


def bridge_name(cluster: str) -> str:
    return "talos" + hashlib.sha256(cluster.encode()).hexdigest()[:8]


def extra_bridge_name(cluster: str) -> str:
    """The bridge of the cluster's second network (``--extra-cidr``): the first's name and ``-2``."""
    return bridge_name(cluster) + "-2"


def node_mac(cluster: str, node: str) -> str:
    """A locally administered unicast MAC, the same for the node every time."""
    digest = hashlib.sha256(f"{cluster}/{node}".encode()).digest()
    return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))


def veth_name(cluster: str, node: str, network: int = 1) -> str:
    """The host end of the node's veth on the cluster's ``network`` (1, or 2 for ``--extra-cidr``),
    15 characters at most, as the kernel wants."""
    return (
        "veth"
        + hashlib.sha256(f"{cluster}/{node}".encode()).hexdigest()[:8]
        + ("" if network == 1 else f"-{network}")
    )


def network(cidr: str, *, flag: str = "--cidr") -> ipaddress.IPv4Network:
    """``cidr`` as a network a bridge can serve; an error naming ``flag`` if it is not."""
    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        raise MachineryError(f"invalid CIDR {cidr!r}", hint=f"pass {flag} like {DEFAULT_CIDR}") from None
    if not isinstance(network, ipaddress.IPv4Network):
        raise MachineryError(
            f"{flag} {cidr} is IPv6", hint=f"container nodes take an IPv4 {flag} such as {DEFAULT_CIDR}"
        )
    if network.is_loopback or network.is_link_local or network.is_multicast:
        raise MachineryError(
            f"{flag} {cidr} is not a range a bridge can serve",
            hint=f"use a private range such as {DEFAULT_CIDR} (loopback ranges are for --provisioner process)",
        )
    return network


def gateway(cidr: str) -> str:
    """The bridge's address: the CIDR's first host (Talos's gateway)."""
    return str(next(network(cidr).hosts()))


def node_addresses(cidr: str, count: int, *, flag: str = "--cidr") -> list[str]:
    """Node addresses from the CIDR: .2 onwards (.1 is the gateway)."""
    hosts = [str(h) for _, h in zip(range(count + 1), network(cidr, flag=flag).hosts(), strict=False)][1:]
    if len(hosts) < count:
        raise MachineryError(
            f"{flag} {cidr} has room for {len(hosts)} nodes, {count} asked", hint=f"use a larger {flag}"
        )
    return hosts


def _host_networks() -> list[tuple[ipaddress.IPv4Network, str]]:
    """Every IPv4 destination the host routes (all tables) and every address it holds."""
    found: list[tuple[ipaddress.IPv4Network, str]] = []
    for route in json.loads(_ip("-j", "-4", "route", "show", "table", "all").stdout or "[]"):
        dst = route.get("dst", "")
        if dst in ("", "default"):
            continue
        kind = route.get("type", "unicast")
        where = f"dev {route['dev']}" if "dev" in route else kind
        found.append((ipaddress.IPv4Network(dst, strict=False), f"a {kind} route to {dst} ({where})"))
    for link in json.loads(_ip("-j", "-4", "address", "show").stdout or "[]"):
        for info in link.get("addr_info", []):
            prefix = ipaddress.IPv4Interface(f"{info['local']}/{info['prefixlen']}").network
            found.append((prefix, f"address {info['local']}/{info['prefixlen']} on {link.get('ifname')}"))
    return found


def check_cidr(
    cidr: str, bridge: str, hint_other: Callable[[ipaddress.IPv4Network], str], *, flag: str = "--cidr"
) -> None:
    """Refuse, before anything is created, a CIDR the host already routes or holds (another
    cluster's blackhole included), and a bridge name in use."""
    wanted = network(cidr, flag=flag)
    if _ip("link", "show", "dev", bridge, check=False).exit_code == 0:
        raise MachineryError(
            f"network interface {bridge} (this cluster's bridge) already exists", hint=hint_other(wanted)
        )
    for other, what in _host_networks():
        if other.overlaps(wanted) and other.prefixlen > 0:
            raise MachineryError(f"{flag} {cidr} overlaps {what} on this machine", hint=hint_other(wanted))


def install_blackhole(cidr: str) -> None:
    _ip("route", "add", "blackhole", str(network(cidr)), "metric", str(BLACKHOLE_METRIC))


def has_blackhole(cidr: str) -> bool:
    shown = _ip("-j", "route", "show", "type", "blackhole", str(network(cidr)), check=False)
    return shown.exit_code == 0 and bool(json.loads(shown.stdout or "[]"))


def remove_blackhole(cidr: str) -> None:
    if has_blackhole(cidr):
        _ip("route", "del", "blackhole", str(network(cidr)), "metric", str(BLACKHOLE_METRIC))


def create_bridge(name: str, cidr: str, mtu: int) -> None:
    served = network(cidr)
    _ip("link", "add", name, "mtu", str(mtu), "type", "bridge")
    # Our bridge does not route for its nodes, whatever the host's ip_forward (a setting of this
    # interface only, gone with it).
    Path(f"/proc/sys/net/ipv4/conf/{name}/forwarding").write_text("0\n")
    _ip("address", "add", f"{gateway(cidr)}/{served.prefixlen}", "dev", name)
    _ip("link", "set", name, "up")


def link_exists(name: str) -> bool:
    return _ip("link", "show", "dev", name, check=False).exit_code == 0


def delete_link(name: str) -> bool:
    """Remove a link (the bridge, a veth with its peer); False when there was none."""
    if not link_exists(name):
        return False
    # The kernel may take it away meanwhile (a node's namespace being dismantled): not an error.
    return _ip("link", "del", name, check=False).exit_code == 0


def add_veth(bridge: str, host_end: str, mac: str, pid: int, mtu: int, inner: str = "eth0") -> None:
    """A veth pair: ``host_end`` on the bridge, ``inner`` (with ``mac``) in ``pid``'s network namespace."""
    _ip("link", "add", host_end, "mtu", str(mtu), "type", "veth",
        "peer", "name", inner, "address", mac, "mtu", str(mtu), "netns", str(pid))  # fmt: skip
    _ip("link", "set", host_end, "master", bridge, "up")


def check_nameservers(cidr: str, nameservers: Sequence[str]) -> None:
    """Container nodes may only be handed DNS servers inside the cluster's CIDR: nothing outside the
    machine is reachable, and a node must never send anywhere but the cluster's own hosts."""
    served = network(cidr)
    for server in nameservers:
        try:
            address = ipaddress.ip_address(server)
        except ValueError:
            raise MachineryError(
                f"--nameservers entry {server!r} is not an IP address",
                hint=f"pass addresses inside --cidr {cidr}, e.g. --nameservers {gateway(cidr)}",
            ) from None
        if address not in served:
            raise MachineryError(
                f"--nameservers entry {server} is outside the cluster's --cidr {served}: container nodes "
                "send only to the cluster's own hosts",
                hint=f"leave --nameservers out (the gateway {gateway(cidr)} answers the nodes' names) or "
                f"pass a DNS server you run inside {served}",
            )


def dnsmasq_arguments(
    state_dir: Path,
    bridge: str,
    cidr: str,
    reservations: Sequence[tuple[str, str, str]],
    nameservers: Sequence[str],
    mtu: int,
    *,
    label: str = "dnsmasq",
    router: bool = True,
) -> list[str]:
    """dnsmasq's arguments: DHCP on the bridge only, one reservation (MAC, address, hostname) per
    node and no pool; DNS on the gateway answering the nodes' hostnames alone (``--local=/#/``: every
    other name is NXDOMAIN, ``--no-resolv``: no upstream at all); ``nameservers`` are handed out
    as the DNS servers.

    ``label`` names its lease file (one instance per bridge); without ``router`` it hands out no
    default route and no DNS server and serves no DNS: the extra network of a multihomed cluster."""
    served = network(cidr)
    dns = ["--port=53", "--local=/#/", "--no-poll", "--log-queries"] if router else ["--port=0"]
    command = [
        "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts", *dns,
        f"--interface={bridge}", "--bind-interfaces", "--except-interface=lo", "--user=root", "--group=root",
        "--log-facility=-", "--log-dhcp", "--pid-file=", f"--dhcp-leasefile={state_dir / f'{label}.leases'}",
        f"--dhcp-range={served.network_address},static,{served.netmask},1h", f"--dhcp-option=option:mtu,{mtu}",
    ]  # fmt: skip
    # An option given without a value is one dnsmasq does not send (it would offer itself as router).
    command.append(
        f"--dhcp-option=option:router,{gateway(cidr)}" if router else "--dhcp-option=option:router"
    )
    ipv4 = [n for n in nameservers if ipaddress.ip_address(n).version == 4]
    if not router:
        command.append("--dhcp-option=option:dns-server")
    elif ipv4:
        command.append(f"--dhcp-option=option:dns-server,{','.join(ipv4)}")
    command += [f"--dhcp-host={mac},{address},{hostname}" for mac, address, hostname in reservations]
    if router:
        command += [f"--host-record={hostname},{address}" for _, address, hostname in reservations]
    return command


def start_dhcp(state_dir: Path, bridge: str, arguments: Sequence[str], *, label: str = "dnsmasq") -> int:
    """dnsmasq with ``arguments`` (:func:`dnsmasq_arguments`) on the bridge, marked as the cluster's
    process, logging to ``<label>.log``. Returns its PID."""
    binary = shutil.which("dnsmasq")
    if binary is None:
        raise MachineryError(
            "dnsmasq (the container cluster's DHCP server) is not installed", hint=DNSMASQ_HINT
        )
    command = [binary, *arguments]
    log = state_dir / f"{label}.log"
    child = proc.start(command, output=log, env=tags(state_dir), hint=DNSMASQ_HINT)
    wait_until_logged(
        child, log, "DHCP, ", f"dnsmasq (the cluster's DHCP and DNS server) did not start on {bridge}",
        hint=f"see {log}; is another DHCP or DNS server bound to {bridge}?",
    )  # fmt: skip
    return child.pid


def firewall_table(bridge: str) -> str:
    """The name of the cluster's own nftables table in the root namespace (family ``inet``)."""
    return f"ichor-{bridge}"


def firewall_ruleset(bridge: str) -> str:
    """nft text for :func:`firewall_table`: the host forwards nothing from or to the bridge. Frames
    between two ports of the bridge (node to node) may pass the forward hook too (br_netfilter), so
    bridge-to-bridge is accepted; traffic to and from the gateway itself never reaches this hook."""
    return (
        f"table inet {firewall_table(bridge)} {{\n"
        "  chain forward {\n"
        "    type filter hook forward priority filter - 10; policy accept;\n"
        f'    iifname "{bridge}" oifname "{bridge}" accept\n'
        f'    iifname "{bridge}" drop\n'
        f'    oifname "{bridge}" drop\n'
        "  }\n"
        "}\n"
    )


def _nft(*args: str, text: str | None = None, check: bool = True) -> proc.Completed:
    binary = shutil.which("nft")
    if binary is None:
        raise MachineryError("nft (nftables) is not installed", hint=NFT_HINT)
    return proc.run([binary, *args], input=text, timeout=15, check=check)


def install_firewall(bridge: str) -> None:
    _nft("-f", "-", text=firewall_ruleset(bridge))


def has_firewall(table: str) -> bool:
    return _nft("list", "table", "inet", table, check=False).exit_code == 0


def remove_firewall(table: str) -> bool:
    """Delete the cluster's table; False when there was none."""
    if not has_firewall(table):
        return False
    _nft("delete", "table", "inet", table)
    return True


def wait_until_logged(
    child: proc.Background, log: Path, marker: str, failure: str, *, hint: str, since: int = 0
) -> None:
    """Until the server started as ``child`` writes ``marker`` to ``log`` (after its first ``since``
    bytes: what an earlier run wrote); if it exits or takes over :data:`DHCP_TIMEOUT`, stop it and
    raise ``failure`` with the log's tail."""
    deadline = time.monotonic() + DHCP_TIMEOUT
    while marker.encode() not in (log.read_bytes()[since:] if log.exists() else b""):
        if child.poll() is not None or time.monotonic() > deadline:
            child.stop(timeout=2)
            tail = log.read_text().strip()[-400:] if log.exists() else "no output"
            raise MachineryError(f"{failure}: {tail}", hint=hint)
        time.sleep(0.05)


def start_ntp(state_dir: Path, cidr: str) -> int:
    """chronyd serving NTP on the bridge's gateway address to the cluster's CIDR, the time server
    container nodes query (they never set the clock: it is the host's). ``-x``: chronyd never
    touches the host's clock either; it serves its own (``local stratum 8``). Marked as the
    cluster's process. Returns its PID."""
    binary = shutil.which("chronyd")
    if binary is None:
        raise MachineryError(
            "chronyd (the container cluster's time server) is not installed", hint=CHRONY_HINT
        )
    conf = state_dir / "chrony.conf"
    conf.write_text(
        f"bindaddress {gateway(cidr)}\nallow {network(cidr)}\nlocal stratum 8\ncmdport 0\n"
        f"bindcmdaddress /\npidfile {state_dir / 'chronyd.pid'}\ndriftfile {state_dir / 'chrony.drift'}\n"
    )
    log = state_dir / "chronyd.log"
    child = proc.start([binary, "-d", "-x", "-u", "root", "-f", str(conf)], output=log, env=tags(state_dir),
                       hint=CHRONY_HINT)  # fmt: skip
    wait_until_logged(
        child, log, "Disabled control of system clock",
        f"chronyd (the cluster's time server) did not start on {gateway(cidr)}", hint=f"see {log}",
    )  # fmt: skip
    return child.pid
