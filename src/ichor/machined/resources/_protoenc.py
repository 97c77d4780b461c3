"""Specs in Talos's typed protobuf form: the ``proto_spec`` Talos's Go clients decode.

Talos's clients (the official ``talosctl``, its dashboard and health checks) unmarshal a resource's
``proto_spec`` into the Go type of its spec; the ``yaml_spec`` is only a fallback. Every type Talos
1.7 has is encoded here into Talos's message for it (``api/resource/definitions/*/*.proto``), from
the spec's plain form, which is already Talos's YAML shape (keys, enum strings, addresses as text).
So one table says which message a type uses (:data:`SPEC_MESSAGES`) and one set of rules says how a
YAML value becomes a field, the way Go's types do it:

* keys match proto field names case- and underscore-insensitively (``certSANIPs`` is
  ``cert_san_ips``), or through :data:`_KEY_ALIASES` where Talos's YAML key differs (``layer`` is
  ``config_layer``);
* ``common.NetIP``/``NetIPPrefix``/``NetIPPort`` from their text, ``common.URL`` from its text, PEM
  blocks from their base64, ``Duration`` from Go's duration text, ``Timestamp`` from RFC 3339,
  ``Struct`` from a mapping;
* enums from the Go ``String()`` of the value (:mod:`._talos_enums`, generated from Talos's
  source), link/address/route flags from their comma-joined names, hardware addresses from
  ``aa:bb:..``, Go ``[]byte`` from the sequence of numbers Talos's YAML writes for it.

:func:`decode_spec` is the inverse (a spec's plain form back from the bytes), used by the tests to
prove every type round-trips. A value that fits no field raises :class:`SpecEncodingError`: the
tests encode a real sample of every registered type, so a spec that drifts from Talos's fails
there, never silently on the wire. This module never touches the state.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from google.protobuf import descriptor_pool, json_format, message_factory  # type: ignore[import-untyped]
from google.protobuf.descriptor import Descriptor, FieldDescriptor  # type: ignore[import-untyped]
from google.protobuf.message import Message  # type: ignore[import-untyped]

from ichor.api.gen.resource.definitions.cluster import cluster_pb2 as _cluster_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.config import config_pb2 as _config_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.cri import cri_pb2 as _cri_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.etcd import etcd_pb2 as _etcd_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.extensions import extensions_pb2 as _extensions_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.files import files_pb2 as _files_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.k8s import k8s_pb2 as _k8s_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.kubeaccess import kubeaccess_pb2 as _kubeaccess_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.kubespan import kubespan_pb2 as _kubespan_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.network import network_pb2 as _network_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.perf import perf_pb2 as _perf_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.runtime import runtime_pb2 as _runtime_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.secrets import secrets_pb2 as _secrets_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.time import time_pb2 as _time_pb2  # noqa: F401
from ichor.api.gen.resource.definitions.v1alpha1 import v1alpha1_pb2 as _v1alpha1_pb2  # noqa: F401
from ichor.machined.cosi import format_time, go_url_plain, go_url_text, spec_to_plain
from ichor.machined.resources._talos_enums import TALOS_ENUMS
from ichor.machinery import goduration

# Every Talos resource proto, imported so its messages are in the default descriptor pool.
from ichor.machinery.hostport import split_host_port

__all__ = [
    "EMPTY_SPECS",
    "SPEC_MESSAGES",
    "SpecEncodingError",
    "decode_spec",
    "encode_spec",
    "message_class",
]

_P = "talos.resource.definitions."

SPEC_MESSAGES: dict[str, str] = {
    "MachineStatuses.runtime.talos.dev": _P + "runtime.MachineStatusSpec",
    "Services.v1alpha1.talos.dev": _P + "v1alpha1.ServiceSpec",
    "TimeStatuses.v1alpha1.talos.dev": _P + "time.StatusSpec",
    "OSRootSecrets.secrets.talos.dev": _P + "secrets.OSRootSpec",
    "ApiCertificates.secrets.talos.dev": _P + "secrets.APICertsSpec",
    "CertSANs.secrets.talos.dev": _P + "secrets.CertSANSpec",
    "HostnameStatuses.net.talos.dev": _P + "network.HostnameStatusSpec",
    "NodeAddresses.net.talos.dev": _P + "network.NodeAddressSpec",
    "NodeAddressFilters.net.talos.dev": _P + "network.NodeAddressFilterSpec",
    "AddressStatuses.net.talos.dev": _P + "network.AddressStatusSpec",
    "LinkStatuses.net.talos.dev": _P + "network.LinkStatusSpec",
    "RouteStatuses.net.talos.dev": _P + "network.RouteStatusSpec",
    "LinkSpecs.net.talos.dev": _P + "network.LinkSpecSpec",
    "AddressSpecs.net.talos.dev": _P + "network.AddressSpecSpec",
    "RouteSpecs.net.talos.dev": _P + "network.RouteSpecSpec",
    "HostnameSpecs.net.talos.dev": _P + "network.HostnameSpecSpec",
    "ResolverSpecs.net.talos.dev": _P + "network.ResolverSpecSpec",
    "ResolverStatuses.net.talos.dev": _P + "network.ResolverStatusSpec",
    "OperatorSpecs.net.talos.dev": _P + "network.OperatorSpecSpec",
    "NetworkStatuses.net.talos.dev": _P + "network.StatusSpec",
    "TimeServerSpecs.net.talos.dev": _P + "network.TimeServerSpecSpec",
    "TimeServerStatuses.net.talos.dev": _P + "network.TimeServerStatusSpec",
    "NfTablesChains.net.talos.dev": _P + "network.NfTablesChainSpec",
    "HostDNSConfigs.net.talos.dev": _P + "network.HostDNSConfigSpec",
    "DNSResolveCaches.net.talos.dev": _P + "network.DNSResolveCacheSpec",
    "EtcFileSpecs.files.talos.dev": _P + "files.EtcFileSpecSpec",
    "EtcFileStatuses.files.talos.dev": _P + "files.EtcFileStatusSpec",
    "EtcdRootSecrets.secrets.talos.dev": _P + "secrets.EtcdRootSpec",
    "EtcdConfigs.etcd.talos.dev": _P + "etcd.ConfigSpec",
    "EtcdSpecs.etcd.talos.dev": _P + "etcd.SpecSpec",
    "EtcdMembers.etcd.talos.dev": _P + "etcd.MemberSpec",
    "Identities.cluster.talos.dev": _P + "cluster.IdentitySpec",
    "Affiliates.cluster.talos.dev": _P + "cluster.AffiliateSpec",
    "Members.cluster.talos.dev": _P + "cluster.MemberSpec",
    "DiscoveryConfigs.cluster.talos.dev": _P + "cluster.ConfigSpec",
    "Infos.cluster.talos.dev": _P + "cluster.InfoSpec",
    "Endpoints.kubernetes.talos.dev": _P + "k8s.EndpointSpec",
    "ExtensionStatuses.runtime.talos.dev": _P + "extensions.Layer",
    "ExtensionServiceConfigs.runtime.talos.dev": _P + "runtime.ExtensionServiceConfigSpec",
    "ExtensionServiceConfigStatuses.runtime.talos.dev": _P + "runtime.ExtensionServiceConfigStatusSpec",
    "PlatformMetadatas.talos.dev": _P + "runtime.PlatformMetadataSpec",
    "SecurityStates.talos.dev": _P + "runtime.SecurityStateSpec",
    "MetaKeys.runtime.talos.dev": _P + "runtime.MetaKeySpec",
    "KernelModuleSpecs.runtime.talos.dev": _P + "runtime.KernelModuleSpecSpec",
    "WatchdogTimerConfigs.runtime.talos.dev": _P + "runtime.WatchdogTimerConfigSpec",
    "EventSinkConfigs.runtime.talos.dev": _P + "runtime.EventSinkConfigSpec",
    "KmsgLogConfigs.runtime.talos.dev": _P + "runtime.KmsgLogConfigSpec",
    "WatchdogTimerStatuses.runtime.talos.dev": _P + "runtime.WatchdogTimerStatusSpec",
    "KernelParamSpecs.runtime.talos.dev": _P + "runtime.KernelParamSpecSpec",
    "KernelParamDefaultSpecs.runtime.talos.dev": _P + "runtime.KernelParamSpecSpec",
    "KernelParamStatuses.runtime.talos.dev": _P + "runtime.KernelParamStatusSpec",
    "KubePrismEndpoints.kubernetes.talos.dev": _P + "k8s.KubePrismEndpointsSpec",
    "KubePrismConfigs.kubernetes.talos.dev": _P + "k8s.KubePrismConfigSpec",
    "KubePrismStatuses.kubernetes.talos.dev": _P + "k8s.KubePrismStatusesSpec",
    "KubeletConfigs.kubernetes.talos.dev": _P + "k8s.KubeletConfigSpec",
    "NodeIPConfigs.kubernetes.talos.dev": _P + "k8s.NodeIPConfigSpec",
    "NodeIPs.kubernetes.talos.dev": _P + "k8s.NodeIPSpec",
    "Nodenames.kubernetes.talos.dev": _P + "k8s.NodenameSpec",
    "KubeletSpecs.kubernetes.talos.dev": _P + "k8s.KubeletSpecSpec",
    "KubernetesRootSecrets.secrets.talos.dev": _P + "secrets.KubernetesRootSpec",
    "KubernetesDynamicCerts.secrets.talos.dev": _P + "secrets.KubernetesDynamicCertsSpec",
    "KubernetesSecrets.secrets.talos.dev": _P + "secrets.KubernetesCertsSpec",
    "APIServerConfigs.kubernetes.talos.dev": _P + "k8s.APIServerConfigSpec",
    "ControllerManagerConfigs.kubernetes.talos.dev": _P + "k8s.ControllerManagerConfigSpec",
    "SchedulerConfigs.kubernetes.talos.dev": _P + "k8s.SchedulerConfigSpec",
    "AdmissionControlConfigs.kubernetes.talos.dev": _P + "k8s.AdmissionControlConfigSpec",
    "AuditPolicyConfigs.kubernetes.talos.dev": _P + "k8s.AuditPolicyConfigSpec",
    "SecretStatuses.kubernetes.talos.dev": _P + "k8s.SecretsStatusSpec",
    "ConfigStatuses.kubernetes.talos.dev": _P + "k8s.ConfigStatusSpec",
    "StaticPods.kubernetes.talos.dev": _P + "k8s.StaticPodSpec",
    "StaticPodStatuses.kubernetes.talos.dev": _P + "k8s.StaticPodStatusSpec",
    "StaticPodServerStatuses.kubernetes.talos.dev": _P + "k8s.StaticPodServerStatusSpec",
    "NodeLabelSpecs.k8s.talos.dev": _P + "k8s.NodeLabelSpecSpec",
    "NodeTaintSpecs.k8s.talos.dev": _P + "k8s.NodeTaintSpecSpec",
    "BootstrapManifestsConfigs.kubernetes.talos.dev": _P + "k8s.BootstrapManifestsConfigSpec",
    "ExtraManifestsConfigs.kubernetes.talos.dev": _P + "k8s.ExtraManifestsConfigSpec",
    "Manifests.kubernetes.talos.dev": _P + "k8s.ManifestSpec",
    "ManifestStatuses.kubernetes.talos.dev": _P + "k8s.ManifestStatusSpec",
    "NodeStatuses.kubernetes.talos.dev": _P + "k8s.NodeStatusSpec",
    "CPUStats.perf.talos.dev": _P + "perf.CPUSpec",
    "MemoryStats.perf.talos.dev": _P + "perf.MemorySpec",
    "MountStatuses.runtime.talos.dev": _P + "runtime.MountStatusSpec",
    "HardwareAddresses.net.talos.dev": _P + "network.HardwareAddrSpec",
    "ProbeSpecs.net.talos.dev": _P + "network.ProbeSpecSpec",
    "ProbeStatuses.net.talos.dev": _P + "network.ProbeStatusSpec",
    "PKIStatuses.etcd.talos.dev": _P + "etcd.PKIStatusSpec",
    "EtcdSecrets.secrets.talos.dev": _P + "secrets.EtcdCertsSpec",
    "TrustdCertificates.secrets.talos.dev": _P + "secrets.TrustdCertsSpec",
    "KubeSpanConfigs.kubespan.talos.dev": _P + "kubespan.ConfigSpec",
    "KubeSpanIdentities.kubespan.talos.dev": _P + "kubespan.IdentitySpec",
    "KubeSpanPeerSpecs.kubespan.talos.dev": _P + "kubespan.PeerSpecSpec",
    "KubernetesAccessConfigs.cluster.talos.dev": _P + "kubeaccess.ConfigSpec",
    "KubeletSecrets.secrets.talos.dev": _P + "secrets.KubeletSpec",
    "SeccompProfiles.cri.talos.dev": _P + "cri.SeccompProfileSpec",
    "DevicesStatuses.runtime.talos.dev": _P + "runtime.DevicesStatusSpec",
    "MaintenanceServiceConfigs.runtime.talos.dev": _P + "runtime.MaintenanceServiceConfigSpec",
}
"""Talos's protobuf message for the spec of each resource type it has, by COSI type name.

Not here: types Talos 1.7 does not have (Ichor's own ``DiscoveryStatuses.cluster.ichor.dev``,
``RegistriesConfigs.cri.talos.dev`` which came after 1.7), the config types, which encode
themselves (``proto_spec``), and Talos's empty specs (``MachineResetSignals``,
``AcquireConfigStatuses``, ``NodeCordonedSpecs``, ``KubeletLifecycles``,
``MaintenanceServiceRequests``: an empty struct, whose
encoding is no bytes; ``DNSUpstreams``, whose Go spec holds a live proxy and has no protobuf form)."""
EMPTY_SPECS = frozenset(
    {
        "MachineResetSignals.runtime.talos.dev",
        "AcquireConfigStatuses.v1alpha1.talos.dev",
        "NodeCordonedSpecs.k8s.talos.dev",
        "KubeletLifecycles.kubernetes.talos.dev",
        "DNSUpstreams.net.talos.dev",
        "MaintenanceServiceRequests.runtime.talos.dev",
    }
)

_KEY_ALIASES: dict[tuple[str, str], str] = {
    # Talos's YAML key -> proto field, where Go's yaml tag is not the field's name.
    ("*", "layer"): "config_layer",
    ("*", "timeServers"): "ntp_servers",
    ("*", "dst"): "destination",
    ("*", "src"): "source",
    ("NfTablesIfNameMatch", "interfaceName"): "interface_names",
    ("BootstrapManifestsConfigSpec", "string"): "server",  # Talos's own YAML key for Server
    ("KernelModuleSpecSpec", "string"): "name",  # Talos's own YAML key for Name
    ("ControlPlane", "port"): "api_server_port",
    ("APIServerConfigSpec", "serviceCIDR"): "service_cid_rs",
    ("MemorySpec", "total"): "mem_total",
    ("MemorySpec", "used"): "mem_used",
    ("MemorySpec", "available"): "mem_available",
}

_ICHOR_ONLY: frozenset[tuple[str, str]] = frozenset(
    {
        # Ichor keeps the kube-apiserver's etcd client certificate with the other dynamic
        # certificates; Talos 1.7 keeps it in EtcdSecrets (where Ichor sends it too), not here.
        ("KubernetesDynamicCertsSpec", "etcdAPIServer"),
        # Why a kernel parameter was not applied (a node sharing the host's kernel refuses it).
        ("KernelParamStatusSpec", "reason"),
    }
)
"""YAML keys of Ichor's specs that Talos's message has no field for, on purpose."""

_WRAPPED: dict[str, str] = {
    # Specs whose YAML is one value that the message holds in one field (Go's custom MarshalYAML).
    _P + "k8s.StaticPodSpec": "pod",
    _P + "k8s.StaticPodStatusSpec": "pod_status",
}

_FLAG_ENUMS = {
    _P + "network.LinkStatusSpec": "NethelpersLinkFlag",
    _P + "network.AddressStatusSpec": "NethelpersAddressFlag",
    _P + "network.AddressSpecSpec": "NethelpersAddressFlag",
    _P + "network.RouteStatusSpec": "NethelpersRouteFlag",
    _P + "network.RouteSpecSpec": "NethelpersRouteFlag",
}
"""Messages whose ``flags`` is a bit set shown as comma-joined names (Go's ``*Flags`` types)."""

_HARDWARE_ADDRESSES = frozenset({"hardware_addr", "broadcast_addr", "permanent_addr"})


class SpecEncodingError(ValueError):
    """A spec value fits no field of Talos's message (the spec drifted from Talos's type)."""


def message_class(full_name: str) -> type[Message]:
    """The generated class of a Talos message, by its full name."""
    descriptor = descriptor_pool.Default().FindMessageTypeByName(full_name)
    cls: type[Message] = message_factory.GetMessageClass(descriptor)
    return cls


def encode_spec(type_name: str, spec: Any) -> bytes | None:
    """``spec`` as Talos's ``proto_spec`` of ``type_name``; ``None`` for a type Talos does not have."""
    full_name = SPEC_MESSAGES.get(type_name)
    if full_name is None:
        return None
    message = message_class(full_name)()
    plain = spec_to_plain(spec)
    if full_name == _P + "k8s.ManifestSpec":
        plain = {"items": [{"object": item} for item in plain.get("items", ())]}
    elif full_name in _WRAPPED:
        plain = {_WRAPPED[full_name]: plain}
    _fill(message, plain, type_name)
    return bytes(message.SerializeToString())


def decode_spec(type_name: str, data: bytes) -> Any:
    """The plain (YAML-shaped, proto field names) form of a ``proto_spec``: the inverse, for tests."""
    message = message_class(SPEC_MESSAGES[type_name])()
    message.ParseFromString(data)
    return _plain_of(message)


# --------------------------------------------------------------------------- plain -> message


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _field_for(descriptor: Descriptor, key: str) -> FieldDescriptor | None:
    by_norm = {_norm(f.name): f for f in descriptor.fields}
    alias = _KEY_ALIASES.get((descriptor.name, key)) or _KEY_ALIASES.get(("*", key))
    for candidate in (key, alias):
        if candidate and _norm(candidate) in by_norm:
            return by_norm[_norm(candidate)]
    return None


def _repeated(field: FieldDescriptor) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 5.29; `label` before
    return bool(flag) if flag is not None else field.label == FieldDescriptor.LABEL_REPEATED


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {} or value is False or value == 0


def _fill(message: Message, plain: Any, path: str) -> None:
    if not isinstance(plain, Mapping):
        raise SpecEncodingError(f"{path}: {message.DESCRIPTOR.full_name} needs a mapping, got {plain!r}")
    for key, value in plain.items():
        field = _field_for(message.DESCRIPTOR, key)
        where = f"{path}.{key}"
        if field is None:
            if _is_empty(value) or (message.DESCRIPTOR.name, key) in _ICHOR_ONLY:
                continue  # an empty Ichor-only key carries nothing Talos could miss
            raise SpecEncodingError(f"{where}: {message.DESCRIPTOR.full_name} has no such field")
        if value is None:
            continue
        _set(message, field, value, where)


def _set(message: Message, field: FieldDescriptor, value: Any, path: str) -> None:
    target = getattr(message, field.name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        if not isinstance(value, Mapping):
            raise SpecEncodingError(f"{path}: a map needs a mapping, got {value!r}")
        for k, v in value.items():
            if value_field.message_type is not None:
                _to_message(target[k], v, f"{path}.{k}")
            else:
                target[k] = _scalar(message, value_field, v, f"{path}.{k}")
        return
    if _repeated(field):
        items = value if isinstance(value, list | tuple) else [value]
        for i, item in enumerate(items):
            if field.message_type is not None:
                _to_message(target.add(), item, f"{path}[{i}]")
            else:
                target.append(_scalar(message, field, item, f"{path}[{i}]"))
        return
    if field.message_type is not None:
        if value == "" and field.message_type.full_name.startswith("common."):
            return  # Go's zero netip.Addr/Prefix/AddrPort, URL: nothing on the wire
        _to_message(target, value, path)
        target.SetInParent()
        return
    setattr(message, field.name, _scalar(message, field, value, path))


def _to_message(target: Message, value: Any, path: str) -> None:
    name = target.DESCRIPTOR.full_name
    if name == "common.NetIP":
        if value:
            target.ip = ipaddress.ip_address(str(value)).packed
    elif name == "common.NetIPPrefix":
        if value:
            prefix = ipaddress.ip_interface(str(value))
            target.ip = prefix.ip.packed
            target.prefix_length = prefix.network.prefixlen
    elif name == "common.NetIPPort":
        if value:
            host, port = split_host_port(str(value))
            target.ip = ipaddress.ip_address(host).packed
            target.port = port
    elif name == "common.URL":
        target.full_path = go_url_text(value) if isinstance(value, Mapping) else str(value)
    elif name.startswith("common.PEMEncoded"):
        if not isinstance(value, Mapping):
            raise SpecEncodingError(f"{path}: {name} needs crt/key, got {value!r}")
        for key, text in value.items():
            if key not in ("crt", "key"):
                raise SpecEncodingError(f"{path}.{key}: {name} has no such field")
            setattr(target, key, base64.b64decode(str(text)))
    elif name == "google.protobuf.Duration":
        delta = goduration.parse(str(value)) if isinstance(value, str) else None
        if delta is None:
            raise SpecEncodingError(f"{path}: a duration needs Go's text form, got {value!r}")
        target.FromTimedelta(delta)
    elif name == "google.protobuf.Timestamp":
        target.FromJsonString(str(value))
    elif name == "google.protobuf.Struct":
        if not isinstance(value, Mapping):
            raise SpecEncodingError(f"{path}: a struct needs a mapping, got {value!r}")
        target.update(value)
    else:
        _fill(target, value, path)


def _enum_value(enum_name: str, text: str, path: str) -> int:
    table = TALOS_ENUMS.get(enum_name)
    if table is not None and text in table:
        return table[text]
    raise SpecEncodingError(f"{path}: {text!r} is no value of Talos's {enum_name}")


def _scalar(message: Message, field: FieldDescriptor, value: Any, path: str) -> Any:
    kind = field.type
    if kind == FieldDescriptor.TYPE_ENUM:
        if isinstance(value, bool):
            raise SpecEncodingError(f"{path}: an enum needs a name, got {value!r}")
        if isinstance(value, int):
            return value
        return _enum_value(field.enum_type.name, str(value), path)
    if kind == FieldDescriptor.TYPE_BYTES:
        if isinstance(value, list) and all(isinstance(b, int) and not isinstance(b, bool) for b in value):
            return bytes(value)
        if field.name in _HARDWARE_ADDRESSES:
            return bytes.fromhex(str(value).replace(":", "")) if value else b""
        if isinstance(value, str):
            return value.encode()
        raise SpecEncodingError(f"{path}: bytes need text, got {value!r}")
    if kind == FieldDescriptor.TYPE_STRING:
        if isinstance(value, Mapping | list | tuple):
            raise SpecEncodingError(f"{path}: a string field got {value!r}")
        return value if isinstance(value, str) else str(value)
    if kind == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise SpecEncodingError(f"{path}: a bool field got {value!r}")
        return value
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return float(value)
    # integers
    if isinstance(value, str) and field.name == "flags":
        enum_name = _FLAG_ENUMS.get(message.DESCRIPTOR.full_name)
        if enum_name is None:
            raise SpecEncodingError(f"{path}: flags of {message.DESCRIPTOR.full_name} are not known")
        bits = 0
        for part in filter(None, value.split(",")):
            bits |= _enum_value(enum_name, part, path)
        return bits
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecEncodingError(f"{path}: an integer field got {value!r}")
    return value


# --------------------------------------------------------------------------- message -> plain


def _enum_text(enum_name: str, number: int) -> Any:
    for text, value in TALOS_ENUMS.get(enum_name, {}).items():
        if value == number:
            return text
    return number


def _plain_of(message: Message) -> Any:
    name = message.DESCRIPTOR.full_name
    if name == "common.NetIP":
        return str(ipaddress.ip_address(message.ip)) if message.ip else ""
    if name == "common.NetIPPrefix":
        ip = ipaddress.ip_address(message.ip)
        return f"{ip}/{message.prefix_length}"
    if name == "common.NetIPPort":
        ip = ipaddress.ip_address(message.ip)
        host = f"[{ip}]" if ip.version == 6 else str(ip)
        return f"{host}:{message.port}"
    if name == "common.URL":
        return go_url_plain(message.full_path)
    if name.startswith("common.PEMEncoded"):
        return {f.name: base64.b64encode(getattr(message, f.name)).decode() for f, _ in message.ListFields()}
    if name == "google.protobuf.Duration":
        return goduration.format(message.ToTimedelta())
    if name == "google.protobuf.Timestamp":
        when: datetime = message.ToDatetime(tzinfo=datetime.now().astimezone().tzinfo)
        return format_time(when)
    if name == "google.protobuf.Struct":
        return json_format.MessageToDict(message)
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        out[field.name] = _plain_value(message, field, value)
    return out


def _plain_value(message: Message, field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        return {
            k: (
                _plain_of(v)
                if value_field.message_type is not None
                else _plain_scalar(message, value_field, v)
            )
            for k, v in value.items()
        }
    if _repeated(field):
        if field.message_type is not None:
            return [_plain_of(v) for v in value]
        return [_plain_scalar(message, field, v) for v in value]
    if field.message_type is not None:
        return _plain_of(value)
    return _plain_scalar(message, field, value)


def _plain_scalar(message: Message, field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return _enum_text(field.enum_type.name, value)
    if field.type == FieldDescriptor.TYPE_BYTES:
        if field.name in _HARDWARE_ADDRESSES:
            return ":".join(f"{b:02x}" for b in value)
        return list(value)
    if field.name == "flags" and message.DESCRIPTOR.full_name in _FLAG_ENUMS:
        enum_name = _FLAG_ENUMS[message.DESCRIPTOR.full_name]
        names = sorted(
            ((v, t) for t, v in TALOS_ENUMS[enum_name].items() if v and value & v == v), key=lambda p: p[0]
        )
        return ",".join(t for _, t in names)
    return value
