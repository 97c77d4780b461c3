"""``NfTablesChains.net.talos.dev``: one nftables chain of the node's ``inet talos`` table.

Talos 1.7's resource (aliases ``chain``/``chains``, columns Type, Hook, Priority, Policy), with
the subset of its rule matches the ingress firewall uses. YAML keys and enum values are Talos's
(``matchIIfName``, ``matchConntrackState``, ``anonymousCounter``, ``filter``/``input``/``drop``).
Subnets are strings (``10.5.0.0/24``), as Go's ``netip.Prefix`` marshals them.
"""

from __future__ import annotations

import dataclasses

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = [
    "NFTABLES_CHAINS",
    "NfTablesAddressMatch",
    "NfTablesChainSpec",
    "NfTablesConntrackStateMatch",
    "NfTablesIfNameMatch",
    "NfTablesLayer4Match",
    "NfTablesLimitMatch",
    "NfTablesPortMatch",
    "NfTablesRule",
    "PortRange",
]

_OMIT = {"omitempty": True}


def _omit(yaml: str | None = None) -> dict[str, object]:
    return {**_OMIT, "yaml": yaml} if yaml else dict(_OMIT)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NfTablesIfNameMatch:
    interface_names: tuple[str, ...] = dataclasses.field(default=(), metadata={"yaml": "interfaceName"})
    operator: str = "=="
    """``==`` or ``!=`` (Talos's ``MatchOperator`` text)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class NfTablesConntrackStateMatch:
    states: tuple[str, ...] = ()
    """``new``, ``established``, ``related``, ``invalid``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class NfTablesAddressMatch:
    include_subnets: tuple[str, ...] = dataclasses.field(default=(), metadata=_omit())
    exclude_subnets: tuple[str, ...] = dataclasses.field(default=(), metadata=_omit())
    invert: bool = dataclasses.field(default=False, metadata=_omit())
    """Match the packets whose address is NOT in (include minus exclude)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PortRange:
    lo: int
    hi: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class NfTablesPortMatch:
    ranges: tuple[PortRange, ...] = dataclasses.field(default=(), metadata=_omit())


@dataclasses.dataclass(frozen=True, kw_only=True)
class NfTablesLayer4Match:
    protocol: str
    """``tcp``, ``udp``, ``icmp``, ``icmpv6``."""
    match_source_port: NfTablesPortMatch | None = dataclasses.field(default=None, metadata=_omit())
    match_destination_port: NfTablesPortMatch | None = dataclasses.field(default=None, metadata=_omit())


@dataclasses.dataclass(frozen=True, kw_only=True)
class NfTablesLimitMatch:
    packet_rate_per_second: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class NfTablesRule:
    """Every match given must hold; then the counter counts and the verdict (if any) is taken."""

    match_i_if_name: NfTablesIfNameMatch | None = dataclasses.field(
        default=None, metadata=_omit("matchIIfName")
    )
    match_conntrack_state: NfTablesConntrackStateMatch | None = dataclasses.field(
        default=None, metadata=_omit()
    )
    match_source_address: NfTablesAddressMatch | None = dataclasses.field(default=None, metadata=_omit())
    match_destination_address: NfTablesAddressMatch | None = dataclasses.field(default=None, metadata=_omit())
    match_layer4: NfTablesLayer4Match | None = dataclasses.field(default=None, metadata=_omit("matchLayer4"))
    match_limit: NfTablesLimitMatch | None = dataclasses.field(default=None, metadata=_omit())
    anon_counter: bool = dataclasses.field(default=False, metadata=_omit("anonymousCounter"))
    verdict: str | None = dataclasses.field(default=None, metadata=_omit())
    """``accept`` or ``drop``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class NfTablesChainSpec:
    type: str = "filter"
    hook: str = "input"
    priority: int = 0
    policy: str = "accept"
    rules: tuple[NfTablesRule, ...] = ()


NFTABLES_CHAINS: ResourceType[NfTablesChainSpec] = ResourceType(
    type="NfTablesChains.net.talos.dev",
    default_namespace="network",
    spec_class=NfTablesChainSpec,
    aliases=("chain", "chains"),
    print_columns=(
        PrintColumn("Type", "{.type}"),
        PrintColumn("Hook", "{.hook}"),
        PrintColumn("Priority", "{.priority}"),
        PrintColumn("Policy", "{.policy}"),
    ),
)
