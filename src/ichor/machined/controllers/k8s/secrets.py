"""Kubernetes PKI on a control plane: from ``cluster.*`` to the files the static pods mount.

* ``secrets.KubernetesRootController``: MachineConfig + MachineType -> KubernetesRootSecrets ``k8s``
  (control planes only): CAs, service-account key, bootstrap token, encryption secrets, the
  endpoint and the first service IP;
* ``secrets.KubernetesCertSANController``: KubernetesRootSecrets + HostnameStatus + NodeAddresses ->
  CertSANs ``k8s``: the endpoint's host, ``kubernetes``, ``kubernetes.default``,
  ``kubernetes.default.svc``, ``kubernetes.default.svc.<domain>``, ``localhost``, the first service
  IP, ``127.0.0.1``, the node's hostname and addresses, and ``apiServer.certSANs``;
* ``secrets.KubernetesDynamicCertsController``: KubernetesRootSecrets + CertSANs + EtcdRootSecrets ->
  KubernetesDynamicCerts (apiserver serving, apiserver-kubelet-client, front-proxy-client, the
  apiserver's etcd client certificate);
* ``secrets.KubernetesController``: KubernetesRootSecrets + APIServerConfig -> KubernetesSecrets
  (kubeconfigs of the controller-manager, the scheduler and the localhost admin, all to
  ``https://localhost:<localAPIServerPort>``).

Key generation and signing run off the event loop (they are CPU work on the loop that serves the API).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
from datetime import timedelta
from urllib.parse import urlsplit

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.cosi import (
    ControllerContext,
    Input,
    OutputKind,
    SkipReconcile,
    TransformController,
    WaitingFor,
)
from ichor.machined.resources import (
    CERT_SANS,
    ETCD_ROOT_ID,
    ETCD_ROOT_SECRETS,
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    NODE_ADDRESS_ACCUMULATIVE_ID,
    NODE_ADDRESS_FILTER_NO_K8S,
    NODE_ADDRESSES,
    CertSANSpec,
    MachineTypeSpec,
    PEMCertificate,
    PEMCertificateAndKey,
    PEMKey,
    filtered_node_address_id,
)
from ichor.machined.resources._k8s import (
    APISERVER_CONFIGS,
    APISERVER_ID,
    CERT_SAN_K8S_ID,
    K8S_DYNAMIC_CERTS,
    K8S_DYNAMIC_CERTS_ID,
    K8S_ROOT_ID,
    K8S_ROOT_SECRETS,
    K8S_SECRETS,
    K8S_SECRETS_ID,
    KubernetesDynamicCertsSpec,
    KubernetesRootSpec,
    KubernetesSecretsSpec,
)
from ichor.machinery import pki
from ichor.machinery.config._models import Config
from ichor.machinery.constants import DEFAULT_SERVICE_SUBNET
from ichor.machinery.errors import PKIError
from ichor.machinery.kubeconfig import kubeconfig_text

_SAN_ADDRESSES = filtered_node_address_id(NODE_ADDRESS_ACCUMULATIVE_ID, NODE_ADDRESS_FILTER_NO_K8S)
"""Every address the node has had, but the CNI's (Talos's ``accumulative-no-k8s``)."""

__all__ = [
    "DEFAULT_DNS_DOMAIN",
    "k8s_cert_san_controller",
    "k8s_dynamic_certs_controller",
    "k8s_root_controller",
    "k8s_secrets_controller",
]

DEFAULT_DNS_DOMAIN = "cluster.local"
CERT_TTL = timedelta(days=365)
"""Talos issues the dynamic certificates and kubeconfig certificates for one year."""


def _pem(b64: str | None, key: str) -> bytes:
    if not b64:
        return b""
    try:
        return base64.b64decode(b64.strip(), validate=True)
    except ValueError:
        raise WaitingFor(
            "Kubernetes secrets", f"{key} is not valid base64: fix {key} in the machine config"
        ) from None


def first_service_ips(subnets: list[str]) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...]:
    """The first address of every service subnet (the ``kubernetes`` Service's ClusterIP)."""
    out = []
    for index, subnet in enumerate(subnets):
        try:
            net = ipaddress.ip_network(subnet.strip(), strict=False)
        except ValueError:
            raise WaitingFor(
                "Kubernetes secrets",
                f"cluster.network.serviceSubnets[{index}] {subnet!r} is not a CIDR: use e.g. {DEFAULT_SERVICE_SUBNET}",
            ) from None
        out.append(net.network_address + 1)
    return tuple(out)


def _root_spec(config: Config) -> KubernetesRootSpec:
    cluster = config.cluster
    if cluster is None or cluster.ca is None or not cluster.ca.crt:
        raise WaitingFor(
            "Kubernetes secrets", "cluster.ca is not set: a control plane needs the Kubernetes CA"
        )
    if not cluster.ca.key:
        raise WaitingFor(
            "Kubernetes secrets",
            "cluster.ca.key is not set: a control plane signs with the Kubernetes CA key",
        )
    endpoint = cluster.control_plane.endpoint if cluster.control_plane is not None else None
    if not endpoint or not urlsplit(endpoint).hostname:
        raise WaitingFor(
            "Kubernetes secrets", "cluster.controlPlane.endpoint has no host: set https://<host>:6443"
        )
    network = cluster.network
    subnets = list(network.service_subnets or []) if network is not None else []
    port = cluster.control_plane.local_api_server_port if cluster.control_plane is not None else None
    token = (cluster.token or "").split(".", 1)
    issuing = PEMCertificateAndKey(
        _pem(cluster.ca.crt, "cluster.ca.crt"), _pem(cluster.ca.key, "cluster.ca.key")
    )
    accepted = tuple(
        PEMCertificate(_pem(c.crt, f"cluster.acceptedCAs[{i}].crt"))
        for i, c in enumerate(cluster.accepted_cas or [])
        if c.crt
    )
    aggregator = cluster.aggregator_ca
    api_server = cluster.api_server
    return KubernetesRootSpec(
        name=cluster.cluster_name or "", endpoint=endpoint, local_endpoint=f"https://localhost:{port or 6443}",
        cert_sans=tuple(api_server.cert_sans or []) if api_server is not None else (),
        api_server_ips=first_service_ips(subnets or [DEFAULT_SERVICE_SUBNET]),
        dns_domain=(network.dns_domain if network is not None else None) or DEFAULT_DNS_DOMAIN,
        issuing_ca=issuing, accepted_cas=(PEMCertificate(issuing.crt), *accepted),
        aggregator_ca=PEMCertificateAndKey(
            _pem(aggregator.crt, "cluster.aggregatorCA.crt"), _pem(aggregator.key, "cluster.aggregatorCA.key")
        ) if aggregator is not None and aggregator.crt else None,
        service_account=PEMKey(_pem(cluster.service_account.key, "cluster.serviceAccount.key"))
        if cluster.service_account else None,
        aescbc_encryption_secret=cluster.aescbc_encryption_secret or "",
        secretbox_encryption_secret=cluster.secretbox_encryption_secret or "",
        bootstrap_token_id=token[0] if len(token) == 2 else "", bootstrap_token_secret=token[1] if len(token) == 2 else "",
    )  # fmt: skip


def k8s_root_controller() -> TransformController[KubernetesRootSpec]:
    def derive(ctx: ControllerContext) -> dict[str, KubernetesRootSpec]:
        config = active_config(ctx)
        machine_type = ctx.get_or_none(MACHINE_TYPES, MACHINE_TYPE_ID)
        if machine_type is None:
            raise SkipReconcile
        if machine_type.spec is MachineTypeSpec.WORKER:
            return {}
        return {K8S_ROOT_ID: _root_spec(config)}

    return TransformController(
        "secrets.KubernetesRootController", inputs=[ACTIVE_CONFIG, Input(MACHINE_TYPES, id=MACHINE_TYPE_ID)],
        output=K8S_ROOT_SECRETS, map_inputs=derive,
    )  # fmt: skip


def k8s_cert_san_controller() -> TransformController[CertSANSpec]:
    def derive(ctx: ControllerContext) -> dict[str, CertSANSpec]:
        root = ctx.get_or_none(K8S_ROOT_SECRETS, K8S_ROOT_ID)
        host = ctx.get_or_none(HOSTNAME_STATUSES, HOSTNAME_STATUS_ID)
        addresses = ctx.get_or_none(NODE_ADDRESSES, _SAN_ADDRESSES)
        if root is None:
            return {}
        if host is None or addresses is None:
            raise SkipReconcile
        spec = root.spec
        fqdn = ".".join(p for p in (host.spec.hostname, host.spec.domainname) if p)
        endpoint_host = urlsplit(spec.endpoint).hostname or ""
        values = [
            endpoint_host, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
            f"kubernetes.default.svc.{spec.dns_domain}", "localhost", "127.0.0.1",
            *(str(ip) for ip in spec.api_server_ips), host.spec.hostname, fqdn,
            *(str(a.ip) for a in addresses.spec.addresses), *spec.cert_sans,
        ]  # fmt: skip
        ips: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
        names: set[str] = set()
        for value in filter(None, values):
            try:
                ips.add(ipaddress.ip_address(value))
            except ValueError:
                names.add(value)
        return {
            CERT_SAN_K8S_ID: CertSANSpec(
                ips=tuple(sorted(ips, key=str)), dns_names=tuple(sorted(names)), fqdn=fqdn
            )
        }

    return TransformController(
        "secrets.KubernetesCertSANController",
        inputs=[Input(K8S_ROOT_SECRETS, id=K8S_ROOT_ID), Input(HOSTNAME_STATUSES, id=HOSTNAME_STATUS_ID),
                Input(NODE_ADDRESSES, id=_SAN_ADDRESSES)],
        output=CERT_SANS, map_inputs=derive, output_kind=OutputKind.SHARED,
    )  # fmt: skip


def _pair(cert: pki.CertKey) -> PEMCertificateAndKey:
    return PEMCertificateAndKey(cert.crt, cert.key)


def issue_dynamic_certs(
    root: KubernetesRootSpec, sans: CertSANSpec, etcd_ca: pki.CertKey
) -> KubernetesDynamicCertsSpec:
    """The apiserver's certificates: CPU work, run it in a thread."""
    assert root.issuing_ca is not None and root.aggregator_ca is not None
    ca = pki.CertKey(root.issuing_ca.crt, root.issuing_ca.key)
    serving = pki.new_keypair(
        ca, common_name="kube-apiserver", ttl=CERT_TTL, server=True, client=False,
        dns_names=list(sans.dns_names), ip_addresses=[str(ip) for ip in sans.ips],
    )  # fmt: skip
    kubelet_client = pki.new_keypair(
        ca, organizations=["system:masters"], common_name="apiserver-kubelet-client", ttl=CERT_TTL,
        server=False, client=True,
    )  # fmt: skip
    front_proxy = pki.new_keypair(
        pki.CertKey(root.aggregator_ca.crt, root.aggregator_ca.key), common_name="front-proxy-client",
        ttl=CERT_TTL, server=False, client=True,
    )  # fmt: skip
    etcd_client = pki.new_keypair(
        etcd_ca, common_name="kube-apiserver", ttl=CERT_TTL, server=False, client=True
    )
    return KubernetesDynamicCertsSpec(
        api_server=_pair(serving), api_server_kubelet_client=_pair(kubelet_client),
        front_proxy=_pair(front_proxy), etcd_api_server=_pair(etcd_client),
    )  # fmt: skip


def k8s_dynamic_certs_controller() -> TransformController[KubernetesDynamicCertsSpec]:
    async def derive(ctx: ControllerContext) -> dict[str, KubernetesDynamicCertsSpec]:
        root = ctx.get_or_none(K8S_ROOT_SECRETS, K8S_ROOT_ID)
        if root is None:
            return {}
        sans = ctx.get_or_none(CERT_SANS, CERT_SAN_K8S_ID)
        etcd = ctx.get_or_none(ETCD_ROOT_SECRETS, ETCD_ROOT_ID)
        if sans is None or etcd is None:
            raise SkipReconcile
        if root.spec.aggregator_ca is None or not root.spec.aggregator_ca.key:
            raise WaitingFor(
                "Kubernetes certificates",
                "cluster.aggregatorCA is not set: the front proxy certificate needs it",
            )
        etcd_ca = etcd.spec.etcd_ca
        if etcd_ca is None or not etcd_ca.key:
            raise WaitingFor(
                "Kubernetes certificates",
                "cluster.etcd.ca has no key: the apiserver's etcd client certificate needs it",
            )
        try:
            certs = await asyncio.to_thread(
                issue_dynamic_certs, root.spec, sans.spec, pki.CertKey(etcd_ca.crt, etcd_ca.key)
            )
        except PKIError as err:
            raise WaitingFor(
                "Kubernetes certificates", f"{err}: check cluster.ca and cluster.aggregatorCA"
            ) from None
        return {K8S_DYNAMIC_CERTS_ID: certs}

    return TransformController(
        "secrets.KubernetesDynamicCertsController",
        inputs=[Input(K8S_ROOT_SECRETS, id=K8S_ROOT_ID), Input(CERT_SANS, id=CERT_SAN_K8S_ID),
                Input(ETCD_ROOT_SECRETS, id=ETCD_ROOT_ID)],
        output=K8S_DYNAMIC_CERTS, map_inputs=derive,
    )  # fmt: skip


def _kubeconfig(root: KubernetesRootSpec, server: str, user: str, organizations: list[str]) -> str:
    assert root.issuing_ca is not None
    pair = pki.new_keypair(
        pki.CertKey(root.issuing_ca.crt, root.issuing_ca.key), organizations=organizations, common_name=user,
        ttl=CERT_TTL, server=False, client=True,
    )  # fmt: skip
    ca = b"".join(c.crt for c in root.accepted_cas)
    return kubeconfig_text(cluster=root.name, server=server, ca=ca, user=user, crt=pair.crt, key=pair.key)


def issue_kubeconfigs(root: KubernetesRootSpec, local_port: int) -> KubernetesSecretsSpec:
    server = f"https://localhost:{local_port}"
    return KubernetesSecretsSpec(
        controller_manager_kubeconfig=_kubeconfig(root, server, "system:kube-controller-manager", []),
        scheduler_kubeconfig=_kubeconfig(root, server, "system:kube-scheduler", []),
        localhost_admin_kubeconfig=_kubeconfig(root, server, "admin", ["system:masters"]),
    )


def k8s_secrets_controller() -> TransformController[KubernetesSecretsSpec]:
    async def derive(ctx: ControllerContext) -> dict[str, KubernetesSecretsSpec]:
        root = ctx.get_or_none(K8S_ROOT_SECRETS, K8S_ROOT_ID)
        if root is None:
            return {}
        api = ctx.get_or_none(APISERVER_CONFIGS, APISERVER_ID)
        if api is None:
            raise SkipReconcile
        return {K8S_SECRETS_ID: await asyncio.to_thread(issue_kubeconfigs, root.spec, api.spec.local_port)}

    return TransformController(
        "secrets.KubernetesController",
        inputs=[Input(K8S_ROOT_SECRETS, id=K8S_ROOT_ID), Input(APISERVER_CONFIGS, id=APISERVER_ID)],
        output=K8S_SECRETS, map_inputs=derive,
    )  # fmt: skip
