"""controllers/network: config -> layered specs -> merged specs -> kernel (a fake) -> statuses."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from controller_helpers import apply, run, running
from network_helpers import FakeNetlink, ether

from ichor.machined.controllers import network
from ichor.machined.cosi import WAIT_STATUSES, Registry, assert_no_resource, assert_resource
from ichor.machined.netlink import NetlinkError, ProcessNodeView
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ADDRESS_SPECS,
    ADDRESS_STATUSES,
    HOSTNAME_SPECS,
    HOSTNAME_STATUSES,
    LINK_SPECS,
    LINK_STATUSES,
    NETWORK_CONFIG_NAMESPACE,
    NETWORK_STATUSES,
    NODE_ADDRESSES,
    OPERATOR_SPECS,
    RESOLVER_SPECS,
    RESOLVER_STATUSES,
    ROUTE_SPECS,
    ROUTE_STATUSES,
    AddressSpecSpec,
    ConfigLayer,
    register_node_types,
)

MAC0, MAC1 = "0a:58:0a:05:00:02", "0a:58:0a:05:00:03"
# The Advanced Networking guide's first example (Static Addressing), verbatim but for the machine type.
STATIC = """version: v1alpha1
machine:
  type: worker
  network:
    hostname: talos
    nameservers:
      - 10.0.0.1
    interfaces:
      - interface: eth0
        addresses:
          - 10.0.0.201/8
        mtu: 8765
        routes:
          - network: 0.0.0.0/0
            gateway: 10.0.0.1
      - interface: eth1
        ignore: true
cluster: {}
"""


def _config(network: str) -> str:
    return f"version: v1alpha1\nmachine:\n  type: worker\n  network:\n{network}cluster: {{}}\n"


def _kernel() -> FakeNetlink:
    return FakeNetlink({"eth0": ether(2, MAC0), "eth1": ether(3, MAC1)})


def _own(tmp_path: Path) -> Layout:
    return Layout(root=tmp_path, address="10.0.0.201", own_netns=True)


def test_static_addressing_applies_addresses_routes_mtu_resolvers_and_hostname(tmp_path: Path) -> None:
    kernel = _kernel()

    async def main() -> None:
        async with running(*network.network_controllers(_own(tmp_path), kernel)) as state:
            apply(state, STATIC)
            # Each layer is its own spec in network-config; the merged spec is in network.
            await assert_resource(state, ADDRESS_SPECS, "configuration/eth0/10.0.0.201/8",
                                  namespace=NETWORK_CONFIG_NAMESPACE)  # fmt: skip
            await assert_resource(state, LINK_SPECS, "default/lo", namespace=NETWORK_CONFIG_NAMESPACE)
            route = await assert_resource(state, ROUTE_SPECS, "inet4/10.0.0.1//1024")
            assert (route.spec.dst, route.spec.out_link_name, route.spec.scope) == ("", "eth0", "global")
            assert route.spec.layer is ConfigLayer.CONFIGURATION
            # ... and the kernel got them; the statuses show it.
            await assert_resource(state, ADDRESS_STATUSES, "eth0/10.0.0.201/8")
            await assert_resource(state, ROUTE_STATUSES, "inet4/10.0.0.1//1024",
                                  lambda r: r.spec.out_link_name == "eth0" and r.spec.priority == 1024)  # fmt: skip
            await assert_resource(state, LINK_STATUSES, "eth0",
                                  lambda r: r.spec.mtu == 8765 and r.spec.operational_state == "up")  # fmt: skip
            await assert_resource(
                state, RESOLVER_STATUSES, "resolvers", lambda r: r.spec.dns_servers == ("10.0.0.1",)
            )
            await assert_resource(state, HOSTNAME_STATUSES, "hostname", lambda r: r.spec.hostname == "talos")
            await assert_resource(state, NETWORK_STATUSES, "status",
                                  lambda r: r.spec.address_ready and r.spec.connectivity_ready and r.spec.hostname_ready)  # fmt: skip
            await assert_resource(state, NODE_ADDRESSES, "default",
                                  lambda r: [str(a) for a in r.spec.addresses] == ["10.0.0.201/8"])  # fmt: skip
        # eth1 is ignored: nothing was asked of it, not even to come up.
        assert not [call for call in kernel.calls if "eth1" in call]

    run(main)


def test_removing_an_address_from_the_config_removes_it_and_its_route_and_leaves_others_alone(
    tmp_path: Path,
) -> None:
    kernel = _kernel()

    async def main() -> None:
        # Put there by someone else: never specified, so never touched.
        await kernel.add_address(AddressSpecSpec(address="10.9.9.9/24", link_name="eth1", family="inet4"))
        kernel.calls.clear()
        async with running(*network.network_controllers(_own(tmp_path), kernel)) as state:
            apply(state, STATIC)
            await assert_resource(state, ROUTE_STATUSES, "inet4/10.0.0.1//1024")
            apply(
                state,
                _config("    interfaces:\n      - interface: eth0\n        addresses: [10.0.0.202/8]\n"),
            )
            await assert_resource(state, ADDRESS_STATUSES, "eth0/10.0.0.202/8")
            await assert_no_resource(state, ADDRESS_STATUSES, "eth0/10.0.0.201/8")
            await assert_no_resource(state, ROUTE_STATUSES, "inet4/10.0.0.1//1024")
            await assert_no_resource(state, ROUTE_SPECS, "inet4/10.0.0.1//1024")
            await assert_resource(state, ADDRESS_STATUSES, "eth1/10.9.9.9/24")
        assert "remove_address eth0 10.0.0.201/8" in kernel.calls
        assert "remove_route inet4/10.0.0.1//1024" in kernel.calls
        assert not [call for call in kernel.calls if "10.9.9.9" in call]

    run(main)


def test_a_route_the_kernel_refuses_is_a_wait_that_says_why_and_is_retried(tmp_path: Path) -> None:
    kernel = _kernel()
    kernel.refuse.add("add_route")

    async def main() -> None:
        async with running(*network.network_controllers(_own(tmp_path), kernel)) as state:
            apply(state, STATIC)
            wait = await assert_resource(state, WAIT_STATUSES, "network.RouteSpecController")
            assert (
                "route inet4/10.0.0.1//1024" in wait.spec.reason and "refused by the test" in wait.spec.reason
            )
            kernel.refuse.clear()
            kernel.changed()  # any change of the inputs retries at once
            await assert_resource(state, ROUTE_STATUSES, "inet4/10.0.0.1//1024")
            await assert_no_resource(state, WAIT_STATUSES, "network.RouteSpecController")

    run(main)


def test_a_gateway_outside_every_subnet_of_the_link_is_a_wait_naming_the_key(tmp_path: Path) -> None:
    kernel = _kernel()
    config = _config(
        "    interfaces:\n      - interface: eth0\n        addresses: [10.0.0.201/24]\n"
        "        routes: [{network: 0.0.0.0/0, gateway: 192.168.77.1}]\n"
    )

    async def main() -> None:
        async with running(*network.network_controllers(_own(tmp_path), kernel)) as state:
            apply(state, config)
            wait = await assert_resource(state, WAIT_STATUSES, "network.RouteSpecController")
            assert "ENETUNREACH" in wait.spec.reason and "gateway" in wait.spec.reason
            await assert_resource(state, ADDRESS_STATUSES, "eth0/10.0.0.201/24")  # the rest still applies
            status = await assert_resource(state, NETWORK_STATUSES, "status", lambda r: r.spec.address_ready)
            assert not status.spec.connectivity_ready

    run(main)


def test_device_selector_picks_every_link_by_hardware_address_and_dhcp_is_recorded(tmp_path: Path) -> None:
    kernel = FakeNetlink(
        {"eth0": ether(2, MAC0), "eth1": ether(3, MAC1), "eth2": ether(4, "aa:bb:cc:00:00:01")}
    )
    config = _config(
        "    interfaces:\n"
        "      - deviceSelector: {hardwareAddr: '0A:58:0a:05:*'}\n        mtu: 1450\n        dhcp: true\n"
        "        dhcpOptions: {routeMetric: 99}\n"
        "      - deviceSelector: {hardwareAddr: 'aa:bb:*'}\n        dhcp: false\n        addresses: [10.1.0.5]\n"
    )

    async def main() -> None:
        async with running(*network.network_controllers(_own(tmp_path), kernel)) as state:
            apply(state, config)
            for name in ("eth0", "eth1"):
                await assert_resource(state, LINK_SPECS, name, lambda r: r.spec.mtu == 1450 and r.spec.up)
                operator = await assert_resource(state, OPERATOR_SPECS, f"dhcp4/{name}")
                assert (
                    operator.spec.dhcp4.route_metric == 99
                    and operator.spec.layer is ConfigLayer.CONFIGURATION
                )
            # A bare address gets a netmask of all ones.
            await assert_resource(state, ADDRESS_SPECS, "eth2/10.1.0.5/32")
            await assert_no_resource(state, OPERATOR_SPECS, "dhcp4/eth2")
            await assert_resource(state, LINK_STATUSES, "eth1", lambda r: r.spec.mtu == 1450)

    run(main)


def test_layers_merge_configuration_over_default(tmp_path: Path) -> None:
    async def main() -> None:
        async with running(*network.network_controllers(_own(tmp_path), _kernel())) as state:
            apply(state, _config("    interfaces:\n      - interface: lo\n        mtu: 9000\n"))
            # lo is up from the default layer; the configuration layer adds its MTU and wins the layer.
            lo = await assert_resource(state, LINK_SPECS, "lo", lambda r: r.spec.mtu == 9000)
            assert lo.spec.up and lo.spec.type == "loopback" and lo.spec.layer is ConfigLayer.CONFIGURATION
            await assert_resource(
                state, HOSTNAME_SPECS, "default/hostname", namespace=NETWORK_CONFIG_NAMESPACE
            )
            hostname = await assert_resource(state, HOSTNAME_SPECS, "hostname")
            assert (hostname.spec.hostname, hostname.spec.layer) == ("talos-10-0-0-201", ConfigLayer.DEFAULT)
            resolvers = await assert_resource(state, RESOLVER_SPECS, "resolvers")
            assert resolvers.spec.dns_servers == network.DEFAULT_RESOLVERS

    run(main)


def test_a_wrong_nameserver_or_address_is_skipped_and_the_rest_applies(tmp_path: Path) -> None:
    config = _config(
        "    nameservers: [not-an-ip, 10.0.0.53]\n"
        "    interfaces:\n      - interface: eth0\n        addresses: [10.0.0.300/24, 10.0.0.7/24]\n"
    )

    async def main() -> None:
        async with running(*network.network_controllers(_own(tmp_path), _kernel())) as state:
            apply(state, config)
            await assert_resource(
                state, RESOLVER_SPECS, "resolvers", lambda r: r.spec.dns_servers == ("10.0.0.53",)
            )
            await assert_resource(state, ADDRESS_SPECS, "eth0/10.0.0.7/24")
            assert not [r for r in state.list("network", ADDRESS_SPECS) if "300" in r.id]

    run(main)


def test_statuses_follow_kernel_changes(tmp_path: Path) -> None:
    kernel = _kernel()

    async def main() -> None:
        async with running(
            network.link_status_controller(kernel), network.address_status_controller(kernel)
        ) as state:
            await assert_resource(state, LINK_STATUSES, "eth1")
            await kernel.add_address(AddressSpecSpec(address="10.3.0.1/16", link_name="eth1", family="inet4"))
            await assert_resource(
                state, ADDRESS_STATUSES, "eth1/10.3.0.1/16", lambda r: r.spec.link_index == 3
            )
            del kernel.link_table["eth1"]
            await kernel.remove_address("eth1", "10.3.0.1/16")
            await assert_no_resource(state, LINK_STATUSES, "eth1")
            await assert_no_resource(state, ADDRESS_STATUSES, "eth1/10.3.0.1/16")

    run(main)


def test_a_process_node_never_changes_the_host_network(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.9")
    controllers = network.network_controllers(layout)
    names = {c.name for c in controllers}
    assert not names & {
        "network.LinkSpecController",
        "network.AddressSpecController",
        "network.RouteSpecController",
    }
    assert isinstance(network.netlink_for(layout), ProcessNodeView)
    view = ProcessNodeView("127.5.0.9")
    with pytest.raises(NetlinkError, match="shares the host's network") as refused:
        asyncio.run(view.add_address(AddressSpecSpec(address="10.0.0.1/8", link_name="lo", family="inet4")))
    assert "--own-netns" in refused.value.hint

    async def main() -> None:
        async with running(*controllers) as state:
            apply(state, STATIC)
            # The specs are computed (so `get addressspecs` shows what the config asks) ...
            await assert_resource(state, ADDRESS_SPECS, "eth0/10.0.0.201/8")
            # ... the node sees only its own address, and uses the host's connectivity.
            await assert_resource(state, ADDRESS_STATUSES, "lo/127.5.0.9/32")
            await assert_resource(state, NETWORK_STATUSES, "status",
                                  lambda r: r.spec.address_ready and r.spec.connectivity_ready)  # fmt: skip
            assert not state.list("network", ROUTE_STATUSES)

    run(main)


@pytest.mark.parametrize(
    ("typed", "expected"),
    [("links", LINK_STATUSES), ("link", LINK_STATUSES), ("routes", ROUTE_STATUSES), ("addresses", ADDRESS_STATUSES),
     ("linkspecs", LINK_SPECS), ("addressspecs", ADDRESS_SPECS), ("routespecs", ROUTE_SPECS),
     ("resolverspecs", RESOLVER_SPECS), ("hostnamespecs", HOSTNAME_SPECS), ("operatorspecs", OPERATOR_SPECS),
     ("resolvers", RESOLVER_STATUSES), ("networkstatus", NETWORK_STATUSES), ("netstatus", NETWORK_STATUSES)],
)  # fmt: skip
def test_network_types_resolve_by_talos_aliases(typed: str, expected: object) -> None:
    registry = Registry()
    register_node_types(registry)
    assert registry.lookup(typed).spec.type == expected.type  # type: ignore[attr-defined]
