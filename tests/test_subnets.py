"""The subnet picker shared by etcd's advertisedSubnets/listenSubnets and the kubelet's nodeIP.validSubnets."""

from __future__ import annotations

import re

import pytest

from ichor.machinery.subnets import SubnetError, filter_addresses, pick_advertised, pick_node_ips

NODE = ["10.5.0.2", "10.6.0.2", "fd00::2", "fd01::2"]
ADVERTISED = "cluster.etcd.advertisedSubnets"


def test_positive_subnets_pick_every_match_in_the_nodes_order() -> None:
    assert pick_advertised(NODE, ["10.6.0.0/24"], setting=ADVERTISED) == ["10.6.0.2"]
    assert pick_advertised(NODE, ["fd01::/64", "10.5.0.0/16"], setting=ADVERTISED) == ["10.5.0.2", "fd01::2"]
    # A bare address is a one-address subnet.
    assert pick_advertised(NODE, ["fd00::2"], setting=ADVERTISED) == ["fd00::2"]


def test_without_positive_subnet_the_first_address_left_wins() -> None:
    assert pick_advertised(NODE, [], setting=ADVERTISED) == ["10.5.0.2"]
    assert pick_advertised(NODE, ["!10.5.0.0/24"], setting=ADVERTISED) == ["10.6.0.2"]
    assert pick_advertised(NODE, ["!10.0.0.0/8"], setting=ADVERTISED) == ["fd00::2"]


def test_negative_subnets_remove_what_positives_picked() -> None:
    assert filter_addresses(NODE, ["10.0.0.0/8", "!10.5.0.0/24"]) == ["10.6.0.2"]
    assert filter_addresses(NODE, ["::/0", "!fd00::/64"]) == ["fd01::2"]
    assert filter_addresses(NODE, [" !10.5.0.2 ", "10.0.0.0/8"]) == ["10.6.0.2"]


def test_no_match_names_the_key_to_fix() -> None:
    with pytest.raises(
        SubnetError, match=r"no address of this node matches cluster.etcd.advertisedSubnets"
    ) as err:
        pick_advertised(NODE, ["192.168.0.0/16"], setting=ADVERTISED)
    assert "10.5.0.2, 10.6.0.2" in str(err.value)
    assert err.value.hint == "fix cluster.etcd.advertisedSubnets to include one of the node's addresses"
    with pytest.raises(SubnetError, match="advertisedSubnets"):
        pick_advertised(NODE, ["10.0.0.0/8", "!10.0.0.0/8", "!fd00::/7"], setting=ADVERTISED)
    with pytest.raises(SubnetError, match=r"nodeIP.validSubnets .* \(node addresses: none\)"):
        pick_node_ips([], ["0.0.0.0/0"])


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "!not-a-cidr", "", "10.5.0.0/24/1"])
def test_a_subnet_that_is_not_a_cidr_is_refused(bad: str) -> None:
    with pytest.raises(SubnetError, match="failed to parse subnet") as err:
        pick_advertised(NODE, [bad], setting=ADVERTISED)
    assert ADVERTISED in (err.value.hint or "")


def test_a_node_address_that_is_not_an_ip_is_refused() -> None:
    with pytest.raises(SubnetError, match=re.escape("invalid node address '10.5.0.2/24'")):
        filter_addresses(["10.5.0.2/24"], [])


def test_kubelet_node_ip_is_the_first_match_per_family() -> None:
    assert pick_node_ips(NODE, ["10.6.0.0/24"]) == ["10.6.0.2"]
    assert pick_node_ips(NODE, ["0.0.0.0/0", "::/0"], families=(4, 6)) == ["10.5.0.2", "fd00::2"]
    assert pick_node_ips(NODE, ["::/0", "!fd00::/64"], families=(6,)) == ["fd01::2"]
    # Dual stack asked, only one family matches: that one.
    assert pick_node_ips(NODE, ["10.6.0.0/24"], families=(4, 6)) == ["10.6.0.2"]
    with pytest.raises(SubnetError, match=r"machine.kubelet.nodeIP.validSubnets \['fd00::/64'\]"):
        pick_node_ips(NODE, ["fd00::/64"], families=(4,))
