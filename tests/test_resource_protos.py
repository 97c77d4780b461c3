"""Every resource Ichor serves decodes in Talos's own types, in both forms.

Talos's Go clients decode a resource's ``proto_spec`` into the spec's Go type (the official
``talosctl health --server=false`` needs the members' addresses from it) and read ``yaml_spec`` with
Go's YAML, where ``[]byte`` is ``!!binary``. For a real sample of every registered type (recorded
from a process cluster, ``tests/data/cosi_samples.yaml``, plus the types only Kubernetes nodes
fill) this encodes the spec, decodes the bytes with the generated Talos message and checks that
every value the YAML shows arrived, field by field.
"""

from __future__ import annotations

import base64
import ipaddress
from datetime import timedelta
from typing import Any

import pytest
from spec_samples import load_samples, spec_from_plain

from ichor.machined.cosi import Registry, Resource, State, go_url_plain, spec_to_plain, spec_to_yaml
from ichor.machined.resources import NODE_TYPES, _protoenc, register_node_types
from ichor.machined.resources._protoenc import (
    EMPTY_SPECS,
    SPEC_MESSAGES,
    SpecEncodingError,
    decode_spec,
    encode_spec,
    message_class,
)
from ichor.machined.resources._talos_enums import TALOS_ENUMS
from ichor.machined.server._cosi import resource_to_proto
from ichor.machinery import pki
from ichor.machinery.yamlio import load_documents, to_plain

TYPES = {t.type: t for t in NODE_TYPES}

NOT_IN_TALOS_1_7 = {
    "DiscoveryStatuses.cluster.ichor.dev": "Ichor's own (the discovery client's state)",
    "RegistriesConfigs.cri.talos.dev": "Talos 1.7 keeps registries in the machine config only",
    "EtcdBackupConfigs.etcd.ichor.dev": "Ichor's own (scheduled etcd snapshots)",
    "EtcdBackupStatuses.etcd.ichor.dev": "Ichor's own (scheduled etcd snapshots)",
    "BootSlots.runtime.ichor.dev": "Ichor's own (A/B slots with boot counting)",
}
SELF_ENCODING = {
    "MachineConfigs.config.talos.dev",
    "MachineTypes.config.talos.dev",
    "DeviceConfigSpecs.net.talos.dev",  # its YAML in a message outside Talos's resource definitions
}

_A_CA_CRT = base64.b64encode(pki.new_ecdsa_ca(organization="k", ttl=timedelta(days=1)).crt).decode()

# Types a process node never fills (no kubelet, no CRI); samples as a Kubernetes node serves them.
EXTRA_SAMPLES: list[dict[str, Any]] = [
    {"type": "MetaKeys.runtime.talos.dev", "id": "0x0c", "spec": {"value": "hello"}},  # metal nodes only
    {
        "type": "KernelModuleSpecs.runtime.talos.dev",
        "id": "hello",
        "spec": {"string": "hello", "parameters": ["greeting=x"]},
    },
    {  # metal nodes only, with a WatchdogTimerConfig document
        "type": "WatchdogTimerConfigs.runtime.talos.dev",
        "id": "timer",
        "spec": {"device": "/dev/watchdog0", "timeout": "2m0s"},
    },
    {"type": "EventSinkConfigs.runtime.talos.dev", "id": "event-sink", "spec": {"endpoint": "10.5.0.1:4002"}},
    {  # Go's []*url.URL in YAML: each URL's struct
        "type": "KmsgLogConfigs.runtime.talos.dev",
        "id": "kmsg-log",
        "spec": {"destinations": [go_url_plain("tcp://10.5.0.1:4001"), go_url_plain("udp://[fd00::1]:4003")]},
    },
    {
        "type": "WatchdogTimerStatuses.runtime.talos.dev",
        "id": "timer",
        "spec": {"device": "/dev/watchdog0", "timeout": "2m0s", "feedInterval": "40s"},
    },
    {
        "type": "StaticPodStatuses.kubernetes.talos.dev",
        "id": "kube-system/kube-apiserver-cp-1",
        "spec": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}], "podIP": "10.5.0.2"},
    },
    {
        "type": "RouteStatuses.net.talos.dev",
        "id": "inet4/10.5.0.1//1024",
        "spec": {
            "family": "inet4", "dst": "", "src": "10.5.0.2", "gateway": "10.5.0.1", "outLinkIndex": 2,
            "outLinkName": "eth0", "table": "main", "priority": 1024, "scope": "global", "type": "unicast",
            "flags": "", "protocol": "dhcp", "mtu": 1500,
        },
    },
    {
        "type": "RouteSpecs.net.talos.dev",
        "id": "inet4/10.5.0.1//1024",
        "spec": {
            "family": "inet4", "dst": "10.6.0.0/24", "src": "", "gateway": "10.5.0.1", "outLinkName": "eth0",
            "table": "main", "priority": 1024, "scope": "global", "type": "unicast", "flags": "",
            "protocol": "static", "layer": "configuration", "mtu": 0,
        },
    },
    {
        "type": "OperatorSpecs.net.talos.dev",
        "id": "dhcp4/eth0",
        "spec": {
            "operator": "dhcp4", "linkName": "eth0", "requireUp": True,
            "dhcp4": {"routeMetric": 1024, "skipHostnameRequest": False},
            "vip": {"ip": "", "gratuitousARP": False}, "layer": "configuration",
        },
    },
    {
        "type": "NfTablesChains.net.talos.dev",
        "id": "ingress",
        "spec": {
            "type": "filter", "hook": "input", "priority": 0, "policy": "drop",
            "rules": [
                {"matchIIfName": {"interfaceName": ["lo"], "operator": "!="}, "verdict": "accept"},
                {"matchConntrackState": {"states": ["related", "established"]}, "verdict": "accept"},
                {
                    "matchSourceAddress": {"includeSubnets": ["10.5.0.0/24"]},
                    "matchLayer4": {"protocol": "tcp", "matchDestinationPort": {"ranges": [{"lo": 50000, "hi": 50000}]}},
                    "verdict": "accept",
                },
            ],
        },
    },
    {"type": "DNSResolveCaches.net.talos.dev", "id": "tcp-127.0.0.53:53", "spec": {"status": "running"}},
    {
        "type": "ExtensionStatuses.runtime.talos.dev",
        "id": "0",
        "spec": {
            "image": "hello.sqsh",
            "metadata": {
                "name": "hello", "version": "1.0.0", "author": "Ichor", "description": "says hello",
                "compatibility": {"talos": {"version": ">= v1.7.0"}},
            },
        },
    },
    {
        "type": "ExtensionServiceConfigs.runtime.talos.dev",
        "id": "hello",
        "spec": {"files": [{"content": "hi\n", "mountPath": "/etc/hello.conf"}], "environment": ["A=1"]},
    },
    {"type": "ExtensionServiceConfigStatuses.runtime.talos.dev", "id": "hello", "spec": {"specVersion": "2"}},
    {"type": "ManifestStatuses.kubernetes.talos.dev", "id": "manifests", "spec": {"manifestsApplied": ["00-kubelet-bootstrapping-token"]}},
    # Kernel parameters as a process node serves them (every key refused there, with Ichor's reason).
    {"type": "KernelParamSpecs.runtime.talos.dev", "id": "proc.sys.net.ipv4.tcp_fin_timeout",
     "spec": {"value": "33", "ignoreErrors": False}},
    {"type": "KernelParamDefaultSpecs.runtime.talos.dev", "id": "proc.sys.kernel.panic",
     "spec": {"value": "10", "ignoreErrors": False}},
    {"type": "KernelParamStatuses.runtime.talos.dev", "id": "proc.sys.net.ipv4.tcp_fin_timeout",
     "spec": {"current": "60", "default": "60", "unsupported": True}},
    # Types of issue 25 section 3 (NodeStatus from a Kubernetes node; the rest as a container node serves them).
    {"type": "NodeStatuses.kubernetes.talos.dev", "id": "cp-1",
     "spec": {"nodename": "cp-1", "nodeReady": True, "unschedulable": True,
              "labels": {"kubernetes.io/hostname": "cp-1"}, "annotations": {"talos.dev/cordoned": "true"}}},
    {"type": "CPUStats.perf.talos.dev", "id": "latest",
     "spec": {"cpu": [{"user": 1021.5, "nice": 0.3, "system": 310.25, "idle": 50211.1, "iowait": 12.0, "irq": 0.0,
                       "softIrq": 4.5, "steal": 0.0, "guest": 0.0, "guestNice": 0.0}],
              "cpuTotal": {"user": 2043.0, "nice": 0.6, "system": 620.5, "idle": 100422.2, "iowait": 24.0, "irq": 0.0,
                           "softIrq": 9.0, "steal": 0.0, "guest": 0.0, "guestNice": 0.0},
              "irqTotal": 88123456, "contextSwitches": 150123456, "processCreated": 412345, "processRunning": 3,
              "processBlocked": 0, "softIrqTotal": 40123456}},
    {"type": "MemoryStats.perf.talos.dev", "id": "latest",
     "spec": {"total": 16318480, "used": 9123456, "available": 9876543, "buffers": 123456, "cached": 4567890,
              "swapCached": 0, "active": 5123456, "inactive": 4123456, "activeAnon": 3123456,
              "inactiveAnon": 123456, "activeFile": 2000000, "inactiveFile": 4000000, "unevictable": 1024,
              "mlocked": 1024, "swapTotal": 0, "swapFree": 0, "dirty": 512, "writeback": 0, "anonPages": 3200000,
              "mapped": 800000, "shmem": 60000, "slab": 700000, "sreclaimable": 500000, "sunreclaim": 200000,
              "kernelStack": 20000, "pageTables": 40000, "nfsunstable": 0, "bounce": 0, "writeBacktmp": 0,
              "commitLimit": 8159240, "commitTedas": 12000000, "vmallocTotal": 34359738367, "vmallocUsed": 60000,
              "vmallocChunk": 0, "hardwareCorrupted": 0, "anonHugePages": 200000, "shmemHugePages": 0,
              "shmemPmdMapped": 0, "cmaTotal": 0, "cmaFree": 0, "hugePagesTotal": 0, "hugePagesFree": 0,
              "hugePagesRsvd": 0, "hugePagesSurp": 0, "hugepagesize": 2048, "directMap4k": 300000,
              "directMap2m": 9000000, "directMap1g": 8388608}},
    {"type": "MountStatuses.runtime.talos.dev", "id": "STATE",
     "spec": {"source": "/dev/sda1", "target": "/system/state", "filesystemType": "ext4",
              "options": ["rw", "relatime"], "encrypted": False}},
    {"type": "HardwareAddresses.net.talos.dev", "id": "first",
     "spec": {"name": "eth0", "hardwareAddr": "52:54:00:12:34:56"}},
    {"type": "ProbeSpecs.net.talos.dev", "id": "tcp:10.5.0.1:6443",
     "spec": {"interval": "1s", "failureThreshold": 3, "tcp": {"endpoint": "10.5.0.1:6443", "timeout": "10s"},
              "layer": "platform"}},
    {"type": "ProbeStatuses.net.talos.dev", "id": "tcp:10.5.0.1:6443",
     "spec": {"success": False, "lastError": "dial tcp 10.5.0.1:6443: connection refused"}},
    {"type": "PKIStatuses.etcd.talos.dev", "id": "etcd", "spec": {"ready": True, "version": "1"}},
    {"type": "TrustdCertificates.secrets.talos.dev", "id": "trustd",
     "spec": {"acceptedCAs": [{"crt": _A_CA_CRT}], "server": {"crt": _A_CA_CRT, "key": _A_CA_CRT}}},
    {"type": "EtcdSecrets.secrets.talos.dev", "id": "etcd",
     "spec": {"etcd": {"crt": _A_CA_CRT, "key": _A_CA_CRT}, "etcdPeer": {"crt": _A_CA_CRT, "key": _A_CA_CRT},
              "etcdAdmin": {"crt": _A_CA_CRT, "key": _A_CA_CRT}, "etcdAPIServer": {"crt": _A_CA_CRT, "key": _A_CA_CRT}}},
    {"type": "KubeSpanConfigs.kubespan.talos.dev", "id": "kubespan",
     "spec": {"enabled": True, "clusterId": "8Ck7ycXBrc5ONIrQSUJ6Y2LIx4u6qFQzXhHXUqPNXnM=",
              "sharedSecret": "dQ1Pc8hmvB4uQCQhsPCIvsmSSBsCs6tAmWE7rZGSJtA=", "forceRouting": True,
              "advertiseKubernetesNetworks": False, "mtu": 1420, "endpointFilters": ["0.0.0.0/0", "!10.5.0.0/24"],
              "harvestExtraEndpoints": False}},
    {"type": "KubeSpanIdentities.kubespan.talos.dev", "id": "local",
     "spec": {"address": "fdb6:636b:3183:9302:3656:78ff:fe9a:bcde/128", "subnet": "fdb6:636b:3183:9302::/64",
              "privateKey": "sBJdXDxqiBDiwHjQhVvPOdLd80qBLyAHkB9vlhgQNEE=",
              "publicKey": "HkkRQjpblcbUqpxAaRTfj2Lho3bUehsl5N1c4p4iWkQ="}},
    {"type": "KubeSpanPeerSpecs.kubespan.talos.dev", "id": "HkkRQjpblcbUqpxAaRTfj2Lho3bUehsl5N1c4p4iWkQ=",
     "spec": {"address": "fdb6:636b:3183:9302:3656:78ff:fe9a:bcde",
              "allowedIPs": ["10.5.0.3/32", "10.244.1.0/24", "fdb6:636b:3183:9302:3656:78ff:fe9a:bcde/128"],
              "endpoints": ["10.5.0.3:51820", "[fd00::3]:51820"], "label": "worker-1"}},
    {"type": "KubernetesAccessConfigs.cluster.talos.dev", "id": "config",
     "spec": {"enabled": True, "allowedAPIRoles": ["os:reader"], "allowedKubernetesNamespaces": ["kube-system"]}},
    {"type": "KubeletSecrets.secrets.talos.dev", "id": "kubelet",
     "spec": {"endpoint": go_url_plain("https://127.0.0.1:7445"),
              "acceptedCAs": [{"crt": _A_CA_CRT}],
              "bootstrapTokenID": "abcdef", "bootstrapTokenSecret": "0123456789abcdef"}},
    {"type": "SeccompProfiles.cri.talos.dev", "id": "audit.json",
     "spec": {"name": "audit.json", "value": {"defaultAction": "SCMP_ACT_LOG"}}},
    {"type": "DevicesStatuses.runtime.talos.dev", "id": "devices", "spec": {"ready": True}},
    {"type": "MaintenanceServiceConfigs.runtime.talos.dev", "id": "maintenance",
     "spec": {"listenAddress": "10.5.0.2:50000", "reachableAddresses": ["10.5.0.2", "fd00::2"]}},
]  # fmt: skip

SAMPLES = [s for s in load_samples() + EXTRA_SAMPLES if s["type"] in SPEC_MESSAGES and s["type"] in TYPES]


def _spec(sample: dict[str, Any]) -> Any:
    plain = sample["spec"]
    if sample["type"] == "Manifests.kubernetes.talos.dev":  # Talos prints the spec as the object list
        plain = {"items": plain}
    return spec_from_plain(TYPES[sample["type"]].spec_class, plain)


def _canon(value: Any) -> Any:
    """One shape for both sides: Go's zero values dropped, numbers as numbers, addresses canonical."""
    if isinstance(value, dict):
        out = {str(k): _canon(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, "", 0, False, [], {})}
    if isinstance(value, list | tuple):
        return [_canon(v) for v in value]
    if isinstance(value, bytes):
        return list(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:  # Go prints addresses canonically; so does Python
            return str(ipaddress.ip_interface(value)) if "/" in value else str(ipaddress.ip_address(value))
        except ValueError:
            return value
    return value


def _expected(plain: Any, descriptor: Any) -> Any:
    """The YAML form under the proto's field names (Talos's key -> field), enum zeros dropped."""
    if not isinstance(plain, dict) or descriptor.full_name.startswith(("common.", "google.")):
        return plain
    out = {}
    for key, value in plain.items():
        field = _protoenc._field_for(descriptor, key)
        ichor_only = (descriptor.name, key) in _protoenc._ICHOR_ONLY
        assert field is not None or ichor_only or value in (None, "", 0, False, [], {}), f"{key} has no field"
        if field is None:
            continue
        enum = field.enum_type
        if enum is not None and isinstance(value, str) and TALOS_ENUMS[enum.name].get(value) == 0:
            continue
        sub = field.message_type
        if sub is not None and sub.GetOptions().map_entry:
            inner = sub.fields_by_name["value"].message_type
            value = {k: _expected(v, inner) if inner else v for k, v in value.items()}
        elif sub is not None and isinstance(value, list):
            value = [_expected(v, sub) for v in value]
        elif sub is not None:
            value = _expected(value, sub)
        out[field.name] = value
    return out


def _wrapped(type_name: str, plain: Any) -> Any:
    if type_name == "StaticPods.kubernetes.talos.dev":
        return {"pod": plain}
    if type_name == "StaticPodStatuses.kubernetes.talos.dev":
        return {"podStatus": plain}
    if type_name == "Manifests.kubernetes.talos.dev":
        return {"items": [{"object": item} for item in plain.get("items", ())]}
    return plain


def test_every_registered_type_has_talos_message_or_says_why_not() -> None:
    for rtype in NODE_TYPES:
        if rtype.type in NOT_IN_TALOS_1_7 or rtype.type in SELF_ENCODING or rtype.type in EMPTY_SPECS:
            continue
        assert rtype.type in SPEC_MESSAGES, f"{rtype.type} has no Talos message"
        message_class(SPEC_MESSAGES[rtype.type])  # exists in the generated Talos protos


def test_samples_cover_every_type_talos_has() -> None:
    covered = {s["type"] for s in SAMPLES}
    wanted = {t for t in TYPES if t in SPEC_MESSAGES}
    assert wanted - covered == set()


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: f"{s['type'].split('.')[0]}/{s['id']}")
def test_spec_decodes_in_talos_message_with_every_value(sample: dict[str, Any]) -> None:
    spec = _spec(sample)
    plain = spec_to_plain(spec)
    # The sample rebuilt is the spec the node served (the loader lost nothing).
    served = (
        {"items": sample["spec"]} if sample["type"] == "Manifests.kubernetes.talos.dev" else sample["spec"]
    )
    assert _canon(plain) == _canon(served)
    data = encode_spec(sample["type"], spec)
    assert data is not None
    message = message_class(SPEC_MESSAGES[sample["type"]])()
    message.ParseFromString(data)  # Talos's generated message reads it
    expected = _expected(_wrapped(sample["type"], plain), message.DESCRIPTOR)
    assert _canon(decode_spec(sample["type"], data)) == _canon(expected)
    if _canon(plain):
        assert data, "a spec with values must not go out empty"


def test_served_resources_carry_the_typed_spec() -> None:
    sample = next(s for s in SAMPLES if s["type"] == "Members.cluster.talos.dev")
    rtype = TYPES[sample["type"]]
    state = State()
    state.create(rtype.new(sample["id"], _spec(sample)))
    resource: Resource[Any] = state.get(rtype.default_namespace, rtype, sample["id"])
    wire = resource_to_proto(resource)
    member = message_class(SPEC_MESSAGES[rtype.type])()
    member.ParseFromString(wire.spec.proto_spec)
    # What `talosctl health --server=false` reads: the member's addresses.
    addresses = [str(ipaddress.ip_address(a.ip)) for a in member.addresses]  # type: ignore[attr-defined]
    assert addresses and addresses == [str(a) for a in sample["spec"]["addresses"]]


def test_go_byte_slices_are_number_sequences_in_yaml_and_pem_stays_plain_base64() -> None:
    # Talos's YAML library writes a Go []byte as a sequence of numbers and reads one back only
    # from that (neither !!binary nor a plain string decodes into a []byte there).
    etc = next(s for s in SAMPLES if s["type"] == "EtcFileSpecs.files.talos.dev")
    spec = _spec(etc)
    loaded = to_plain(load_documents(spec_to_yaml(spec), source="etcfile")[0])
    assert loaded["contents"] == list(spec.contents.encode()) and loaded["contents"]
    root = next(s for s in SAMPLES if s["type"] == "OSRootSecrets.secrets.talos.dev")
    loaded = to_plain(load_documents(spec_to_yaml(_spec(root)), source="root")[0])
    # x509.PEMEncoded* marshal themselves as plain base64
    assert base64.b64decode(loaded["issuingCA"]["crt"]).startswith(b"-----BEGIN")


def test_urls_are_go_url_structs_in_yaml() -> None:
    root = next(s for s in SAMPLES if s["type"] == "KubernetesRootSecrets.secrets.talos.dev")
    plain = spec_to_plain(_spec(root))
    assert plain["endpoint"]["scheme"] == "https" and plain["endpoint"]["host"]
    assert "local_endpoint" in plain and "aesCBCEncryptionSecret" in plain  # Talos's own keys


def test_a_value_talos_has_no_field_for_is_refused() -> None:
    sample = next(s for s in SAMPLES if s["type"] == "HostnameStatuses.net.talos.dev")
    with pytest.raises(SpecEncodingError, match="no such field"):
        message = message_class(SPEC_MESSAGES[sample["type"]])()
        _protoenc._fill(message, {"hostname": "a", "notATalosKey": "x"}, sample["type"])


def test_enum_text_that_is_not_talos_is_refused() -> None:
    message = message_class(SPEC_MESSAGES["AddressStatuses.net.talos.dev"])()
    with pytest.raises(SpecEncodingError, match="no value of Talos's NethelpersFamily"):
        _protoenc._fill(message, {"family": "ipv4"}, "AddressStatuses")


def test_registry_knows_every_sampled_type() -> None:
    registry = Registry()
    register_node_types(registry)
    for sample in SAMPLES:
        assert sample["type"] in registry
