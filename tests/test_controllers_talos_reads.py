"""Resources Talos's client reads before its flows: SecurityStates, EtcdMembers, PlatformMetadatas.

The official ``talosctl`` gets ``SecurityState`` before reboot, reset, hostname and etcd
leave/remove (a PermissionDenied "not supported" ends those flows), ``EtcdMember`` ``local`` for
etcd operations, ``PlatformMetadata`` for ``meta`` and the dashboard. Each is registered with
Talos's name, aliases and columns and filled by a controller with the node's real data.
"""

from __future__ import annotations

from controller_helpers import run, running

from ichor.machined.controllers import etcd, runtime
from ichor.machined.controllers.network import platform
from ichor.machined.cosi import Registry, assert_no_resource, assert_resource
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import (
    ETCD_MEMBERS,
    HOSTNAME_STATUSES,
    PLATFORM_METADATAS,
    SECURITY_STATES,
    SERVICES,
    HostnameStatusSpec,
    ServiceSpec,
    register_node_types,
)


def _definition(type_name: str) -> dict[str, object]:
    registry = Registry()
    register_node_types(registry)
    spec = registry.get(type_name).spec
    return {
        "namespace": spec.default_namespace,
        "aliases": list(spec.aliases),
        "columns": [(c.name, c.json_path) for c in spec.print_columns],
    }


def test_definitions_are_talos_ones() -> None:
    assert _definition("SecurityStates.talos.dev") == {
        "namespace": "runtime",
        "aliases": ["securitystate", "ss"],
        "columns": [
            ("SecureBoot", "{.secureBoot}"),
            ("UKISigningKeyFingerprint", "{.ukiSigningKeyFingerprint}"),
            ("PCRSigningKeyFingerprint", "{.pcrSigningKeyFingerprint}"),
        ],
    }
    assert _definition("PlatformMetadatas.talos.dev") == {
        "namespace": "runtime",
        "aliases": ["platformmetadata", "pm", "pms"],
        "columns": [
            ("Platform", "{.platform}"),
            ("Type", "{.instanceType}"),
            ("Region", "{.region}"),
            ("Zone", "{.zone}"),
        ],
    }
    assert _definition("EtcdMembers.etcd.talos.dev") == {
        "namespace": "etcd",
        "aliases": ["etcdmember", "em", "ems"],
        "columns": [("Member ID", "{.memberID}")],
    }
    assert _definition("SecretStatuses.kubernetes.talos.dev")["aliases"] == ["secretstatus", "ss"]
    registry = Registry()
    register_node_types(registry)
    assert "SecretsStatuses.kubernetes.talos.dev" not in registry


def test_security_state_once_machined_runs() -> None:
    async def main() -> None:
        async with running(runtime.security_state_controller()) as state:
            await assert_no_resource(state, SECURITY_STATES, "securitystate")
            state.create(SERVICES.new("machined", ServiceSpec(running=True, healthy=True)))
            await assert_resource(
                state, SECURITY_STATES, "securitystate", lambda r: r.spec.secure_boot is False
            )

    run(main)


def test_platform_metadata_names_the_platform_and_the_hostname(tmp_path: object) -> None:
    layout = Layout(tmp_path, "10.5.0.2", platform=Platform.CONTAINER)  # type: ignore[arg-type]

    async def main() -> None:
        async with running(platform.platform_config_controller(layout)) as state:
            state.create(HOSTNAME_STATUSES.new("hostname", HostnameStatusSpec("cp-1", "example.org")))
            await assert_resource(
                state,
                PLATFORM_METADATAS,
                "platformmetadata",
                lambda r: (r.spec.platform, r.spec.hostname) == ("container", "cp-1.example.org"),
            )

    run(main)


def test_etcd_member_follows_a_healthy_etcd_and_goes_with_it() -> None:
    asked: list[int] = []

    async def local_member_id() -> int:
        asked.append(1)
        return 0x8E9E05C52164694D

    async def main() -> None:
        async with running(etcd.etcd_member_controller(local_member_id)) as state:
            service = state.create(SERVICES.new("etcd", ServiceSpec(running=True, healthy=False)))
            await assert_no_resource(state, ETCD_MEMBERS, "local")
            state.update(service.with_spec(ServiceSpec(running=True, healthy=True)))
            await assert_resource(
                state, ETCD_MEMBERS, "local", lambda r: r.spec.member_id == "8e9e05c52164694d"
            )
            current = state.get(SERVICES.default_namespace, SERVICES, "etcd")
            state.update(current.with_spec(ServiceSpec(running=False, healthy=False)))
            await assert_no_resource(state, ETCD_MEMBERS, "local")

    run(main)
    assert asked


def test_etcd_member_id_is_sixteen_hex_digits() -> None:
    async def local_member_id() -> int:
        return 0x1F

    async def main() -> None:
        async with running(etcd.etcd_member_controller(local_member_id)) as state:
            state.create(SERVICES.new("etcd", ServiceSpec(running=True, healthy=True)))
            await assert_resource(
                state, ETCD_MEMBERS, "local", lambda r: r.spec.member_id == "000000000000001f"
            )

    run(main)
