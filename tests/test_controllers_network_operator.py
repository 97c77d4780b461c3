"""network.OperatorSpecController: a DHCP lease (from a fake server) becomes operator-layer specs, the
kernel (a fake) gets them, and a static address in the machine config replaces them."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from controller_helpers import apply, run, running
from dhcp_helpers import SERVER, FakeServer
from network_helpers import FakeNetlink, ether

from ichor.machined.controllers import network
from ichor.machined.cosi import assert_no_resource, assert_resource
from ichor.machined.dhcp4 import Lease, MessageType
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ADDRESS_SPECS,
    ADDRESS_STATUSES,
    HOSTNAME_STATUSES,
    LINK_SPECS,
    NETWORK_CONFIG_NAMESPACE,
    OPERATOR_SPECS,
    RESOLVER_STATUSES,
    ROUTE_SPECS,
    ROUTE_STATUSES,
    TIME_SERVER_SPECS,
    TIME_SERVER_STATUSES,
    ConfigLayer,
    OperatorSpecSpec,
)

MAC = "0a:58:0a:4d:00:02"
STATIC = """version: v1alpha1
machine:
  type: worker
  network:
    interfaces:
      - interface: eth0
        addresses: [10.77.0.40/24]
cluster: {}
"""


def test_an_unconfigured_physical_link_gets_its_address_routes_dns_and_hostname_by_dhcp(
    tmp_path: Path,
) -> None:
    kernel = FakeNetlink({"eth0": ether(2, MAC)})
    server = FakeServer()
    layout = Layout(root=tmp_path, address="10.77.0.2", own_netns=True)

    async def main() -> None:
        controllers = network.network_controllers(layout, kernel, dhcp_transports=lambda link: server.open)
        async with running(*controllers) as state:
            # Talos's default layer: DHCP on a physical link the config does not mention.
            await assert_resource(state, OPERATOR_SPECS, "dhcp4/eth0",
                                  lambda r: r.spec.layer is ConfigLayer.DEFAULT and r.spec.dhcp4.route_metric == 1024)  # fmt: skip
            await assert_resource(state, ADDRESS_SPECS, "dhcp4/eth0/eth0/10.77.0.2/24",
                                  namespace=NETWORK_CONFIG_NAMESPACE)  # fmt: skip
            await assert_resource(state, ADDRESS_STATUSES, "eth0/10.77.0.2/24")
            route = await assert_resource(state, ROUTE_STATUSES, "inet4/10.77.0.1//1024")
            assert (route.spec.protocol, route.spec.src, route.spec.out_link_name) == (
                "boot",
                "10.77.0.2",
                "eth0",
            )
            await assert_resource(state, RESOLVER_STATUSES, "resolvers",
                                  lambda r: r.spec.dns_servers == ("10.77.0.1", "10.77.0.53")
                                  and r.spec.search_domains == ("lab.example",))  # fmt: skip
            await assert_resource(state, HOSTNAME_STATUSES, "hostname",
                                  lambda r: (r.spec.hostname, r.spec.domainname) == ("leased-node", "lab.example"))  # fmt: skip
            await assert_resource(state, TIME_SERVER_SPECS, "dhcp4/eth0/timeservers",
                                  lambda r: r.spec.time_servers == ("10.77.0.123",), namespace=NETWORK_CONFIG_NAMESPACE)  # fmt: skip

            # A static address for eth0 in the machine config: no more DHCP there; the lease is released.
            apply(state, STATIC)
            await assert_resource(state, ADDRESS_STATUSES, "eth0/10.77.0.40/24")
            await assert_no_resource(state, OPERATOR_SPECS, "dhcp4/eth0")
            await assert_no_resource(state, ADDRESS_STATUSES, "eth0/10.77.0.2/24")
            await assert_no_resource(state, ROUTE_STATUSES, "inet4/10.77.0.1//1024")
            await assert_resource(
                state, HOSTNAME_STATUSES, "hostname", lambda r: r.spec.hostname == "talos-10-77-0-2"
            )
            assert server.got[-1] == (MessageType.RELEASE, ipaddress.IPv4Address("10.77.0.2"), SERVER)

    run(main)


def test_a_process_node_runs_no_dhcp_even_with_dhcp_true(tmp_path: Path) -> None:
    controllers = network.network_controllers(Layout(root=tmp_path, address="127.5.0.9"))
    assert not [c for c in controllers if c.name == "network.OperatorSpecController"]
    # ... and a fake kernel without explicit transports never gets raw sockets.
    own = Layout(root=tmp_path, address="10.0.0.2", own_netns=True)
    assert not [
        c
        for c in network.network_controllers(own, FakeNetlink())
        if c.name == "network.OperatorSpecController"
    ]


def _lease(**changes: object) -> Lease:
    base = Lease(address=ipaddress.IPv4Interface("10.77.0.2/24"), server=SERVER, lease_time=600, renew_after=300,
                 rebind_after=525, routers=(ipaddress.IPv4Address("192.168.9.1"),), mtu=1450)  # fmt: skip
    return Lease(**{**base.__dict__, **changes})  # type: ignore[arg-type]


def test_lease_specs_follow_talos_rules_for_routers_and_classless_routes() -> None:
    spec = OperatorSpecSpec(operator="dhcp4", link_name="eth0", require_up=True)
    # A router outside the subnet gets an on-link route first-hop; the MTU becomes a LinkSpec.
    specs = network.lease_specs(spec, _lease())
    routes = {id: (r.dst, r.gateway, r.scope) for id, r in specs[ROUTE_SPECS].items()}
    assert routes == {"dhcp4/eth0/inet4/192.168.9.1//1024": ("", "192.168.9.1", "global"),
                      "dhcp4/eth0/inet4//192.168.9.1/32/1024": ("192.168.9.1/32", "", "link")}  # fmt: skip
    assert specs[LINK_SPECS]["dhcp4/eth0/eth0"].mtu == 1450
    # Classless static routes present: the router option is ignored (RFC 3442).
    classless = ((ipaddress.IPv4Network("10.9.0.0/16"), SERVER),)
    routes2 = network.lease_specs(spec, _lease(classless_routes=classless))[ROUTE_SPECS]
    assert [(r.dst, r.gateway) for r in routes2.values()] == [("10.9.0.0/16", "10.77.0.1")]


def test_time_servers_default_to_cloudflare_and_machine_time_servers_override(tmp_path: Path) -> None:
    async def main() -> None:
        async with running(*network.time_server_controllers()) as state:
            await assert_resource(state, TIME_SERVER_STATUSES, "timeservers",
                                  lambda r: r.spec.time_servers == ("time.cloudflare.com",))  # fmt: skip
            apply(
                state,
                "version: v1alpha1\nmachine:\n  type: worker\n  time:\n    servers: [10.77.0.123, ' ']\ncluster: {}\n",
            )
            await assert_resource(
                state, TIME_SERVER_SPECS, "configuration/timeservers", namespace=NETWORK_CONFIG_NAMESPACE
            )
            await assert_resource(state, TIME_SERVER_STATUSES, "timeservers",
                                  lambda r: r.spec.time_servers == ("10.77.0.123",))  # fmt: skip

    run(main)
