"""controllers/network firewall: NetworkDefaultActionConfig + NetworkRuleConfig -> NfTablesChain -> nft JSON."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from controller_helpers import apply, run, running

from ichor.machined.controllers import network
from ichor.machined.controllers.network.firewall import (
    FirewallConfigError,
    firewall_chains,
    nftables_chain_config_controller,
    port_ranges,
)
from ichor.machined.controllers.network.nftables import (
    NfTablesChainController,
    removal_commands,
    rule_exprs,
    ruleset_commands,
)
from ichor.machined.cosi import WAIT_STATUSES, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources.nftables import NFTABLES_CHAINS, PortRange
from ichor.machinery import proc
from ichor.machinery.config import load_config

V1 = "version: v1alpha1\nmachine:\n  type: worker\ncluster: {}\n"
BLOCK = "---\napiVersion: v1alpha1\nkind: NetworkDefaultActionConfig\ningress: block\n"


def _rule(name: str, ports: str, ingress: str, protocol: str = "tcp") -> str:
    return (
        f"---\napiVersion: v1alpha1\nkind: NetworkRuleConfig\nname: {name}\n"
        f"portSelector:\n  ports: {ports}\n  protocol: {protocol}\ningress:\n{ingress}"
    )


APID = _rule("apid", "[50000]", "  - subnet: 10.5.0.0/24\n    except: 10.5.0.128/25\n  - subnet: fd00::/8\n")


def _chains(text: str) -> dict[str, Any]:
    container = load_config(text)
    v1 = container.v1alpha1
    return firewall_chains(container, v1.model if v1 is not None else None)  # type: ignore[arg-type]


def _ingress_rules(text: str) -> list[list[dict[str, Any]]]:
    doc = ruleset_commands(_chains(text))
    return [c["add"]["rule"]["expr"] for c in doc["nftables"] if "rule" in c.get("add", {})]


def _saddr(family: str, op: str, *prefixes: tuple[str, int]) -> dict[str, Any]:
    right = {"set": [{"prefix": {"addr": a, "len": n}} for a, n in prefixes]}
    return {"match": {"op": op, "left": {"payload": {"protocol": family, "field": "saddr"}}, "right": right}}


TCP = {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": 6}}
DPORT_50000 = {"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": {"set": [50000]}}}  # fmt: skip


def test_no_firewall_documents_means_no_chain() -> None:
    assert _chains(V1) == {}
    assert (
        _chains(V1 + "---\napiVersion: v1alpha1\nkind: NetworkDefaultActionConfig\ningress: accept\n") == {}
    )


def test_block_with_a_rule_is_talos_ingress_chain_and_the_rule_accepts_its_subnets_per_family() -> None:
    chains = _chains(V1 + BLOCK + APID)
    chain = chains["ingress"]
    assert (chain.type, chain.hook, chain.priority, chain.policy) == ("filter", "input", -140, "drop")
    rules = _ingress_rules(V1 + BLOCK + APID)
    assert rules[0][0]["match"]["right"] == {"set": ["lo", "siderolink", "kubespan"]}
    assert rules[1][0] == {
        "match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}
    }
    assert rules[2][0]["match"]["right"] == ["invalid"] and rules[2][-1] == {"drop": None}
    # pod/service subnets (the defaults of cluster.network) talk to each other
    assert rules[5][0] == _saddr("ip", "==", ("10.244.0.0", 16), ("10.96.0.0", 12))
    # the rule: one nft rule per family; except becomes saddr != inside the IPv4 one
    assert rules[-2] == [_saddr("ip", "==", ("10.5.0.0", 24)), _saddr("ip", "!=", ("10.5.0.128", 25)),
                         TCP, DPORT_50000, {"counter": None}, {"accept": None}]  # fmt: skip
    assert rules[-1] == [
        _saddr("ip6", "==", ("fd00::", 8)),
        TCP,
        DPORT_50000,
        {"counter": None},
        {"accept": None},
    ]


def test_accept_default_drops_the_ports_from_every_source_outside_the_rule() -> None:
    rules = _ingress_rules(V1 + APID)
    assert _chains(V1 + APID)["ingress"].policy == "accept"
    assert len(rules) == 1 + 3  # trusted links; ip not in include, ip in except, ip6 not in include
    assert rules[1] == [
        _saddr("ip", "!=", ("10.5.0.0", 24)),
        TCP,
        DPORT_50000,
        {"counter": None},
        {"drop": None},
    ]
    assert rules[2][0] == _saddr("ip", "==", ("10.5.0.128", 25)) and rules[2][-1] == {"drop": None}
    assert rules[3][0] == _saddr("ip6", "!=", ("fd00::", 8))


def test_port_ranges_are_sorted_and_single_ports_are_ranges_of_one() -> None:
    assert port_ranges("r", ["8000-8080", 22]) == (PortRange(lo=22, hi=22), PortRange(lo=8000, hi=8080))
    rule = _chains(V1 + BLOCK + _rule("r", "[8000-8080, 22]", "  - subnet: 10.0.0.0/8\n"))["ingress"].rules[
        -1
    ]
    dport = rule_exprs(rule)[0][2]["match"]["right"]
    assert dport == {"set": [22, {"range": [8000, 8080]}]}


@pytest.mark.parametrize(
    ("ports", "ingress", "key"),
    [
        (
            '["90-80"]',
            "  - subnet: 10.0.0.0/8\n",
            "NetworkRuleConfig/bad: portSelector.ports[0]: port range '90-80' is inverted",
        ),
        (
            "[80, 70000]",
            "  - subnet: 10.0.0.0/8\n",
            "NetworkRuleConfig/bad: portSelector.ports[1]: '70000' is beyond",
        ),
        ('["http"]', "  - subnet: 10.0.0.0/8\n", "portSelector.ports[0]: 'http' is not a port"),
        ('["80-90", 85]', "  - subnet: 10.0.0.0/8\n", "portSelector.ports: 85-85 overlaps 80-90"),
        (
            "[80]",
            "  - subnet: 10.0.0.0/33\n",
            "NetworkRuleConfig/bad: ingress[0].subnet: '10.0.0.0/33' is not a subnet",
        ),
        ("[80]", "  - subnet: 10.0.0.1\n", "ingress[0].subnet: '10.0.0.1' is not a subnet"),
        (
            "[80]",
            "  - subnet: 10.0.0.0/8\n    except: nope\n",
            "NetworkRuleConfig/bad: ingress[0].except: 'nope'",
        ),
    ],
)
def test_bad_rule_input_is_an_error_naming_the_key(ports: str, ingress: str, key: str) -> None:
    container = load_config(V1 + BLOCK + _rule("bad", ports, ingress))  # decoding does not validate
    with pytest.raises(FirewallConfigError) as err:
        firewall_chains(container, None)
    assert key in str(err.value)
    assert err.value.hint


def test_the_controller_publishes_the_chain_and_drops_it_when_the_documents_go(tmp_path: Path) -> None:
    async def main() -> None:
        async with running(nftables_chain_config_controller()) as state:
            apply(state, V1 + BLOCK + APID)
            await assert_resource(state, NFTABLES_CHAINS, "ingress", lambda r: r.spec.policy == "drop")
            apply(state, V1 + BLOCK + _rule("bad", '["90-80"]', "  - subnet: 10.0.0.0/8\n"))
            await assert_resource(state, WAIT_STATUSES, "network.NfTablesChainConfigController",
                                  lambda r: "ports[0]" in r.spec.reason)  # fmt: skip
            # the chain stays as it was while the config cannot be built
            await assert_resource(state, NFTABLES_CHAINS, "ingress", lambda r: len(r.spec.rules) == 7)
            apply(state, V1)
            await assert_no_resource(state, NFTABLES_CHAINS, "ingress")

    run(main)


def test_the_spec_controller_replaces_the_whole_table_and_removes_it_when_the_chains_go(
    tmp_path: Path,
) -> None:
    sent: list[Mapping[str, Any]] = []

    async def record(document: Mapping[str, Any]) -> None:
        sent.append(document)

    async def main() -> None:
        async with running(nftables_chain_config_controller(), NfTablesChainController(record)) as state:
            await _until(lambda: sent)
            assert sent[-1] == removal_commands()  # first pass: a previous boot's table goes
            apply(state, V1 + BLOCK + APID)
            await _until(lambda: len(sent) >= 2)
            assert sent[-1] == ruleset_commands(_chains(V1 + BLOCK + APID))
            add, delete, readd = sent[-1]["nftables"][:3]  # type: ignore[index]
            assert (add, delete, readd) == ({"add": {"table": {"family": "inet", "name": "talos"}}},
                                            {"delete": {"table": {"family": "inet", "name": "talos"}}}, add)  # fmt: skip
            apply(state, V1)
            await _until(lambda: len(sent) >= 3)
            assert sent[-1] == removal_commands()

    run(main)


async def _until(check: Any) -> None:
    while not check():
        await asyncio.sleep(0.01)


def test_process_nodes_and_fake_kernels_never_get_the_nft_controller(tmp_path: Path) -> None:
    from network_helpers import FakeNetlink

    def names(layout: Layout, netlink: Any = None) -> set[str]:
        return {c.name for c in network.network_controllers(layout, netlink)}

    assert "network.NfTablesChainController" not in names(Layout(root=tmp_path, address="127.0.0.2"))
    own = Layout(root=tmp_path, address="10.5.0.2", own_netns=True)
    assert "network.NfTablesChainController" not in names(own, FakeNetlink())
    assert "network.NfTablesChainController" in names(own)
    assert "network.NfTablesChainConfigController" in names(own, FakeNetlink())


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("nft", path=os.environ.get("PATH", "") + ":/usr/sbin") is None,
                    reason="needs root, unshare and nft (run.sh installs nftables)")  # fmt: skip
def test_nft_accepts_the_json_in_a_throwaway_network_namespace() -> None:
    document = ruleset_commands(
        _chains(V1 + BLOCK + APID + _rule("dns", "[53]", "  - subnet: 0.0.0.0/0\n", "udp"))
    )
    nft = shutil.which("nft", path=os.environ.get("PATH", "") + ":/usr/sbin")
    assert nft is not None
    script = f"{nft} -j -f - && {nft} -j -f /dev/fd/3 3<<'EOF'\n{json.dumps(removal_commands())}\nEOF\n"
    # A fresh namespace: nothing here can reach the host's nftables.
    listed = proc.run(["unshare", "--net", "sh", "-c", f"{nft} -j -f - && {nft} list ruleset"],
                      input=json.dumps(document), timeout=30).stdout  # fmt: skip
    assert "type filter hook input priority mangle + 10; policy drop;" in listed
    assert "ip saddr 10.5.0.0/24 ip saddr != 10.5.0.128/25 tcp dport 50000" in listed
    assert "ip6 saddr fd00::/8 tcp dport 50000" in listed
    assert "udp dport 53" in listed
    removed = proc.run(["unshare", "--net", "sh", "-c", script + f"{nft} list ruleset"],
                       input=json.dumps(document), timeout=30).stdout  # fmt: skip
    assert "talos" not in removed
