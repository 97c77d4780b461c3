"""KubeSpanConfigs, KubernetesAccessConfigs, KubeletSecrets, SeccompProfiles (+ their files) and
DevicesStatuses (issue 25 §3): Talos 1.7's per-feature views of the machine config, from a config
applied as the config store applies it, with Talos's defaults, namespaces, sensitivity and field
numbers."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from controller_helpers import apply, config, run, running

from ichor.machined.controllers import config as config_area
from ichor.machined.controllers import feature_configs
from ichor.machined.cosi import WAIT_STATUSES, Registry, assert_no_resource, assert_resource, spec_to_plain
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ACQUIRE_CONFIG_STATUSES,
    MACHINE_STATUS_ID,
    MACHINE_STATUSES,
    NODE_ADDRESS_CURRENT_ID,
    NODE_ADDRESSES,
    MachineStage,
    MachineStatusSpec,
    MachineStatusStatus,
    NodeAddressSpec,
    register_node_types,
)
from ichor.machined.resources._feature_configs import (
    DEVICES_STATUSES,
    KUBELET_SECRETS,
    KUBERNETES_ACCESS_CONFIGS,
    KUBESPAN_CONFIGS,
    MAINTENANCE_SERVICE_CONFIGS,
    MAINTENANCE_SERVICE_REQUESTS,
    SECCOMP_PROFILES,
    KubeletSecretsSpec,
    KubernetesAccessConfigSpec,
    KubeSpanConfigSpec,
    MaintenanceServiceConfigSpec,
    SeccompProfileSpec,
)
from ichor.machined.resources._protoenc import EMPTY_SPECS, encode_spec, message_class
from ichor.machined.resources._secrets import PEMCertificate
from ichor.machinery import pki

CA = pki.new_ecdsa_ca(organization="kubernetes", ttl=timedelta(days=1))
OLD_CA = pki.new_ecdsa_ca(organization="kubernetes", ttl=timedelta(days=1))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _config(*, type: str = "controlplane", machine: str = "", cluster: str = "") -> str:
    text = config(type=type, extra_machine=machine)
    return text + f"  id: cluster-id\n  secret: cluster-secret\n  token: abcdef.0123456789abcdef\n{cluster}"


def test_kubespan_config_carries_talos_defaults_and_the_cluster_secret() -> None:
    async def main() -> None:
        async with running(feature_configs.kubespan_config_controller()) as state:
            apply(state, _config())
            await assert_resource(
                state, KUBESPAN_CONFIGS, "kubespan",
                lambda r: r.spec == KubeSpanConfigSpec(enabled=False, cluster_id="cluster-id",
                                                        shared_secret="cluster-secret", force_routing=True, mtu=1420),
            )  # fmt: skip
            assert state.list("config", KUBESPAN_CONFIGS)[0].metadata.namespace == "config"
            kubespan = (
                "  network:\n    kubespan: {enabled: true, allowDownPeerBypass: true, mtu: 1380,\n"
                "      harvestExtraEndpoints: true, filters: {endpoints: ['0.0.0.0/0', '!10.5.0.0/24']}}\n"
            )
            apply(state, _config(machine=kubespan).replace("  network: {hostname: cp-1.lab}\n", ""))
            await assert_resource(
                state, KUBESPAN_CONFIGS, "kubespan",
                lambda r: (r.spec.enabled, r.spec.force_routing, r.spec.mtu, r.spec.harvest_extra_endpoints,
                           r.spec.endpoint_filters) == (True, False, 1380, True, ("0.0.0.0/0", "!10.5.0.0/24")),
            )  # fmt: skip

    run(main)


def test_kubernetes_access_config_only_on_control_planes() -> None:
    async def main() -> None:
        async with running(feature_configs.kubeaccess_config_controller()) as state:
            apply(state, _config())
            await assert_resource(
                state, KUBERNETES_ACCESS_CONFIGS, "config", lambda r: r.spec == KubernetesAccessConfigSpec()
            )
            access = (
                "  features:\n    kubernetesTalosAPIAccess: {enabled: true, allowedRoles: ['os:reader'],\n"
                "      allowedKubernetesNamespaces: [kube-system]}\n"
            )
            apply(state, _config(machine=access))
            await assert_resource(
                state, KUBERNETES_ACCESS_CONFIGS, "config",
                lambda r: r.spec == KubernetesAccessConfigSpec(True, ("os:reader",), ("kube-system",)),
            )  # fmt: skip
            apply(state, _config(type="worker", machine=access))
            await assert_no_resource(state, KUBERNETES_ACCESS_CONFIGS, "config")

    run(main)


def test_kubelet_secrets_name_the_server_the_cas_and_the_token() -> None:
    ca = f"  ca: {{crt: {_b64(CA.crt)}}}\n  acceptedCAs: [{{crt: {_b64(OLD_CA.crt)}}}]\n"

    async def main() -> None:
        async with running(feature_configs.kubelet_secrets_controller()) as state:
            apply(state, _config(cluster=ca))
            await assert_resource(
                state, KUBELET_SECRETS, "kubelet",
                lambda r: r.spec == KubeletSecretsSpec(
                    endpoint="https://localhost:6443", accepted_cas=(pki_crt(CA.crt), pki_crt(OLD_CA.crt)),
                    bootstrap_token_id="abcdef", bootstrap_token_secret="0123456789abcdef",
                ),
            )  # fmt: skip
            # a worker with KubePrism bootstraps through it
            prism = "  features:\n    kubePrism: {enabled: true, port: 7445}\n"
            apply(state, _config(type="worker", machine=prism, cluster=ca))
            await assert_resource(
                state, KUBELET_SECRETS, "kubelet", lambda r: r.spec.endpoint == "https://127.0.0.1:7445"
            )
            apply(state, _config(type="worker", cluster=ca))
            await assert_resource(
                state, KUBELET_SECRETS, "kubelet", lambda r: r.spec.endpoint == "https://10.0.0.1:6443"
            )
            # no CA at all: Talos's error, as a wait
            apply(state, _config(type="worker"))
            await assert_resource(
                state, WAIT_STATUSES, "secrets.KubeletController",
                lambda r: "missing accepted Kubernetes CAs" in r.spec.reason,
            )  # fmt: skip

    run(main)


def pki_crt(crt: bytes) -> PEMCertificate:
    return PEMCertificate(crt)


def test_kubelet_secrets_yaml_and_protobuf_are_talos() -> None:
    spec = KubeletSecretsSpec("https://127.0.0.1:7445", (pki_crt(CA.crt),), "abcdef", "0123456789abcdef")
    plain = spec_to_plain(spec)
    assert plain["endpoint"]["host"] == "127.0.0.1:7445" and plain["acceptedCAs"] == [{"crt": _b64(CA.crt)}]
    message = message_class("talos.resource.definitions.secrets.KubeletSpec")()
    message.ParseFromString(encode_spec("KubeletSecrets.secrets.talos.dev", spec))
    fields = {f.number: v for f, v in message.ListFields()}
    assert (
        fields[1].full_path == "https://127.0.0.1:7445"
        and fields[3] == "abcdef"
        and fields[4] == "0123456789abcdef"
    )
    assert [c.crt for c in fields[5]] == [CA.crt]


def test_seccomp_profiles_are_written_for_the_kubelet_and_removed_with_the_config(tmp_path: Path) -> None:
    profiles = (
        "  seccompProfiles:\n    - {name: audit.json, value: {defaultAction: SCMP_ACT_LOG}}\n"
        "    - {name: deny.json, value: {defaultAction: SCMP_ACT_ERRNO, syscalls: [{names: [ptrace], action: SCMP_ACT_ERRNO}]}}\n"
    )
    directory = tmp_path / "var/lib/kubelet/seccomp/profiles"

    async def main() -> None:
        layout = Layout(tmp_path, "127.0.0.1")
        async with running(
            feature_configs.seccomp_profile_controller(), feature_configs.SeccompProfileFileController(layout)
        ) as state:
            apply(state, _config(machine=profiles))
            await assert_resource(
                state,
                SECCOMP_PROFILES,
                "deny.json",
                lambda r: r.spec.value["defaultAction"] == "SCMP_ACT_ERRNO",
            )
            await _until(lambda: (directory / "deny.json").exists() and (directory / "audit.json").exists())
            assert json.loads((directory / "audit.json").read_text()) == {"defaultAction": "SCMP_ACT_LOG"}
            apply(state, _config(machine=profiles.split("    - {name: deny")[0]))
            await assert_no_resource(state, SECCOMP_PROFILES, "deny.json")
            await _until(lambda: not (directory / "deny.json").exists())
            assert sorted(p.name for p in directory.iterdir()) == ["audit.json"]

    run(main)


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


def test_devices_are_ready() -> None:
    async def main() -> None:
        async with running(feature_configs.devices_status_controller()) as state:
            await assert_resource(state, DEVICES_STATUSES, "devices", lambda r: r.spec.ready is True)

    run(main)


def test_maintenance_service_config_names_the_listen_address_and_the_current_addresses(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with running(
            feature_configs.maintenance_config_controller(Layout(tmp_path, "10.5.0.2"))
        ) as state:
            await assert_resource(
                state, MAINTENANCE_SERVICE_CONFIGS, "maintenance",
                lambda r: r.spec == MaintenanceServiceConfigSpec("10.5.0.2:50000", ()),
            )  # fmt: skip
            addresses = (ipaddress.ip_interface("10.5.0.2/24"), ipaddress.ip_interface("fd00::2/64"))
            state.create(NODE_ADDRESSES.new(NODE_ADDRESS_CURRENT_ID, NodeAddressSpec(addresses)))
            await assert_resource(
                state, MAINTENANCE_SERVICE_CONFIGS, "maintenance",
                lambda r: r.spec.reachable_addresses == ("10.5.0.2", "fd00::2"),
            )  # fmt: skip

    run(main)
    message = message_class("talos.resource.definitions.runtime.MaintenanceServiceConfigSpec")()
    message.ParseFromString(
        encode_spec(
            "MaintenanceServiceConfigs.runtime.talos.dev",
            MaintenanceServiceConfigSpec(":50000", ("10.5.0.2",)),
        )
    )
    fields = {f.number: v for f, v in message.ListFields()}
    assert fields[1] == ":50000" and [bytes(a.ip) for a in fields[2]] == [bytes([10, 5, 0, 2])]


def test_definitions_are_talos() -> None:
    registry = Registry()
    register_node_types(registry)
    facts = {
        t: (s.default_namespace, s.sensitive, [(c.name, c.json_path) for c in s.print_columns])
        for t in ("KubeSpanConfigs.kubespan.talos.dev", "KubernetesAccessConfigs.cluster.talos.dev",
                  "KubeletSecrets.secrets.talos.dev", "SeccompProfiles.cri.talos.dev", "DevicesStatuses.runtime.talos.dev")
        for s in [registry.get(t).spec]
    }  # fmt: skip
    assert facts == {
        "KubeSpanConfigs.kubespan.talos.dev": ("config", True, []),
        "KubernetesAccessConfigs.cluster.talos.dev": ("config", False, []),
        "KubeletSecrets.secrets.talos.dev": ("secrets", True, []),
        "SeccompProfiles.cri.talos.dev": ("cri", False, []),
        "DevicesStatuses.runtime.talos.dev": ("runtime", False, [("Ready", "{.ready}")]),
    }
    message = message_class("talos.resource.definitions.kubespan.ConfigSpec")()
    message.ParseFromString(
        encode_spec(
            "KubeSpanConfigs.kubespan.talos.dev",
            KubeSpanConfigSpec(True, "i", "s", True, False, 1420, ("x",), True),
        )
    )
    assert {f.number: v for f, v in message.ListFields()} == {
        1: True,
        2: "i",
        3: "s",
        4: True,
        6: 1420,
        7: ["x"],
        8: True,
    }
    message = message_class("talos.resource.definitions.cri.SeccompProfileSpec")()
    message.ParseFromString(
        encode_spec(
            "SeccompProfiles.cri.talos.dev", SeccompProfileSpec("a.json", {"defaultAction": "SCMP_ACT_LOG"})
        )
    )
    fields = {f.number: v for f, v in message.ListFields()}
    assert fields[1] == "a.json" and dict(fields[2]) == {"defaultAction": "SCMP_ACT_LOG"}


def test_maintenance_service_is_requested_while_the_machine_waits_in_maintenance_mode() -> None:
    async def main() -> None:
        async with running(config_area.acquire_status_controller()) as state:
            status = state.create(
                MACHINE_STATUSES.new(
                    MACHINE_STATUS_ID, MachineStatusSpec(MachineStage.BOOTING, MachineStatusStatus())
                )
            )
            await asyncio.sleep(0.1)
            assert state.list("runtime", MAINTENANCE_SERVICE_REQUESTS) == []
            status = state.update(
                status.with_spec(MachineStatusSpec(MachineStage.MAINTENANCE, MachineStatusStatus()))
            )
            await assert_resource(state, MAINTENANCE_SERVICE_REQUESTS, "maintenance", lambda r: True)
            apply(state, _config())  # a config came: booting again
            state.update(status.with_spec(MachineStatusSpec(MachineStage.BOOTING, MachineStatusStatus())))
            await assert_no_resource(state, MAINTENANCE_SERVICE_REQUESTS, "maintenance")
            await assert_resource(state, ACQUIRE_CONFIG_STATUSES, "machine-config", lambda r: True)

    run(main)
    assert "MaintenanceServiceRequests.runtime.talos.dev" in EMPTY_SPECS
