"""controllers/cluster/affiliates.py: the local affiliate, members and control-plane endpoints, without a discovery server."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from discovery_helpers import Node, config_text, run, running

from ichor.machined.cosi import assert_no_resource, assert_resource
from ichor.machined.resources import (
    AFFILIATES,
    ENDPOINTS,
    IDENTITIES,
    INFOS,
    MEMBERS,
    NODE_ADDRESSES,
    NodeAddressSpec,
)
from ichor.machinery import TALOS_VERSION


def test_local_affiliate_info_and_member_without_a_server(tmp_path: Path) -> None:
    async def main() -> None:
        node = Node(tmp_path, "127.44.1.9")
        async with running(node):
            # Port 9 on a loopback address nobody serves: the client retries in the background.
            node.apply(config_text(endpoint="http://127.44.1.250:9/"))
            identity = await assert_resource(node.state, IDENTITIES, "local")
            node_id = identity.spec.node_id
            local = await assert_resource(node.state, AFFILIATES, node_id)
            assert local.spec.hostname == "cp-1" and local.spec.nodename == "cp-1"
            assert local.spec.addresses == (ipaddress.ip_address("127.44.1.9"),)
            assert (
                local.spec.operating_system == f"Ichor ({TALOS_VERSION})"
                and local.spec.machine_type == "controlplane"
            )
            assert local.spec.control_plane is not None and local.spec.control_plane.api_server_port == 6443
            await assert_resource(node.state, MEMBERS, "cp-1", lambda r: r.spec.node_id == node_id)
            await assert_resource(
                node.state, ENDPOINTS, "discovery",
                lambda r: r.spec.addresses == (ipaddress.ip_address("127.44.1.9"),),
            )  # fmt: skip
            # What peers are told is the routed set without the pod network (flannel's addresses).
            with_pods = (ipaddress.ip_interface("10.44.0.9/24"), ipaddress.ip_interface("10.244.1.0/32"))
            node.state.create(NODE_ADDRESSES.new("routed", NodeAddressSpec(with_pods)))
            node.state.create(NODE_ADDRESSES.new("routed-no-k8s", NodeAddressSpec(with_pods[:1])))
            await assert_resource(
                node.state,
                AFFILIATES,
                node_id,
                lambda r: r.spec.addresses == (ipaddress.ip_address("10.44.0.9"),),
            )
            info = await assert_resource(node.state, INFOS, "current")
            assert (info.spec.cluster_id, info.spec.cluster_name) == ("cluster-one", "demo")
            node.apply(config_text(enabled=False, endpoint="http://127.44.1.250:9/"))
            await assert_no_resource(node.state, MEMBERS, "cp-1")
            await assert_no_resource(node.state, AFFILIATES, node_id)

    run(main)
