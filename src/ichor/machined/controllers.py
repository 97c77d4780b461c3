"""The node's controllers: each turns the machine config into the resources derived from it.

Transform controllers, so a config change re-derives their outputs and an output the pass no longer
produces is torn down:

* ``config.MachineTypeController``: MachineConfig -> MachineType;
* ``network.HostnameController``: MachineConfig -> HostnameStatus;
* ``network.NodeAddressController``: the node's one address -> NodeAddresses (default, current,
  routed, accumulative) and its AddressStatus on ``lo`` (a process node owns one 127.x address);
* ``secrets.RootController``: MachineConfig -> OSRootSecrets ``os`` (OS CA, accepted CAs, SANs, token);
* ``secrets.CertSANController``: OSRootSecrets + HostnameStatus + NodeAddresses -> CertSANs ``api``.
"""

from __future__ import annotations

import base64
import ipaddress
from typing import Any

from ichor.machined.cosi import ControllerContext, Input, SkipReconcile, TransformController
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ADDRESS_STATUSES,
    CERT_SAN_API_ID,
    CERT_SANS,
    HOSTNAME_STATUSES,
    MACHINE_CONFIGS,
    MACHINE_TYPES,
    NODE_ADDRESS_CURRENT_ID,
    NODE_ADDRESSES,
    OS_ROOT_ID,
    OS_ROOT_SECRETS,
    AddressFamily,
    AddressScope,
    AddressStatusSpec,
    CertSANSpec,
    HostnameStatusSpec,
    MachineTypeSpec,
    NodeAddressSpec,
    OSRootSpec,
    PEMCertificate,
    PEMCertificateAndKey,
)
from ichor.machinery.yamlio import load_documents, to_plain

ACTIVE = "v1alpha1"


def active_v1alpha1(ctx: ControllerContext) -> dict[str, Any]:
    """The active MachineConfig's v1alpha1 document as plain data; skips the pass while there is none."""
    resource = ctx.get_or_none(MACHINE_CONFIGS, ACTIVE)
    if resource is None:
        raise SkipReconcile
    for doc in load_documents(resource.spec.text, source="MachineConfig"):
        if isinstance(doc, dict) and "kind" not in doc:
            return dict(to_plain(doc))
    raise SkipReconcile


def machine_type_of(v1alpha1: dict[str, Any]) -> MachineTypeSpec:
    """``init`` is a control plane that bootstraps; anything else that is not one is a worker."""
    kind = str((v1alpha1.get("machine") or {}).get("type", "worker"))
    return MachineTypeSpec("controlplane" if kind in ("init", "controlplane") else "worker")


def hostname_of(v1alpha1: dict[str, Any], address: str) -> str:
    """``machine.network.hostname``, else Talos's address-derived default."""
    network = (v1alpha1.get("machine") or {}).get("network") or {}
    return str(network.get("hostname") or default_hostname(address))


def machine_type_controller() -> TransformController[MachineTypeSpec]:
    def derive(ctx: ControllerContext) -> dict[str, MachineTypeSpec]:
        return {"machine-type": machine_type_of(active_v1alpha1(ctx))}

    return TransformController(
        "config.MachineTypeController",
        inputs=[Input(MACHINE_CONFIGS, id=ACTIVE)],
        output=MACHINE_TYPES,
        map_inputs=derive,
    )


def default_hostname(address: str) -> str:
    """Talos's address-derived default (``talos-<ip with dashes>``), used when the config names none."""
    return "talos-" + address.replace(".", "-").replace(":", "-")


def hostname_controller(layout: Layout) -> TransformController[HostnameStatusSpec]:
    def derive(ctx: ControllerContext) -> dict[str, HostnameStatusSpec]:
        host, _, domain = hostname_of(active_v1alpha1(ctx), layout.address).partition(".")
        return {"hostname": HostnameStatusSpec(host, domain)}

    return TransformController(
        "network.HostnameController", inputs=[Input(MACHINE_CONFIGS, id=ACTIVE)], output=HOSTNAME_STATUSES,
        map_inputs=derive,
    )  # fmt: skip


def node_address_controller(layout: Layout) -> TransformController[NodeAddressSpec]:
    """A process node's addresses are its one address, whatever the config says."""
    prefix = ipaddress.ip_interface(f"{layout.address}/{32 if ':' not in layout.address else 128}")

    def derive(ctx: ControllerContext) -> dict[str, NodeAddressSpec]:
        spec = NodeAddressSpec((prefix,))
        return {rid: spec for rid in ("default", NODE_ADDRESS_CURRENT_ID, "routed", "accumulative")}

    return TransformController(
        "network.NodeAddressController", inputs=[Input(MACHINE_CONFIGS, id=ACTIVE)], output=NODE_ADDRESSES,
        map_inputs=derive,
    )  # fmt: skip


def address_status_controller(layout: Layout) -> TransformController[AddressStatusSpec]:
    prefix = ipaddress.ip_interface(f"{layout.address}/{32 if ':' not in layout.address else 128}")
    family = AddressFamily.INET6 if prefix.version == 6 else AddressFamily.INET4

    def derive(ctx: ControllerContext) -> dict[str, AddressStatusSpec]:
        spec = AddressStatusSpec(address=prefix, local=prefix.ip, link_index=1, link_name="lo", family=family,
                                 scope=AddressScope.HOST, flags="permanent")  # fmt: skip
        return {f"lo/{prefix}": spec}

    return TransformController(
        "network.AddressStatusController", inputs=[Input(MACHINE_CONFIGS, id=ACTIVE)], output=ADDRESS_STATUSES,
        map_inputs=derive,
    )  # fmt: skip


def _pem(b64: object) -> bytes:
    return base64.b64decode(str(b64 or "")) if b64 else b""


def os_root_controller() -> TransformController[OSRootSpec]:
    """The OS CA (with its key on control planes only), accepted CAs, certSANs and the trustd token."""

    def derive(ctx: ControllerContext) -> dict[str, OSRootSpec]:
        machine = active_v1alpha1(ctx).get("machine") or {}
        ca = machine.get("ca") or {}
        accepted = [
            PEMCertificate(_pem(c.get("crt"))) for c in machine.get("acceptedCAs") or [] if c.get("crt")
        ]
        ips, names = _split_sans(machine.get("certSANs") or [])
        spec = OSRootSpec(
            issuing_ca=PEMCertificateAndKey(_pem(ca.get("crt")), _pem(ca.get("key"))) if ca.get("crt") else None,
            accepted_cas=(PEMCertificate(_pem(ca.get("crt"))), *accepted) if ca.get("crt") else tuple(accepted),
            cert_san_ips=ips, cert_san_dns_names=names, token=str(machine.get("token", "")),
        )  # fmt: skip
        return {OS_ROOT_ID: spec}

    return TransformController(
        "secrets.RootController", inputs=[Input(MACHINE_CONFIGS, id=ACTIVE)], output=OS_ROOT_SECRETS,
        map_inputs=derive,
    )  # fmt: skip


def _split_sans(values: list[Any]) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    ips: list[Any] = []
    names: list[str] = []
    for value in values:
        try:
            ips.append(ipaddress.ip_address(str(value)))
        except ValueError:
            names.append(str(value))
    return tuple(ips), tuple(names)


def cert_san_controller() -> TransformController[CertSANSpec]:
    """SANs of the API server certificate: OS root SANs, the node's addresses, hostname and FQDN."""

    def derive(ctx: ControllerContext) -> dict[str, CertSANSpec]:
        root = ctx.get_or_none(OS_ROOT_SECRETS, OS_ROOT_ID)
        host = ctx.get_or_none(HOSTNAME_STATUSES, "hostname")
        addresses = ctx.get_or_none(NODE_ADDRESSES, NODE_ADDRESS_CURRENT_ID)
        if root is None or host is None or addresses is None:
            raise SkipReconcile
        fqdn = ".".join(p for p in (host.spec.hostname, host.spec.domainname) if p)
        ips = sorted({*root.spec.cert_san_ips, *(a.ip for a in addresses.spec.addresses)}, key=str)
        names = sorted({*root.spec.cert_san_dns_names, host.spec.hostname, fqdn})
        return {CERT_SAN_API_ID: CertSANSpec(ips=tuple(ips), dns_names=tuple(names), fqdn=fqdn)}

    return TransformController(
        "secrets.CertSANController",
        inputs=[Input(OS_ROOT_SECRETS, id=OS_ROOT_ID), Input(HOSTNAME_STATUSES, id="hostname"),
                Input(NODE_ADDRESSES, id=NODE_ADDRESS_CURRENT_ID)],
        output=CERT_SANS, map_inputs=derive,
    )  # fmt: skip
