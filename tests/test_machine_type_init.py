"""An ``init`` node reports machine type ``init`` (the Disaster Recovery guide, 001:542-550: "make
sure that there are no control plane nodes with machine type init", ``talosctl get machinetype``)
and still runs everything a control plane runs."""

from __future__ import annotations

from controller_helpers import apply, config, run, running

from ichor.api.gen.resource.definitions.config import config_pb2
from ichor.api.gen.resource.definitions.enums import enums_pb2
from ichor.machined.controllers import config as config_area
from ichor.machined.controllers import etcd
from ichor.machined.cosi import assert_resource
from ichor.machined.resources import ETCD_CONFIGS, MACHINE_TYPES, MachineTypeSpec


def test_init_node_reports_init_and_gets_an_etcd_config() -> None:
    async def main() -> None:
        async with running(config_area.machine_type_controller(), etcd.etcd_config_controller()) as state:
            apply(state, config(type="init"))
            await assert_resource(
                state, MACHINE_TYPES, "machine-type", lambda r: r.spec is MachineTypeSpec.INIT
            )
            await assert_resource(state, ETCD_CONFIGS, "etcd")  # a control plane's etcd, as Talos's init node
            apply(state, config(type="controlplane"))  # converted with `edit mc --mode=staged` + reboot
            await assert_resource(state, MACHINE_TYPES, "machine-type", lambda r: r.spec == "controlplane")

    run(main)


def test_init_is_talos_type_init_on_the_wire() -> None:
    decoded = config_pb2.MachineTypeSpec.FromString(MachineTypeSpec.INIT.proto_spec())
    assert decoded.machine_type == enums_pb2.TYPE_INIT
    assert MachineTypeSpec.INIT.raw_yaml() == "init\n"
    assert [t.is_control_plane for t in MachineTypeSpec] == [False, True, True, False]
