"""controllers/network: hostname, node addresses and address statuses of a process node."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from controller_helpers import ADDRESS, apply, run, running

from ichor.machined.controllers import network
from ichor.machined.controllers.k8s.address_filter import node_address_filter_controller
from ichor.machined.cosi import WAIT_STATUSES, assert_resource
from ichor.machined.netlink import ProcessNodeView
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ADDRESS_STATUSES,
    HOSTNAME_STATUSES,
    NODE_ADDRESS_FILTERS,
    NODE_ADDRESSES,
)

CONFIG = "version: v1alpha1\nmachine:\n  type: worker\n  network: {network}\ncluster: {{}}\n"


def test_hostname_follows_the_config_else_derives_from_the_address(tmp_path: Path) -> None:
    async def main() -> None:
        async with running(*network.hostname_controllers(Layout(root=tmp_path, address=ADDRESS))) as state:
            apply(state, CONFIG.format(network="{}"))
            await assert_resource(
                state, HOSTNAME_STATUSES, "hostname", lambda r: r.spec.hostname == "talos-127-5-0-9"
            )
            apply(state, CONFIG.format(network="{hostname: node-7.lab.example}"))
            await assert_resource(
                state, HOSTNAME_STATUSES, "hostname",
                lambda r: (r.spec.hostname, r.spec.domainname) == ("node-7", "lab.example"),
            )  # fmt: skip

    run(main)


def test_the_node_address_is_its_loopback_address(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address=ADDRESS)

    async def main() -> None:
        async with running(
            network.node_address_controller(layout),
            network.address_status_controller(ProcessNodeView(ADDRESS)),
        ) as state:
            await assert_resource(
                state, NODE_ADDRESSES, "current",
                lambda r: r.spec.addresses == (ipaddress.ip_interface(f"{ADDRESS}/32"),),
            )  # fmt: skip
            status = await assert_resource(state, ADDRESS_STATUSES, f"lo/{ADDRESS}/32")
            assert status.spec.link_name == "lo" and str(status.spec.local) == ADDRESS

    run(main)


def test_the_no_k8s_sets_leave_out_the_pod_and_service_subnets(tmp_path: Path) -> None:
    """Talos's ``*-no-k8s``/``*-only-k8s`` node addresses: what flannel adds is never the node's own."""
    layout = Layout(root=tmp_path, address=ADDRESS)
    mine = (ipaddress.ip_interface(f"{ADDRESS}/32"),)
    with_pods = "version: v1alpha1\nmachine: {{type: worker}}\ncluster: {{network: {{podSubnets: [{}]}}}}\n"

    async def main() -> None:
        async with running(
            network.node_address_controller(layout), node_address_filter_controller()
        ) as state:
            apply(state, CONFIG.format(network="{}"))
            default = await assert_resource(state, NODE_ADDRESS_FILTERS, "no-k8s")
            assert [str(n) for n in default.spec.exclude_subnets] == ["10.244.0.0/16", "10.96.0.0/12"]
            for kind in ("current", "routed", "accumulative"):
                await assert_resource(
                    state, NODE_ADDRESSES, f"{kind}-no-k8s", lambda r: r.spec.addresses == mine
                )
                await assert_resource(
                    state, NODE_ADDRESSES, f"{kind}-only-k8s", lambda r: r.spec.addresses == ()
                )
            # Were the node's address in the pod network, only the only-k8s sets would hold it.
            apply(state, with_pods.format("127.5.0.0/16"))
            await assert_resource(state, NODE_ADDRESSES, "current-no-k8s", lambda r: r.spec.addresses == ())
            await assert_resource(
                state, NODE_ADDRESSES, "current-only-k8s", lambda r: r.spec.addresses == mine
            )
            assert state.get("network", NODE_ADDRESSES, "current").spec.addresses == mine
            # A subnet that is not one: a wait naming the key, the last good filters kept.
            apply(state, with_pods.format("10.244.0.0/99"))
            await assert_resource(
                state, WAIT_STATUSES, "k8s.NodeAddressFilterController",
                lambda r: "cluster.network.podSubnets: '10.244.0.0/99' is not a CIDR subnet" in r.spec.reason,
            )  # fmt: skip
            assert state.get("network", NODE_ADDRESSES, "current-no-k8s").spec.addresses == ()

    run(main)
