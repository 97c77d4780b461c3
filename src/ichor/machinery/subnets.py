"""Which of a node's addresses a subnet list picks: Talos's rule for ``cluster.etcd.advertisedSubnets``
/ ``listenSubnets`` and ``machine.kubelet.nodeIP.validSubnets``, in one place.

A subnet list holds CIDRs (a bare address is a one-address subnet) and ``!CIDR`` exclusions. An
address is picked when it lies in any positive entry (in every address, when there is none) and in
no exclusion; the node's order of addresses is kept. Exclusions filter what the positives picked,
which is why Talos's docs say to list them last; here their place does not matter.

* :func:`filter_addresses` - the addresses a list picks (possibly none);
* :func:`pick_advertised` - etcd's advertised addresses: every match of the positive subnets, or,
  without any, the node's first address that no exclusion removes;
* :func:`pick_node_ips` - the kubelet's node IP(s): the first match of each IP family asked for.

Both pickers raise :class:`SubnetError` naming the config key when nothing matches, so the
controller that calls them can publish a wait that says what to fix. Pure functions: no I/O.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

from ichor.machinery.errors import SubnetError

__all__ = ["SubnetError", "filter_addresses", "parse_subnet", "pick_advertised", "pick_node_ips"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_subnet(text: str, setting: str) -> Network:
    try:
        # A bare address is a one-address subnet, as Talos accepts it.
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise SubnetError(
            f"failed to parse subnet {text!r} in {setting}",
            hint=f"{setting} entries are CIDRs such as 10.0.0.0/8, or !CIDR to exclude a subnet",
        ) from None


def _parse_address(text: str, setting: str) -> Address:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise SubnetError(
            f"invalid node address {text!r}", hint=f"{setting} is matched against plain IP addresses"
        ) from None


def filter_addresses(
    addresses: Iterable[str], subnets: Iterable[str], *, setting: str = "subnets"
) -> list[str]:
    """The addresses inside any positive subnet (all, when there is none) and inside no ``!subnet``."""
    include: list[Network] = []
    exclude: list[Network] = []
    for entry in subnets:
        entry = entry.strip()
        if entry.startswith("!"):
            exclude.append(parse_subnet(entry[1:], setting))
        else:
            include.append(parse_subnet(entry, setting))
    picked: list[str] = []
    for text in addresses:
        ip = _parse_address(text, setting)
        if include and not any(ip in net for net in include):
            continue
        if not any(ip in net for net in exclude):
            picked.append(str(ip))
    return picked


def _no_match(setting: str, subnets: Sequence[str], addresses: Sequence[str]) -> SubnetError:
    return SubnetError(
        f"no address of this node matches {setting} {list(subnets)} (node addresses: "
        f"{', '.join(addresses) or 'none'})",
        hint=f"fix {setting} to include one of the node's addresses",
    )


def pick_advertised(addresses: Sequence[str], subnets: Sequence[str], *, setting: str) -> list[str]:
    """Every address the positive subnets pick; without a positive subnet, the first address no
    exclusion removes (Talos's etcd default)."""
    picked = filter_addresses(addresses, subnets, setting=setting)
    if not any(not s.strip().startswith("!") for s in subnets):
        picked = picked[:1]
    if not picked:
        raise _no_match(setting, subnets, addresses)
    return picked


def pick_node_ips(
    addresses: Sequence[str],
    subnets: Sequence[str],
    *,
    setting: str = "machine.kubelet.nodeIP.validSubnets",
    families: Sequence[int] = (4,),
) -> list[str]:
    """The first picked address of each IP family in ``families`` (4, 6 or both, as the cluster's
    pod CIDRs are), in that order; a family with no match is left out, all missing is an error."""
    picked = filter_addresses(addresses, subnets, setting=setting)
    chosen = [
        found
        for family in families
        for found in [next((a for a in picked if ipaddress.ip_address(a).version == family), None)]
        if found is not None
    ]
    if not chosen:
        raise _no_match(setting, subnets, addresses)
    return chosen
