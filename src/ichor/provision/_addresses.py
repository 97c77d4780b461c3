"""A cluster's addresses: taken from ``--cidr``, and checked free before anything starts."""

from __future__ import annotations

import errno
import ipaddress
import itertools
import socket
from pathlib import Path

from ichor.machinery.constants import APID_PORT, TRUSTD_PORT
from ichor.machinery.errors import MachineryError
from ichor.provision._record import ClusterRecord, cluster_flags

DISCOVERY_PORT = 3000
ETCD_PORTS = (2379, 2380)


def _network(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        raise MachineryError(f"invalid CIDR {cidr!r}", hint="pass --cidr like 127.5.0.0/24") from None


def discovery_address(cidr: str) -> str:
    """The CIDR's first address, where the cluster's own discovery service listens."""
    return str(next(_network(cidr).hosts()))


def allocate_addresses(cidr: str, count: int) -> list[str]:
    """Node addresses from the CIDR: .2 onwards (as Talos leaves .1 to the gateway)."""
    network = _network(cidr)
    if not network.is_loopback:
        raise MachineryError(
            f"--cidr {cidr} is not a loopback range",
            hint="process nodes each own a loopback address: use a 127.0.0.0/8 range such as 127.5.0.0/24",
        )
    hosts = list(itertools.islice(network.hosts(), 1, count + 1))
    if len(hosts) < count:
        raise MachineryError(
            f"--cidr {cidr} has room for {len(hosts)} nodes, {count} asked", hint="use a larger CIDR"
        )
    return [str(h) for h in hosts]


def check_free(cidr: str, controlplanes: list[str], workers: list[str], state: Path) -> None:
    """Refuse, before anything starts, an address another process (another cluster) listens on."""
    wanted = [(discovery_address(cidr), DISCOVERY_PORT, "discovery service")]
    for address in [*controlplanes, *workers]:
        wanted += [(address, APID_PORT, "apid"), (address, TRUSTD_PORT, "trustd")]
    wanted += [(address, port, "etcd") for address in controlplanes for port in ETCD_PORTS]
    for address, port, what in wanted:
        with socket.socket() as probe:
            # As servers bind: a socket left in TIME_WAIT is no conflict, a listener is.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((address, port))
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                raise MachineryError(
                    f"{address}:{port}, the cluster's {what} address, is already in use",
                    hint=_conflict_hint(cidr, state),
                ) from None


def _conflict_hint(cidr: str, state: Path) -> str:
    network = _network(cidr)
    following = ipaddress.ip_network(
        (int(network.network_address) + network.num_addresses, network.prefixlen)
    )
    if not following.is_loopback:
        following = ipaddress.ip_network("127.5.0.0/24")
    free = f"pick a free range with --cidr, e.g. {following}"
    for path in sorted(state.expanduser().glob("*/cluster.yaml")):
        try:
            other = ClusterRecord.load(state, path.parent.name)
            overlaps = _network(other.cidr).overlaps(network)
        except MachineryError:
            continue
        if overlaps:
            return (
                f"cluster {other.name!r} uses --cidr {other.cidr}: {free}, "
                f"or destroy it with `talosctl cluster destroy {cluster_flags(state, other.name)}`"
            )
    return f"another cluster or program listens there: {free}"
