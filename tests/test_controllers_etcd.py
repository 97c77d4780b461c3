"""controllers/etcd.py: EtcdConfig and EtcdSpec follow the config, on control planes only."""

from __future__ import annotations

from pathlib import Path

from controller_helpers import ADDRESS, apply, config, run, running

from ichor.machined.controllers import config as config_area
from ichor.machined.controllers import etcd as etcd_area
from ichor.machined.controllers import network
from ichor.machined.controllers.k8s.address_filter import node_address_filter_controller
from ichor.machined.cosi import WAIT_STATUSES, Controller, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import ETCD_CONFIGS, ETCD_SPECS


def _config_and_network(layout: Layout) -> list[Controller]:
    return [
        config_area.machine_type_controller(),
        *network.hostname_controllers(layout),
        network.node_address_controller(layout),
        node_address_filter_controller(),
    ]


def test_etcd_spec_follows_the_config_on_control_planes_only(tmp_path: Path) -> None:
    layout = Layout(tmp_path, ADDRESS)

    async def main() -> None:
        controllers = [
            *_config_and_network(layout),
            etcd_area.etcd_config_controller(),
            etcd_area.etcd_spec_controller(),
        ]
        async with running(*controllers) as state:
            apply(
                state,
                config(
                    etcd="{extraArgs: {election-timeout: '5000'}, advertisedSubnets: ['127.0.0.0/8', '!10.0.0.0/8']}"
                ),
            )
            await assert_resource(
                state, ETCD_CONFIGS, "etcd",
                lambda r: r.spec.advertise_valid_subnets == ("127.0.0.0/8",)
                and r.spec.advertise_exclude_subnets == ("10.0.0.0/8",),
            )  # fmt: skip
            spec = await assert_resource(state, ETCD_SPECS, "etcd", lambda r: r.spec.name == "cp-1")
            assert spec.spec.advertised_addresses == (ADDRESS,)
            assert spec.spec.listen_client_addresses == (ADDRESS,)
            assert spec.spec.extra_args == {"election-timeout": "5000"}
            # A subnet no address of the node is in: no spec change, a wait naming the key.
            apply(state, config(etcd="{advertisedSubnets: ['10.9.0.0/16']}"))
            await assert_resource(
                state, WAIT_STATUSES, "etcd.SpecController",
                lambda r: "cluster.etcd.advertisedSubnets" in r.spec.reason,
            )  # fmt: skip
            assert state.get("etcd", ETCD_SPECS, "etcd").spec.advertised_addresses == (ADDRESS,)
            # Every address of the node in the pod network: a wait naming the subnets' keys.
            apply(state, config() + "  network: {podSubnets: ['127.0.0.0/8']}\n")
            await assert_resource(
                state, WAIT_STATUSES, "etcd.SpecController",
                lambda r: f"every address of the node ({ADDRESS}) is in the Kubernetes pod or service subnets"
                in r.spec.reason and "cluster.network.podSubnets" in r.spec.reason,
            )  # fmt: skip
            # A worker runs no etcd: both resources go away.
            apply(state, config(type="worker"))
            await assert_no_resource(state, ETCD_SPECS, "etcd", timeout=2)
            await assert_no_resource(state, ETCD_CONFIGS, "etcd", timeout=2)

    run(main)


def test_a_node_with_its_own_network_listens_as_talos_does(tmp_path: Path) -> None:
    """Not exclusive (a container node): the wildcard, or loopback plus the listenSubnets matches,
    so the node's own etcd client (on loopback) always reaches it."""
    layout = Layout(tmp_path, ADDRESS)

    async def main() -> None:
        controllers = [
            *_config_and_network(layout),
            etcd_area.etcd_config_controller(),
            etcd_area.etcd_spec_controller(exclusive=False),
        ]
        async with running(*controllers) as state:
            apply(state, config())
            spec = await assert_resource(state, ETCD_SPECS, "etcd")
            assert (spec.spec.listen_peer_addresses, spec.spec.listen_client_addresses) == (
                ("0.0.0.0",),
                ("0.0.0.0",),
            )
            apply(state, config(etcd=f"{{listenSubnets: ['{ADDRESS}/32']}}"))
            spec = await assert_resource(
                state, ETCD_SPECS, "etcd", lambda r: r.spec.listen_peer_addresses == (ADDRESS,)
            )
            assert spec.spec.listen_client_addresses == ("127.0.0.1", ADDRESS)

    run(main)
