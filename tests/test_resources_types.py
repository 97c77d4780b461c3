"""The node's resource types: Talos's names, aliases, sensitivity, print columns, YAML keys, protos.

Alias lookups are what ``talosctl get <alias>`` resolves against the node's resource definitions;
typed ``proto_spec`` encodings are checked by decoding them with real protobuf classes built with
Talos's field layout (``api/resource/definitions/*``).
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ichor.machined.cosi import (
    META_NAMESPACE,
    NAMESPACES,
    RESOURCE_DEFINITIONS,
    WAIT_STATUSES,
    AmbiguousTypeError,
    Registry,
    State,
    UnknownTypeError,
    spec_to_yaml,
)
from ichor.machined.resources import (
    ACQUIRE_CONFIG_STATUSES,
    ADDRESS_STATUSES,
    API_CERTIFICATES,
    CERT_SANS,
    HOSTNAME_STATUSES,
    MACHINE_CONFIGS,
    MACHINE_RESET_SIGNALS,
    MACHINE_STATUSES,
    MACHINE_TYPES,
    NODE_ADDRESSES,
    NODE_LABEL_SPECS,
    NODE_TAINT_SPECS,
    NODE_TYPES,
    OS_ROOT_SECRETS,
    SERVICES,
    TALOS_NAMESPACES,
    TIME_STATUSES,
    AddressFamily,
    AddressStatusSpec,
    ApiCertificatesSpec,
    CertSANSpec,
    HostnameStatusSpec,
    MachineConfigSpec,
    MachineStage,
    MachineStatusSpec,
    MachineStatusStatus,
    MachineTypeSpec,
    NodeAddressSpec,
    OSRootSpec,
    PEMCertificate,
    PEMCertificateAndKey,
    ServiceSpec,
    TimeStatusSpec,
    UnmetCondition,
    register_node_types,
)
from ichor.machinery.yamlio import load_documents, to_plain


@pytest.fixture
def registry() -> Registry:
    reg = Registry([WAIT_STATUSES])
    register_node_types(reg)
    return reg


# --------------------------------------------------------------------------- aliases


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("mc", MACHINE_CONFIGS),
        ("machineconfig", MACHINE_CONFIGS),
        ("MachineConfigs", MACHINE_CONFIGS),
        ("machineconfigs.config", MACHINE_CONFIGS),
        ("MachineConfigs.config.talos.dev", MACHINE_CONFIGS),
        ("machinetype", MACHINE_TYPES),
        ("mt", MACHINE_TYPES),
        ("machinestatus", MACHINE_STATUSES),
        ("machinestatuses", MACHINE_STATUSES),
        ("ms", MACHINE_STATUSES),
        ("svc", SERVICES),
        ("service", SERVICES),
        ("services", SERVICES),
        ("services.v1alpha1", SERVICES),
        ("hostname", HOSTNAME_STATUSES),
        ("hostnamestatus", HOSTNAME_STATUSES),
        ("addresses", ADDRESS_STATUSES),
        ("address", ADDRESS_STATUSES),
        ("addressstatus", ADDRESS_STATUSES),
        ("nodeaddress", NODE_ADDRESSES),
        ("nodeaddresses", NODE_ADDRESSES),
        ("timestatus", TIME_STATUSES),
        ("osrootsecret", OS_ROOT_SECRETS),
        ("osrs", OS_ROOT_SECRETS),
        ("apicertificate", API_CERTIFICATES),
        ("apicertificates.secrets", API_CERTIFICATES),
        ("certsan", CERT_SANS),
        ("certsans", CERT_SANS),
        ("machineresetsignal", MACHINE_RESET_SIGNALS),
        ("acquireconfigstatus", ACQUIRE_CONFIG_STATUSES),
        ("waits", WAIT_STATUSES),
        ("rd", RESOURCE_DEFINITIONS),
        ("ns", NAMESPACES),
        ("nodelabelspecs", NODE_LABEL_SPECS),
        ("nls", NODE_LABEL_SPECS),
        ("nts", NODE_TAINT_SPECS),
    ],
)
def test_alias_resolves_as_on_talos(registry: Registry, typed: str, expected: Any) -> None:
    assert registry.lookup(typed).spec.type == expected.type


def test_talos_alias_collision_is_kept_ambiguous(registry: Registry) -> None:
    # ApiCertificates ("ac" + "s") and AcquireConfigStatuses ("ACS") both derive "acs" in Talos too.
    with pytest.raises(AmbiguousTypeError, match='resource type "acs" is ambiguous'):
        registry.lookup("acs")


def test_unknown_alias_is_not_registered(registry: Registry) -> None:
    with pytest.raises(UnknownTypeError, match='resource "machineconfiguration" is not registered'):
        registry.lookup("machineconfiguration")


def test_definitions_match_talos(registry: Registry) -> None:
    facts = {d.spec.type: d.spec for d in registry.definitions()}
    assert facts["MachineConfigs.config.talos.dev"].display_type == "MachineConfig"
    assert facts["MachineConfigs.config.talos.dev"].aliases == ("machineconfig", "mc", "mcs")
    assert facts["Services.v1alpha1.talos.dev"].aliases == ("svc", "service")
    assert facts["AddressStatuses.net.talos.dev"].aliases == ("address", "addresses", "addressstatus", "as")
    assert facts["CertSANs.secrets.talos.dev"].display_type == "CertSAN"
    assert facts["NodeAddresses.net.talos.dev"].display_type == "NodeAddress"
    sensitive = {t for t, spec in facts.items() if spec.sensitivity == "sensitive"}
    assert sensitive == {
        "MachineConfigs.config.talos.dev",
        "OSRootSecrets.secrets.talos.dev",
        "ApiCertificates.secrets.talos.dev",
        "CertSANs.secrets.talos.dev",
        "EtcdRootSecrets.secrets.talos.dev",
        "DiscoveryConfigs.cluster.talos.dev",  # holds the cluster key
        "LinkSpecs.net.talos.dev",  # may carry wireguard keys
        "OperatorSpecs.net.talos.dev",  # may carry VIP API tokens
        "ExtensionServiceConfigs.runtime.talos.dev",  # config files of extension services
        "RegistriesConfigs.cri.talos.dev",  # registry auth and client keys
        "KubernetesRootSecrets.secrets.talos.dev",
        "KubernetesDynamicCerts.secrets.talos.dev",
        "KubernetesSecrets.secrets.talos.dev",
        "Manifests.kubernetes.talos.dev",  # the bootstrap token's Secret among them
        "NodeLabelSpecs.k8s.talos.dev",  # sensitive in Talos 1.7
        "NodeTaintSpecs.k8s.talos.dev",
        "NodeCordonedSpecs.k8s.talos.dev",  # sensitive in Talos 1.7
        "KubeSpanConfigs.kubespan.talos.dev",  # the cluster secret
        "KubeSpanIdentities.kubespan.talos.dev",  # the WireGuard private key
        "KubeletSecrets.secrets.talos.dev",  # the bootstrap token
        "DeviceConfigSpecs.net.talos.dev",  # may carry wireguard keys
        "EtcdSecrets.secrets.talos.dev",
        "TrustdCertificates.secrets.talos.dev",
        "AuditPolicyConfigs.kubernetes.talos.dev",  # sensitive in Talos 1.7
    }
    assert "extensions" in facts["ExtensionStatuses.runtime.talos.dev"].aliases
    namespaces = {t: spec.default_namespace for t, spec in facts.items()}
    assert namespaces["MachineTypes.config.talos.dev"] == "config"
    assert namespaces["Services.v1alpha1.talos.dev"] == "runtime"
    assert namespaces["TimeStatuses.v1alpha1.talos.dev"] == "runtime"
    assert namespaces["HostnameStatuses.net.talos.dev"] == "network"
    assert namespaces["OSRootSecrets.secrets.talos.dev"] == "secrets"


def test_register_node_types_skips_types_already_registered() -> None:
    reg = Registry([SERVICES])
    register_node_types(reg)
    register_node_types(reg)
    assert {d.spec.type for d in reg.definitions()} >= {t.type for t in NODE_TYPES}


def test_publish_writes_definitions_and_every_talos_namespace(registry: Registry) -> None:
    state = State()
    registry.publish(state)
    rd_ids = {r.id for r in state.list(META_NAMESPACE, RESOURCE_DEFINITIONS)}
    assert {t.type.lower() for t in NODE_TYPES} <= rd_ids
    namespaces = {r.id: r.spec.description for r in state.list(META_NAMESPACE, NAMESPACES)}
    for name, description in TALOS_NAMESPACES.items():
        assert namespaces[name] == description
    assert namespaces["runtime"] == "Talos v1alpha1 subsystems glue resources."


# --------------------------------------------------------------------------- print columns


@pytest.mark.parametrize(
    ("rtype", "spec", "headers", "cells"),
    [
        (
            MACHINE_STATUSES,
            MachineStatusSpec(MachineStage.RUNNING, MachineStatusStatus(ready=True)),
            ["Stage", "Ready"],
            ["running", "true"],
        ),
        (
            SERVICES,
            ServiceSpec(running=True, healthy=False, unknown=True),
            ["Running", "Healthy", "Health Unknown"],
            ["true", "false", "true"],
        ),
        (TIME_STATUSES, TimeStatusSpec(synced=True), ["Synced"], ["true"]),
        (
            HOSTNAME_STATUSES,
            HostnameStatusSpec("talos-cp-1", "example.org"),
            ["Hostname", "Domainname"],
            ["talos-cp-1", "example.org"],
        ),
        (
            NODE_ADDRESSES,
            NodeAddressSpec((ipaddress.ip_interface("10.5.0.2/24"), ipaddress.ip_interface("fd00::2/64"))),
            ["Addresses"],
            ['["10.5.0.2/24","fd00::2/64"]'],
        ),
        (
            ADDRESS_STATUSES,
            AddressStatusSpec(
                address=ipaddress.ip_interface("10.5.0.2/24"), link_name="eth0", family=AddressFamily.INET4
            ),
            ["Address", "Link"],
            ["10.5.0.2/24", "eth0"],
        ),
        (MACHINE_CONFIGS, MachineConfigSpec("version: v1alpha1\n"), [], []),
        (OS_ROOT_SECRETS, OSRootSpec(), [], []),
    ],
)
def test_print_columns_render(
    registry: Registry, rtype: Any, spec: Any, headers: list[str], cells: list[str]
) -> None:
    definition = registry.get(rtype.type)
    assert definition.column_names() == headers
    assert definition.render_columns(rtype.new("x", spec)) == cells


def test_machine_type_column_is_talos_whole_spec_path(registry: Registry) -> None:
    assert [(c.name, c.json_path) for c in registry.get(MACHINE_TYPES.type).spec.print_columns] == [
        ("Type", "{@}")
    ]


def test_machine_type_column_renders(registry: Registry) -> None:
    resource = MACHINE_TYPES.new("machine-type", MachineTypeSpec.CONTROLPLANE)
    assert registry.render_columns(resource) == ["controlplane"]


# --------------------------------------------------------------------------- YAML as talosctl prints it


def _yaml(spec: Any) -> Any:
    return to_plain(load_documents(spec_to_yaml(spec))[0])


def test_yaml_keys_are_talos_keys() -> None:
    status = MachineStatusSpec(
        MachineStage.SHUTTING_DOWN, MachineStatusStatus(False, (UnmetCondition("time", "time not synced"),))
    )
    assert _yaml(status) == {
        "stage": "shutting down",
        "status": {"ready": False, "unmetConditions": [{"name": "time", "reason": "time not synced"}]},
    }
    assert _yaml(ServiceSpec(running=True)) == {"running": True, "healthy": False, "unknown": False}
    assert _yaml(TimeStatusSpec(synced=True, epoch=2)) == {"synced": True, "epoch": 2, "syncDisabled": False}
    assert _yaml(HostnameStatusSpec("cp-1")) == {"hostname": "cp-1", "domainname": ""}
    assert _yaml(CertSANSpec((ipaddress.ip_address("10.5.0.2"),), ("cp-1",), "cp-1")) == {
        "ips": ["10.5.0.2"],
        "dnsNames": ["cp-1"],
        "fqdn": "cp-1",
    }
    root = OSRootSpec(
        issuing_ca=PEMCertificateAndKey(b"CRT", b"KEY"),
        accepted_cas=(PEMCertificate(b"CRT"),),
        cert_san_ips=(ipaddress.ip_address("10.5.0.2"),),
        cert_san_dns_names=("cp-1",),
        token="abc.def",
    )
    assert _yaml(root) == {
        "issuingCA": {"crt": "Q1JU", "key": "S0VZ"},
        "acceptedCAs": [{"crt": "Q1JU"}],
        "certSANIPs": ["10.5.0.2"],
        "certSANDNSNames": ["cp-1"],
        "token": "abc.def",
    }
    assert list(_yaml(ApiCertificatesSpec())) == ["acceptedCAs", "client", "server"]


def test_address_status_yaml_in_talos_order_omitting_empty_addresses() -> None:
    spec = AddressStatusSpec(
        address=ipaddress.ip_interface("10.5.0.2/24"),
        broadcast=ipaddress.ip_address("10.5.0.255"),
        link_index=2,
        link_name="eth0",
        family=AddressFamily.INET4,
        flags="permanent",
    )
    assert list(_yaml(spec).items()) == [
        ("address", "10.5.0.2/24"),
        ("broadcast", "10.5.0.255"),
        ("linkIndex", 2),
        ("linkName", "eth0"),
        ("family", "inet4"),
        ("scope", "global"),
        ("flags", "permanent"),
        ("priority", 0),
    ]


def test_machine_config_yaml_is_the_config_text_verbatim() -> None:
    text = "# applied by hand\nversion: v1alpha1\nmachine:\n    type: worker\n---\nkind: Foo\n"
    assert MachineConfigSpec(text).raw_yaml() == text
    assert MachineConfigSpec(text.rstrip("\n")).raw_yaml() == text


def test_machine_type_yaml_is_one_word() -> None:
    assert MachineTypeSpec.CONTROLPLANE.raw_yaml() == "controlplane\n"
    assert to_plain(load_documents(MachineTypeSpec.WORKER.raw_yaml())[0]) == "worker"


def test_empty_specs_render_as_empty_mapping() -> None:
    from ichor.machined.cosi import EmptySpec

    assert spec_to_yaml(EmptySpec()) == "{}\n"


# --------------------------------------------------------------------------- typed proto_spec


def _talos_messages() -> dict[str, Any]:
    """Message classes with Talos's field numbers (from its Go spec structs' protobuf tags)."""
    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="talos_layout_test.proto", package="talostest", syntax="proto3"
    )

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> None:
        msg = file.message_type.add(name=name)
        for field_name, number, ftype, label, type_name in fields:
            field = msg.field.add(name=field_name, number=number, type=ftype, label=label)
            if type_name:
                field.type_name = type_name

    opt, rep = f.LABEL_OPTIONAL, f.LABEL_REPEATED
    message("UnmetCondition", ("name", 1, f.TYPE_STRING, opt, ""), ("reason", 2, f.TYPE_STRING, opt, ""))
    message(
        "MachineStatusStatus",
        ("ready", 1, f.TYPE_BOOL, opt, ""),
        ("unmet_conditions", 2, f.TYPE_MESSAGE, rep, ".talostest.UnmetCondition"),
    )
    message(
        "MachineStatusSpec",
        ("stage", 1, f.TYPE_INT32, opt, ""),
        ("status", 2, f.TYPE_MESSAGE, opt, ".talostest.MachineStatusStatus"),
    )
    message(
        "ServiceSpec",
        ("running", 1, f.TYPE_BOOL, opt, ""),
        ("healthy", 2, f.TYPE_BOOL, opt, ""),
        ("unknown", 3, f.TYPE_BOOL, opt, ""),
    )
    message(
        "TimeStatusSpec",
        ("synced", 1, f.TYPE_BOOL, opt, ""),
        ("epoch", 2, f.TYPE_INT64, opt, ""),
        ("sync_disabled", 3, f.TYPE_BOOL, opt, ""),
    )
    message(
        "HostnameStatusSpec",
        ("hostname", 1, f.TYPE_STRING, opt, ""),
        ("domainname", 2, f.TYPE_STRING, opt, ""),
    )
    message("MachineConfigSpec", ("yaml_marshalled", 1, f.TYPE_BYTES, opt, ""))
    message("MachineTypeSpec", ("machine_type", 1, f.TYPE_INT32, opt, ""))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        msg.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"talostest.{msg.name}"))
        for msg in file.message_type
    }


def test_proto_specs_decode_with_talos_layout() -> None:
    classes = _talos_messages()

    status = classes["MachineStatusSpec"].FromString(
        MachineStatusSpec(
            MachineStage.RUNNING,
            MachineStatusStatus(True, (UnmetCondition("a", "b"), UnmetCondition("c", "d"))),
        ).proto_spec()
    )
    assert status.stage == 4
    assert status.status.ready is True
    assert [(c.name, c.reason) for c in status.status.unmet_conditions] == [("a", "b"), ("c", "d")]
    assert [MachineStage(s).number for s in ("unknown", "booting", "upgrading")] == [0, 1, 8]

    service = classes["ServiceSpec"].FromString(ServiceSpec(running=True, unknown=True).proto_spec())
    assert (service.running, service.healthy, service.unknown) == (True, False, True)

    time = classes["TimeStatusSpec"].FromString(TimeStatusSpec(True, 300, True).proto_spec())
    assert (time.synced, time.epoch, time.sync_disabled) == (True, 300, True)

    host = classes["HostnameStatusSpec"].FromString(HostnameStatusSpec("cp-1", "lan").proto_spec())
    assert (host.hostname, host.domainname) == ("cp-1", "lan")

    text = "version: v1alpha1\nmachine:\n    type: worker\n"
    config = classes["MachineConfigSpec"].FromString(MachineConfigSpec(text).proto_spec())
    assert config.yaml_marshalled == text.encode()

    numbers = {t: classes["MachineTypeSpec"].FromString(t.proto_spec()).machine_type for t in MachineTypeSpec}
    assert numbers == {
        MachineTypeSpec.UNKNOWN: 0,
        MachineTypeSpec.INIT: 1,
        MachineTypeSpec.CONTROLPLANE: 2,
        MachineTypeSpec.WORKER: 3,
    }


# The bytes Ichor's hand-written encoder produced (before the specs used the generated messages of
# src/ichor/api/protos/resource/definitions): the switch must not change a byte on the wire.
GOLDEN_PROTO_SPECS: list[tuple[Any, bytes]] = [
    (
        MachineStatusSpec(
            MachineStage.RUNNING,
            MachineStatusStatus(True, (UnmetCondition("a", "b"), UnmetCondition("c", "d"))),
        ),
        b"\x08\x04\x12\x12\x08\x01\x12\x06\n\x01a\x12\x01b\x12\x06\n\x01c\x12\x01d",
    ),
    (MachineStatusSpec(), b"\x12\x00"),  # Go encodes the (non-nil) status even when it is all zeros
    (
        MachineStatusSpec(
            MachineStage.BOOTING, MachineStatusStatus(False, (UnmetCondition("network", "waiting for ü"),))
        ),
        b"\x08\x01\x12\x1b\x12\x19\n\x07network\x12\x0ewaiting for \xc3\xbc",
    ),
    (ServiceSpec(running=True, unknown=True), b"\x08\x01\x18\x01"),
    (ServiceSpec(), b""),
    (TimeStatusSpec(True, 300, True), b"\x08\x01\x10\xac\x02\x18\x01"),
    (TimeStatusSpec(epoch=-1), b"\x10" + b"\xff" * 9 + b"\x01"),
    (HostnameStatusSpec("cp-1", "lan"), b"\n\x04cp-1\x12\x03lan"),
    (MachineConfigSpec("version: v1alpha1\n"), b"\n\x12version: v1alpha1\n"),
    (MachineConfigSpec(""), b""),
    (MachineTypeSpec.WORKER, b"\x08\x03"),
    (MachineTypeSpec.UNKNOWN, b""),
]


@pytest.mark.parametrize(("spec", "golden"), GOLDEN_PROTO_SPECS, ids=lambda v: type(v).__name__)
def test_proto_specs_are_byte_identical_to_the_hand_encoder(spec: Any, golden: bytes) -> None:
    assert spec.proto_spec() == golden
