"""NfTablesChains -> table ``inet talos`` in the node's kernel, with ``nft -j -f -``.

``network.NfTablesChainController`` writes the whole table in one nftables transaction (libnftables
JSON: add the table, delete it, add it again with every chain and rule), so a packet sees the old
rules or the new ones, never a half. With no chains it deletes the table (add + delete, so a table
that is not there is no error); it does that on its first pass too, so a table left by a previous
boot of machined in the same namespace goes when the config no longer asks for it.

Registered only on a node with a network namespace of its own (``Layout.own_netns``): a process
node shares the host's network, whose nftables Ichor must never touch.

:func:`rule_exprs` compiles one :class:`NfTablesRule` into nft JSON expressions. Address matches
are per family (``ip saddr``/``ip6 saddr``), so a rule whose subnets mix IPv4 and IPv6 becomes one
nft rule per family; an inverted match (``invert``: NOT in include minus exclude) becomes a rule
for "not in include" and one for "in exclude" per family, and covers a family with no include
subnets entirely.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import json
import os
import shutil
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ichor.machined.cosi import Controller, ControllerContext, Input, Phase
from ichor.machined.resources.nftables import (
    NFTABLES_CHAINS,
    NfTablesAddressMatch,
    NfTablesChainSpec,
    NfTablesPortMatch,
    NfTablesRule,
)
from ichor.machinery import proc
from ichor.machinery.errors import ProcessError

__all__ = [
    "TABLE",
    "NfTablesChainController",
    "nft_apply",
    "removal_commands",
    "rule_exprs",
    "ruleset_commands",
]

TABLE = {"family": "inet", "name": "talos"}
RETRY_AFTER = 5.0
_L4PROTO = {"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58}
_FAMILIES = (("ip", 4), ("ip6", 6))
_IFNAME_OP = {"==": "==", "!=": "!="}

Expr = dict[str, Any]
Alternative = tuple[str | None, list[Expr]]
"""One way a match can hold: the address family it pins (``ip``/``ip6``, None: any) and its exprs."""


def _match(left: Expr, right: Any, op: str = "==") -> Expr:
    return {"match": {"op": op, "left": left, "right": right}}


def _prefix_set(prefixes: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> Expr:
    return {"set": [{"prefix": {"addr": str(p.network_address), "len": p.prefixlen}} for p in prefixes]}


def _address_alternatives(match: NfTablesAddressMatch, field: str) -> list[Alternative]:
    include = [ipaddress.ip_network(s, strict=False) for s in match.include_subnets]
    exclude = [ipaddress.ip_network(s, strict=False) for s in match.exclude_subnets]
    out: list[Alternative] = []
    for family, version in _FAMILIES:
        left = {"payload": {"protocol": family, "field": field}}
        inc = [p for p in include if p.version == version]
        exc = [p for p in exclude if p.version == version]
        if match.invert:
            if inc:
                out.append((family, [_match(left, _prefix_set(inc), "!=")]))
            else:
                out.append(
                    (family, [_match({"meta": {"key": "nfproto"}}, "ipv4" if version == 4 else "ipv6")])
                )
            if exc and inc:
                out.append((family, [_match(left, _prefix_set(exc))]))
        elif inc:
            exprs = [_match(left, _prefix_set(inc))]
            if exc:
                exprs.append(_match(left, _prefix_set(exc), "!="))
            out.append((family, exprs))
    return out


def _ports(match: NfTablesPortMatch) -> Expr:
    items: list[Any] = [r.lo if r.lo == r.hi else {"range": [r.lo, r.hi]} for r in match.ranges]
    return {"set": items}


def rule_exprs(rule: NfTablesRule) -> list[list[Expr]]:
    """The nft JSON expression lists of one rule (one per address family it expands into)."""
    head: list[Expr] = []
    if rule.match_i_if_name is not None:
        op = _IFNAME_OP[rule.match_i_if_name.operator]
        head.append(
            _match({"meta": {"key": "iifname"}}, {"set": list(rule.match_i_if_name.interface_names)}, op)
        )
    if rule.match_conntrack_state is not None:
        head.append(_match({"ct": {"key": "state"}}, list(rule.match_conntrack_state.states), "in"))
    tail: list[Expr] = []
    if rule.match_layer4 is not None:
        l4 = rule.match_layer4
        tail.append(_match({"meta": {"key": "l4proto"}}, _L4PROTO[l4.protocol]))
        for field, ports in (("sport", l4.match_source_port), ("dport", l4.match_destination_port)):
            if ports is not None and ports.ranges:
                tail.append(_match({"payload": {"protocol": l4.protocol, "field": field}}, _ports(ports)))
    if rule.match_limit is not None:
        tail.append({"limit": {"rate": rule.match_limit.packet_rate_per_second, "per": "second"}})
    if rule.anon_counter:
        tail.append({"counter": None})
    if rule.verdict is not None:
        tail.append({rule.verdict: None})
    sources: list[Alternative] = [(None, [])]
    destinations: list[Alternative] = [(None, [])]
    if rule.match_source_address is not None:
        sources = _address_alternatives(rule.match_source_address, "saddr")
    if rule.match_destination_address is not None:
        destinations = _address_alternatives(rule.match_destination_address, "daddr")
    out: list[list[Expr]] = []
    for (src_family, src), (dst_family, dst) in itertools.product(sources, destinations):
        if src_family and dst_family and src_family != dst_family:
            continue  # an IPv4 source never comes with an IPv6 destination
        out.append([*head, *src, *dst, *tail])
    return out


def ruleset_commands(chains: Mapping[str, NfTablesChainSpec]) -> dict[str, Any]:
    """One transaction replacing table ``inet talos`` with ``chains`` (nft's JSON schema)."""
    commands: list[Expr] = [{"add": {"table": dict(TABLE)}}, {"delete": {"table": dict(TABLE)}}]
    commands.append({"add": {"table": dict(TABLE)}})
    for name in sorted(chains):
        spec = chains[name]
        chain = {"family": TABLE["family"], "table": TABLE["name"], "name": name, "type": spec.type,
                 "hook": spec.hook, "prio": spec.priority, "policy": spec.policy}  # fmt: skip
        commands.append({"add": {"chain": chain}})
        for rule in spec.rules:
            for exprs in rule_exprs(rule):
                rule_json = {"family": TABLE["family"], "table": TABLE["name"], "chain": name, "expr": exprs}
                commands.append({"add": {"rule": rule_json}})
    return {"nftables": commands}


def removal_commands() -> dict[str, Any]:
    """One transaction deleting table ``inet talos`` (no error when it is not there)."""
    return {"nftables": [{"add": {"table": dict(TABLE)}}, {"delete": {"table": dict(TABLE)}}]}


def _nft_binary() -> str | None:
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin"
    return shutil.which("nft", path=path)


async def nft_apply(document: Mapping[str, Any]) -> None:
    """Run ``nft -j -f -`` with ``document`` in this process's network namespace."""
    nft = _nft_binary()
    if nft is None:
        raise ProcessError(
            "nft is not installed: the firewall (NetworkRuleConfig) cannot be applied",
            command=["nft"], exit_code=None, stderr_tail="",
            hint="install nftables on the host (`apt-get install nftables`; run.sh does it)",
        )  # fmt: skip
    text = json.dumps(document)
    await asyncio.to_thread(proc.run, [nft, "-j", "-f", "-"], input=text, timeout=30.0)


class NfTablesChainController(Controller):
    name = "network.NfTablesChainController"
    inputs = (Input(NFTABLES_CHAINS),)
    writes = "(the node's nftables table inet talos, with nft)"

    def __init__(self, apply: Callable[[Mapping[str, Any]], Awaitable[None]] = nft_apply) -> None:
        self._apply = apply
        self._applied: dict[str, NfTablesChainSpec] | None = None

    async def run(self, ctx: ControllerContext) -> None:
        retry_after: float | None = None
        while True:
            await ctx.changed(timeout=retry_after)
            wanted = {r.id: r.spec for r in ctx.list(NFTABLES_CHAINS) if r.metadata.phase is Phase.RUNNING}
            if wanted == self._applied:
                continue
            document = ruleset_commands(wanted) if wanted else removal_commands()
            try:
                await self._apply(document)
            except ProcessError as err:
                reason = f"{err}" + (f" ({err.hint})" if err.hint else "")
                ctx.logger.warning("nftables not applied", error=reason)
                ctx.waiting("the nftables table inet talos applied", reason, retry_after=RETRY_AFTER)
                retry_after = RETRY_AFTER
                continue
            self._applied = wanted
            retry_after = None
            ctx.clear_waiting()
            ctx.logger.info(
                "nftables chains updated", chains=",".join(sorted(wanted)) or "(none: table removed)"
            )
