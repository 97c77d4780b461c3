"""``NetworkDefaultActionConfig`` + ``NetworkRuleConfig`` -> the ``ingress`` NfTablesChain.

``network.NfTablesChainConfigController`` builds Talos 1.7's ingress chain of table ``inet talos``
(``talosctl get chains``): a ``filter`` chain on hook ``input`` at priority -140 (mangle + 10)
whose policy is the default action (``accept``, or ``drop`` for ``ingress: block``), then

1. traffic from the trusted links (``lo``, ``siderolink``, ``kubespan``) is accepted;
2. with ``block``: established/related connections are accepted, invalid ones dropped, ICMP and
   ICMPv6 accepted (at most 5 packets a second), and traffic between the cluster's pod and service
   subnets (``cluster.network.podSubnets``/``serviceSubnets``) accepted;
3. one rule per ``NetworkRuleConfig``: its protocol and ports (``portSelector``) from its sources
   (``ingress[].subnet`` minus ``ingress[].except``) are accepted under ``block``; under
   ``accept`` the same ports from every other source are dropped.

No chain at all when the default action is ``accept`` and there are no rules (Talos's default).
A rule without ``ingress`` entries allows nobody. ICMP rules match the protocol only (ICMP has no
ports). A document the validator let through but that cannot be built (an inverted port range,
a subnet that is not one) keeps the chain as it was and says why (``talosctl get waits``).
"""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Iterable, Sequence

from ichor.machined.controllers.config import ACTIVE_CONFIG
from ichor.machined.cosi import ControllerContext, TransformController, WaitingFor
from ichor.machined.resources import ACTIVE_CONFIG_ID, MACHINE_CONFIGS
from ichor.machined.resources.nftables import (
    NFTABLES_CHAINS,
    NfTablesAddressMatch,
    NfTablesChainSpec,
    NfTablesConntrackStateMatch,
    NfTablesIfNameMatch,
    NfTablesLayer4Match,
    NfTablesLimitMatch,
    NfTablesPortMatch,
    NfTablesRule,
    PortRange,
)
from ichor.machinery.config import Config
from ichor.machinery.config._document import Container
from ichor.machinery.config._models import NetworkDefaultActionConfigV1Alpha1, NetworkRuleConfigV1Alpha1

__all__ = [
    "INGRESS_CHAIN",
    "INGRESS_PRIORITY",
    "TRUSTED_LINKS",
    "FirewallConfigError",
    "firewall_chains",
    "ingress_chain",
    "nftables_chain_config_controller",
    "port_ranges",
    "subnets",
]

INGRESS_CHAIN = "ingress"
INGRESS_PRIORITY = -140
"""Talos's ``ChainPriorityMangle + 10``."""
TRUSTED_LINKS = ("lo", "siderolink", "kubespan")
DEFAULT_POD_SUBNETS = ("10.244.0.0/16",)
DEFAULT_SERVICE_SUBNETS = ("10.96.0.0/12",)
_ICMP = ("icmp", "icmpv6")


class FirewallConfigError(Exception):
    """A firewall document that cannot become nftables rules; the message names the key."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def port_ranges(where: str, ports: Sequence[int | str] | None) -> tuple[PortRange, ...]:
    """``[80, "8000-8080"]`` -> sorted inclusive ranges; raises :class:`FirewallConfigError`."""
    if not ports:
        raise FirewallConfigError(
            f"{where}: portSelector.ports is empty",
            hint="list ports or ranges, e.g. `ports: [50000, 8000-8080]`",
        )
    ranges: list[PortRange] = []
    for i, port in enumerate(ports):
        key = f"{where}: portSelector.ports[{i}]"
        text = str(port).strip()
        lo_text, sep, hi_text = text.partition("-")
        if not lo_text.isdigit() or (sep and not hi_text.isdigit()):
            raise FirewallConfigError(
                f"{key}: {text!r} is not a port or a port range",
                hint="write a port (`50000`) or an inclusive range (`8000-8080`)",
            )
        lo, hi = int(lo_text), int(hi_text) if sep else int(lo_text)
        if lo > 65535 or hi > 65535:
            raise FirewallConfigError(f"{key}: {text!r} is beyond port 65535", hint="ports are 0-65535")
        if lo > hi:
            raise FirewallConfigError(
                f"{key}: port range {text!r} is inverted ({lo} > {hi})", hint=f"write it `{hi}-{lo}`"
            )
        ranges.append(PortRange(lo=lo, hi=hi))
    ranges.sort(key=lambda r: r.lo)
    for before, after in itertools.pairwise(ranges):
        if after.lo <= before.hi:
            raise FirewallConfigError(
                f"{where}: portSelector.ports: {after.lo}-{after.hi} overlaps {before.lo}-{before.hi}",
                hint="merge overlapping ports into one range",
            )
    return tuple(ranges)


def subnets(key: str, values: Iterable[str]) -> tuple[str, ...]:
    """CIDRs in their network form (``10.5.0.7/24`` -> ``10.5.0.0/24``); raises naming ``key``."""
    out: list[str] = []
    for value in values:
        text = str(value).strip()
        try:
            if "/" not in text:
                raise ValueError("no prefix length")
            out.append(str(ipaddress.ip_network(text, strict=False)))
        except ValueError as err:
            raise FirewallConfigError(
                f"{key}: {text!r} is not a subnet ({err})",
                hint="write a CIDR such as `10.5.0.0/24` or `fd00::/8` (a single host is `/32` or `/128`)",
            ) from None
    return tuple(out)


def _rule_chain_rule(doc: NetworkRuleConfigV1Alpha1, block: bool) -> NfTablesRule | None:
    where = f"NetworkRuleConfig/{doc.name or '?'}"
    selector = doc.port_selector
    protocol = selector.protocol if selector is not None else None
    if protocol is None:
        raise FirewallConfigError(
            f"{where}: portSelector.protocol is missing", hint="set `protocol: tcp` (or udp, icmp, icmpv6)"
        )
    ports = (
        None
        if protocol in _ICMP
        else NfTablesPortMatch(ranges=port_ranges(where, selector.ports if selector else None))
    )
    include: list[str] = []
    exclude: list[str] = []
    for i, ingress in enumerate(doc.ingress or []):
        if not ingress.subnet:
            raise FirewallConfigError(
                f"{where}: ingress[{i}].subnet is missing", hint="set `subnet: 10.5.0.0/24`"
            )
        include += subnets(f"{where}: ingress[{i}].subnet", [ingress.subnet])
        if ingress.except_:
            exclude += subnets(f"{where}: ingress[{i}].except", [ingress.except_])
    if block and not include:
        return None  # allows nobody: the policy drops it anyway
    return NfTablesRule(
        match_source_address=NfTablesAddressMatch(
            include_subnets=tuple(include), exclude_subnets=tuple(exclude), invert=not block
        ),
        match_layer4=NfTablesLayer4Match(protocol=protocol, match_destination_port=ports),
        anon_counter=True,
        verdict="accept" if block else "drop",
    )


def ingress_chain(
    default_action: str, rules: Iterable[NetworkRuleConfigV1Alpha1], cluster_subnets: Sequence[str] = ()
) -> NfTablesChainSpec:
    """The ingress chain for a default action (``accept``/``block``) and the rule documents."""
    if default_action not in ("accept", "block"):
        raise FirewallConfigError(
            f"NetworkDefaultActionConfig: ingress: {default_action!r} is not an action",
            hint="set `ingress: accept` or `ingress: block`",
        )
    block = default_action == "block"
    out = [
        NfTablesRule(
            match_i_if_name=NfTablesIfNameMatch(interface_names=TRUSTED_LINKS),
            anon_counter=True,
            verdict="accept",
        )
    ]
    if block:
        out += [
            NfTablesRule(match_conntrack_state=NfTablesConntrackStateMatch(states=("established", "related")), anon_counter=True, verdict="accept"),
            NfTablesRule(match_conntrack_state=NfTablesConntrackStateMatch(states=("invalid",)), anon_counter=True, verdict="drop"),
            *(
                NfTablesRule(match_layer4=NfTablesLayer4Match(protocol=p), match_limit=NfTablesLimitMatch(packet_rate_per_second=5), anon_counter=True, verdict="accept")
                for p in _ICMP
            ),
        ]  # fmt: skip
        if cluster_subnets:
            match = NfTablesAddressMatch(include_subnets=tuple(cluster_subnets))
            out.append(
                NfTablesRule(
                    match_source_address=match,
                    match_destination_address=match,
                    anon_counter=True,
                    verdict="accept",
                )
            )
    for doc in rules:
        rule = _rule_chain_rule(doc, block)
        if rule is not None:
            out.append(rule)
    return NfTablesChainSpec(
        type="filter",
        hook="input",
        priority=INGRESS_PRIORITY,
        policy="drop" if block else "accept",
        rules=tuple(out),
    )


def _cluster_subnets(config: Config | None) -> tuple[str, ...]:
    network = config.cluster.network if config is not None and config.cluster is not None else None
    pods = (network.pod_subnets if network is not None else None) or DEFAULT_POD_SUBNETS
    services = (network.service_subnets if network is not None else None) or DEFAULT_SERVICE_SUBNETS
    return subnets("cluster.network.podSubnets/serviceSubnets", [*pods, *services])


def firewall_chains(container: Container, config: Config | None) -> dict[str, NfTablesChainSpec]:
    """The chains of a machine config's documents: ``{}`` or ``{"ingress": ...}``."""
    action = "accept"
    rules: list[NetworkRuleConfigV1Alpha1] = []
    for doc in container:
        model = doc.model
        if isinstance(model, NetworkDefaultActionConfigV1Alpha1):
            action = model.ingress or "accept"
        elif isinstance(model, NetworkRuleConfigV1Alpha1):
            rules.append(model)
    if action == "accept" and not rules:
        return {}
    cluster = _cluster_subnets(config) if config is not None and config.cluster is not None else ()
    return {INGRESS_CHAIN: ingress_chain(action, rules, cluster)}


def _derive(ctx: ControllerContext) -> dict[str, NfTablesChainSpec]:
    resource = ctx.get_or_none(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
    if resource is None:
        return {}
    try:
        return firewall_chains(resource.spec.parsed, resource.spec.v1alpha1)
    except FirewallConfigError as err:
        raise WaitingFor("a firewall config that builds", f"{err} ({err.hint})") from None


def nftables_chain_config_controller() -> TransformController[NfTablesChainSpec]:
    return TransformController(
        "network.NfTablesChainConfigController",
        inputs=[ACTIVE_CONFIG],
        output=NFTABLES_CHAINS,
        map_inputs=_derive,
    )
