"""Area ``secrets``: the OS and etcd CAs from the config, the API certificate's SANs, the API
certificates themselves.

* ``secrets.RootController``: MachineConfig -> OSRootSecrets ``os`` (OS CA, with its key on
  control planes only; accepted CAs; certSANs; the trustd token);
* ``secrets.EtcdRootController``: MachineConfig -> EtcdRootSecrets ``etcd`` (``cluster.etcd.ca``);
* ``secrets.CertSANController``: OSRootSecrets + HostnameStatus + NodeAddresses -> CertSANs ``api``;
* ``secrets.APIController``: OSRootSecrets + CertSANs (+ the control plane endpoint on workers) ->
  ApiCertificates ``api``. A control plane signs its own (it holds the OS CA key); a worker asks
  the control planes' trustd and, while none answers, says so in ``talosctl get waits``.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
from collections.abc import Awaitable, Callable, Sequence

from ichor.machined import _certs
from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config, control_plane_host
from ichor.machined.cosi import (
    ControllerContext,
    Input,
    OutputKind,
    SkipReconcile,
    TransformController,
    WaitingFor,
)
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    API_CERTIFICATES,
    API_CERTIFICATES_ID,
    CERT_SAN_API_ID,
    CERT_SANS,
    ETCD_ROOT_ID,
    ETCD_ROOT_SECRETS,
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    NODE_ADDRESS_CURRENT_ID,
    NODE_ADDRESS_FILTER_NO_K8S,
    NODE_ADDRESSES,
    OS_ROOT_ID,
    OS_ROOT_SECRETS,
    ApiCertificatesSpec,
    CertSANSpec,
    EtcdRootSpec,
    OSRootSpec,
    PEMCertificate,
    PEMCertificateAndKey,
    filtered_node_address_id,
)
from ichor.machinery import pki

_SAN_ADDRESSES = filtered_node_address_id(NODE_ADDRESS_CURRENT_ID, NODE_ADDRESS_FILTER_NO_K8S)
"""The node's addresses, but the CNI's: a pod network coming up re-issues no certificate."""

__all__ = [
    "RequestCertificate",
    "api_certificates_controller",
    "cert_san_controller",
    "etcd_root_controller",
    "os_root_controller",
]

RequestCertificate = Callable[..., Awaitable[tuple[pki.CertKey, bytes]]]
"""``trustd.request_server_certificate`` or a test double."""

TRUSTD_RETRY = 1.0


def _pem(b64: str | None) -> bytes:
    return base64.b64decode(b64) if b64 else b""


def _pair(crt: str | None, key: str | None) -> PEMCertificateAndKey | None:
    return PEMCertificateAndKey(_pem(crt), _pem(key)) if crt else None


def _split_sans(
    values: Sequence[str],
) -> tuple[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...], tuple[str, ...]]:
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    names: list[str] = []
    for value in values:
        try:
            ips.append(ipaddress.ip_address(value))
        except ValueError:
            names.append(value)
    return tuple(ips), tuple(names)


def os_root_controller() -> TransformController[OSRootSpec]:
    def derive(ctx: ControllerContext) -> dict[str, OSRootSpec]:
        machine = active_config(ctx).machine
        if machine is None:
            raise SkipReconcile
        issuing = _pair(machine.ca.crt, machine.ca.key) if machine.ca is not None else None
        accepted = tuple(PEMCertificate(_pem(c.crt)) for c in machine.accepted_cas or [] if c.crt)
        ips, names = _split_sans(list(machine.cert_sans or []))
        spec = OSRootSpec(
            issuing_ca=issuing,
            accepted_cas=(PEMCertificate(issuing.crt), *accepted) if issuing is not None else accepted,
            cert_san_ips=ips, cert_san_dns_names=names, token=machine.token or "",
        )  # fmt: skip
        return {OS_ROOT_ID: spec}

    return TransformController(
        "secrets.RootController", inputs=[ACTIVE_CONFIG], output=OS_ROOT_SECRETS, map_inputs=derive
    )


def etcd_root_controller() -> TransformController[EtcdRootSpec]:
    def derive(ctx: ControllerContext) -> dict[str, EtcdRootSpec]:
        cluster = active_config(ctx).cluster
        ca = cluster.etcd.ca if cluster is not None and cluster.etcd is not None else None
        return {ETCD_ROOT_ID: EtcdRootSpec(_pair(ca.crt, ca.key) if ca is not None else None)}

    return TransformController(
        "secrets.EtcdRootController", inputs=[ACTIVE_CONFIG], output=ETCD_ROOT_SECRETS, map_inputs=derive
    )


def cert_san_controller() -> TransformController[CertSANSpec]:
    """SANs of the API server certificate: OS root SANs, the node's addresses, hostname and FQDN."""

    def derive(ctx: ControllerContext) -> dict[str, CertSANSpec]:
        root = ctx.get_or_none(OS_ROOT_SECRETS, OS_ROOT_ID)
        host = ctx.get_or_none(HOSTNAME_STATUSES, HOSTNAME_STATUS_ID)
        addresses = ctx.get_or_none(NODE_ADDRESSES, _SAN_ADDRESSES)
        if root is None or host is None or addresses is None:
            raise SkipReconcile
        fqdn = ".".join(p for p in (host.spec.hostname, host.spec.domainname) if p)
        ips = sorted({*root.spec.cert_san_ips, *(a.ip for a in addresses.spec.addresses)}, key=str)
        names = sorted({*root.spec.cert_san_dns_names, host.spec.hostname, fqdn})
        return {CERT_SAN_API_ID: CertSANSpec(ips=tuple(ips), dns_names=tuple(names), fqdn=fqdn)}

    return TransformController(
        "secrets.CertSANController",
        inputs=[Input(OS_ROOT_SECRETS, id=OS_ROOT_ID), Input(HOSTNAME_STATUSES, id=HOSTNAME_STATUS_ID),
                Input(NODE_ADDRESSES, id=_SAN_ADDRESSES)],
        output=CERT_SANS, map_inputs=derive, output_kind=OutputKind.SHARED,
    )  # fmt: skip


def api_certificates_controller(
    layout: Layout, request_certificate: RequestCertificate | None = None
) -> TransformController[ApiCertificatesSpec]:
    """apid's and trustd's certificates, issued once per change of the OS CA or the SANs."""

    async def derive(ctx: ControllerContext) -> dict[str, ApiCertificatesSpec]:
        root = ctx.get_or_none(OS_ROOT_SECRETS, OS_ROOT_ID)
        sans = ctx.get_or_none(CERT_SANS, CERT_SAN_API_ID)
        if root is None or sans is None or root.spec.issuing_ca is None:
            raise SkipReconcile
        ca = root.spec.issuing_ca
        extra = [*(str(ip) for ip in sans.spec.ips), *sans.spec.dns_names]
        if ca.key:
            # Key generation and signing are CPU work: off the loop that serves the API.
            certs = await asyncio.to_thread(
                _certs.issue_api_certificates, pki.CertKey(ca.crt, ca.key), address=layout.address,
                hostname=sans.spec.fqdn, cert_sans=extra,
                accepted_cas=[c.crt for c in root.spec.accepted_cas[1:]],
            )  # fmt: skip
        else:
            certs = await _from_trustd(ctx, root.spec, sans.spec)
        return {API_CERTIFICATES_ID: ApiCertificatesSpec(
            accepted_cas=tuple(PEMCertificate(c) for c in certs.accepted_cas),
            client=PEMCertificateAndKey(certs.client.crt, certs.client.key) if certs.client else None,
            server=PEMCertificateAndKey(certs.server.crt, certs.server.key),
        )}  # fmt: skip

    async def _from_trustd(
        ctx: ControllerContext, root: OSRootSpec, sans: CertSANSpec
    ) -> _certs.ApiCertificates:
        from ichor.machined import trustd

        assert root.issuing_ca is not None
        host = control_plane_host(active_config(ctx))
        if not host:
            raise WaitingFor(
                "a server certificate from trustd",
                "cluster.controlPlane.endpoint has no host: set it to the control plane endpoint",
            )
        request = request_certificate or trustd.request_server_certificate
        try:
            server, accepted = await request(
                [host], os_ca_crt=root.issuing_ca.crt, token=root.token, hostname=sans.fqdn,
                address=layout.address,
            )  # fmt: skip
        except ConnectionError as exc:
            raise WaitingFor("a server certificate from trustd", str(exc), retry_after=TRUSTD_RETRY) from None
        return _certs.ApiCertificates(server=server, client=None, accepted_cas=(accepted,))

    return TransformController(
        "secrets.APIController",
        inputs=[Input(OS_ROOT_SECRETS, id=OS_ROOT_ID), Input(CERT_SANS, id=CERT_SAN_API_ID), ACTIVE_CONFIG],
        output=API_CERTIFICATES, map_inputs=derive,
    )  # fmt: skip
