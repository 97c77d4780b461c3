"""DeviceConfigSpecs (issue 25 §3): one per link each ``machine.network.interfaces[]`` entry
configures, with Talos 1.7's ids, selectors resolved against the node's links, its sensitivity and
its protobuf form (the entry's YAML in field 1)."""

from __future__ import annotations

from controller_helpers import apply, config, run, running
from google.protobuf import wrappers_pb2

from ichor.machined.controllers.network import device_configs
from ichor.machined.cosi import Registry, assert_no_resource, assert_resource, spec_to_plain
from ichor.machined.resources import LINK_STATUSES, LinkStatusSpec, register_node_types
from ichor.machined.resources._device_configs import DEVICE_CONFIG_SPECS, DeviceConfigSpecSpec
from ichor.machinery.yamlio import load_documents, to_plain

INTERFACES = """  network:
    hostname: cp-1.lab
    interfaces:
      - interface: eth0
        addresses: [10.5.0.2/24]
        mtu: 1450
      - deviceSelector: {hardwareAddr: '52:54:00:*'}
        dhcp: true
      - interface: bond0
        bond: {mode: active-backup, deviceSelectors: [{hardwareAddr: '52:54:00:aa:*'}]}
"""


def _link(index: int, mac: str) -> LinkStatusSpec:
    return LinkStatusSpec(index=index, type="ether", hardware_addr=mac)


def test_each_entry_and_each_selected_link_is_a_spec_with_talos_ids() -> None:
    async def main() -> None:
        async with running(device_configs.device_config_controller()) as state:
            state.create(LINK_STATUSES.new("eth0", _link(2, "02:42:0a:05:00:02")))
            apply(state, config(extra_machine=INTERFACES).replace("  network: {hostname: cp-1.lab}\n", ""))
            await assert_resource(
                state, DEVICE_CONFIG_SPECS, "eth0/000",
                lambda r: r.spec.device == {"interface": "eth0", "addresses": ["10.5.0.2/24"], "mtu": 1450},
            )  # fmt: skip
            assert {r.id for r in state.list("network", DEVICE_CONFIG_SPECS)} == {
                "eth0/000"
            }  # nothing selected yet
            state.create(LINK_STATUSES.new("enp1s0", _link(3, "52:54:00:aa:00:01")))
            state.create(LINK_STATUSES.new("enp2s0", _link(4, "52:54:00:bb:00:02")))
            await assert_resource(
                state, DEVICE_CONFIG_SPECS, "enp2s0/001/001", lambda r: r.spec.device["interface"] == "enp2s0"
            )
            first = state.get("network", DEVICE_CONFIG_SPECS, "enp1s0/001/000").spec.device
            assert first == {
                "interface": "enp1s0",
                "deviceSelector": {"hardwareAddr": "52:54:00:*"},
                "dhcp": True,
            }
            bond = state.get("network", DEVICE_CONFIG_SPECS, "bond0/002").spec.device["bond"]
            assert bond == {"mode": "active-backup", "interfaces": ["enp1s0"]}
            state.destroy("network", LINK_STATUSES, "enp2s0")
            await assert_no_resource(state, DEVICE_CONFIG_SPECS, "enp2s0/001/001")
            await assert_resource(
                state, DEVICE_CONFIG_SPECS, "enp1s0/001", lambda r: True
            )  # one match: no suffix

    run(main)


def test_yaml_and_protobuf_forms_are_talos() -> None:
    spec = DeviceConfigSpecSpec(device={"interface": "eth0", "mtu": 1450})
    assert spec_to_plain(spec) == {"device": {"interface": "eth0", "mtu": 1450}}
    wrapped = wrappers_pb2.BytesValue()
    wrapped.ParseFromString(spec.proto_spec())
    assert to_plain(load_documents(wrapped.value.decode(), source="proto")[0]) == {
        "interface": "eth0",
        "mtu": 1450,
    }
    assert spec.proto_spec()[0] == 0x0A  # field 1, length-delimited: Talos's yaml_marshalled
    registry = Registry()
    register_node_types(registry)
    definition = registry.get("DeviceConfigSpecs.net.talos.dev").spec
    assert (definition.default_namespace, definition.sensitive, definition.print_columns) == (
        "network",
        True,
        (),
    )
