"""controllers/network: hostname, node addresses and address statuses of a process node."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from controller_helpers import ADDRESS, apply, run, running

from ichor.machined.controllers import network
from ichor.machined.cosi import assert_resource
from ichor.machined.netlink import ProcessNodeView
from ichor.machined.platform import Layout
from ichor.machined.resources import ADDRESS_STATUSES, HOSTNAME_STATUSES, NODE_ADDRESSES

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
