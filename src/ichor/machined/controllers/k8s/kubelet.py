"""Area ``k8s`` (kubelet): from ``machine.kubelet`` to what the ``kubelet`` service runs, as Talos 1.7.

* ``k8s.KubeletConfigController``: MachineConfig (+ the static pod server's status) -> KubeletConfig
  ``kubelet``: image, cluster DNS (each service subnet's 10th address unless ``clusterDNS`` is set),
  cluster domain, extra args/mounts/config, and the switches;
* ``k8s.NodeIPConfigController``: MachineConfig + VIP operators -> NodeIPConfig ``kubelet``:
  ``nodeIP.validSubnets`` split into valid and ``!``-excluded (default: any address of each service
  subnet's family); pod and service subnets and shared IPs (VIPs) are always excluded;
* ``k8s.NodeIPController``: NodeIPConfig + routed NodeAddresses -> NodeIP ``kubelet``: the first
  match of each family (:func:`~ichor.machinery.subnets.pick_node_ips`); no match is a wait naming
  ``machine.kubelet.nodeIP.validSubnets``;
* ``k8s.NodenameController``: MachineConfig + HostnameStatus -> Nodename ``nodename`` (the hostname,
  or the FQDN with ``registerWithFQDN``), lower-cased as Kubernetes needs;
* ``k8s.KubeletSpecController``: KubeletConfig + Nodename + NodeIP -> KubeletSpec ``kubelet`` (args
  and ``KubeletConfiguration`` from :mod:`.kubelet_render`). A refused ``extraArgs``/``extraConfig``
  is a wait naming the key; the previous spec stays.
* ``k8s.KubeletServiceController``: KubeletSpec + MachineConfig -> ``/etc/kubernetes/kubelet.yaml``,
  ``bootstrap-kubeconfig``, ``pki/ca.crt`` and, with ``credentialProviderConfig``,
  ``kubelet-credentialproviderconfig.yaml`` (removed without one) in the node (a file is rewritten
  only when it changes), then ``on_change()`` (the node restarts a running ``kubelet``), also
  when the KubeletSpec itself changed (a new image or args: ``upgrade-k8s``), as Talos. The CA the kubelet trusts is ``cluster.ca`` plus ``cluster.acceptedCAs``
  (:func:`kubelet_ca_bundle`); as Talos's ``refreshKubeletCerts``/``updateKubeconfig``, a kubelet
  client certificate no CA of that bundle signed is removed with the kubelet's kubeconfig (the
  kubelet joins again with its bootstrap token), and otherwise the kubeconfig's CA and server follow
  the config: the steps of ``talosctl rotate-ca`` for Kubernetes. Talos also drops a certificate
  issued for another node name; Ichor does not (yet).
"""

from __future__ import annotations

import base64
import ipaddress
import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config, machine_type_of
from ichor.machined.cosi import (
    Controller,
    ControllerContext,
    Input,
    Output,
    Phase,
    ResourceType,
    SkipReconcile,
    TransformController,
    WaitingFor,
)
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import (
    ACTIVE_CONFIG_ID,
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    MACHINE_CONFIGS,
    NODE_ADDRESS_FILTER_NO_K8S,
    NODE_ADDRESS_ROUTED_ID,
    NODE_ADDRESSES,
    OPERATOR_SPECS,
    SERVICES,
    filtered_node_address_id,
)
from ichor.machined.resources._kubelet import (
    KUBELET_CONFIGS,
    KUBELET_ID,
    KUBELET_SPECS,
    NODE_IP_CONFIGS,
    NODE_IPS,
    NODENAME_ID,
    NODENAMES,
    KubeletConfigSpec,
    KubeletMount,
    KubeletSpecSpec,
    NodeIPConfigSpec,
    NodeIPSpec,
    NodenameSpec,
)
from ichor.machinery import constants, pki, subnets, yamlio
from ichor.machinery.config import Config
from ichor.machinery.errors import ConfigError, MachineryError, SubnetError
from ichor.machinery.files import write_atomic

from . import kubelet_credentials as credentials
from . import kubelet_render as render

_NODE_IP_ADDRESSES = filtered_node_address_id(NODE_ADDRESS_ROUTED_ID, NODE_ADDRESS_FILTER_NO_K8S)

__all__ = [
    "KubeletServiceController",
    "kubelet_ca_bundle",
    "kubelet_config_controller",
    "kubelet_controllers",
    "kubelet_spec_controller",
    "node_ip_config_controller",
    "node_ip_controller",
    "nodename_controller",
]

VALID_SUBNETS_KEY = "machine.kubelet.nodeIP.validSubnets"
DEFAULT_IMAGE = f"{constants.KUBELET_IMAGE}:v{constants.DEFAULT_KUBERNETES_VERSION}"
_RETRY_AFTER = 5.0
CERT_POLL = 1.0
"""Seconds between looks for the kubelet's client certificate while a kubelet runs without one."""


def _network_subnets(config: Config) -> tuple[list[str], list[str]]:
    network = config.cluster.network if config.cluster is not None else None
    pods = list(network.pod_subnets or []) if network is not None else []
    services = list(network.service_subnets or []) if network is not None else []
    return pods or [constants.DEFAULT_POD_SUBNET], services or [constants.DEFAULT_SERVICE_SUBNET]


def kubelet_config_controller(
    static_pod_status: ResourceType[Any] | None = None,
) -> TransformController[KubeletConfigSpec]:
    """``static_pod_status``: the static pod server's status type (its spec has ``url``); without it
    kubelet gets no ``staticPodURL``."""
    inputs = [ACTIVE_CONFIG] + ([Input(static_pod_status)] if static_pod_status is not None else [])

    def derive(ctx: ControllerContext) -> dict[str, KubeletConfigSpec]:
        config = active_config(ctx)
        kubelet = config.machine.kubelet if config.machine is not None else None
        cluster = config.cluster
        _, services = _network_subnets(config)
        try:
            dns = (
                tuple(kubelet.cluster_dns)
                if kubelet is not None and kubelet.cluster_dns
                else render.cluster_dns(services)
            )
        except ConfigError as err:
            raise WaitingFor("kubelet config", f"{err} ({err.hint})") from None
        url = ""
        if static_pod_status is not None:
            url = next((str(getattr(r.spec, "url", "")) for r in ctx.list(static_pod_status)), "")
        mounts = tuple(
            KubeletMount(destination=m.destination or "", type=m.type or "bind", source=m.source or "",
                         options=tuple(m.options or ()))
            for m in (kubelet.extra_mounts or [] if kubelet is not None else [])
        )  # fmt: skip
        network = cluster.network if cluster is not None else None
        cloud = cluster.external_cloud_provider if cluster is not None else None
        features = config.machine.features if config.machine is not None else None
        return {KUBELET_ID: KubeletConfigSpec(
            image=(kubelet.image if kubelet is not None else None) or DEFAULT_IMAGE,
            cluster_dns=dns,
            cluster_domain=(network.dns_domain if network is not None else None) or constants.DEFAULT_DNS_DOMAIN,
            extra_args={str(k): str(v) for k, v in ((kubelet.extra_args or {}) if kubelet is not None else {}).items()},
            extra_mounts=mounts,
            extra_config=dict(kubelet.extra_config or {}) if kubelet is not None else {},
            cloud_provider_external=bool(cloud is not None and cloud.enabled),
            default_runtime_seccomp_profile_enabled=bool(kubelet is not None and kubelet.default_runtime_seccomp_profile_enabled),
            skip_node_registration=bool(kubelet is not None and kubelet.skip_node_registration),
            static_pod_list_url=url,
            disable_manifests_directory=bool(kubelet is not None and kubelet.disable_manifests_directory),
            enable_fs_quota_monitoring=bool(features is not None and features.disk_quota_support),
            allow_scheduling_on_control_planes=bool(cluster is not None and cluster.allow_scheduling_on_control_planes),
            credential_provider_config=dict(kubelet.credential_provider_config or {}) if kubelet is not None else {},
        )}  # fmt: skip

    return TransformController(
        "k8s.KubeletConfigController", inputs=inputs, output=KUBELET_CONFIGS, map_inputs=derive
    )


def node_ip_config_controller() -> TransformController[NodeIPConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, NodeIPConfigSpec]:
        config = active_config(ctx)
        kubelet = config.machine.kubelet if config.machine is not None else None
        node_ip = kubelet.node_ip if kubelet is not None else None
        entries = [s.strip() for s in (node_ip.valid_subnets or [])] if node_ip is not None else []
        valid = [s for s in entries if not s.startswith("!")]
        exclude = [s[1:] for s in entries if s.startswith("!")]
        pods, services = _network_subnets(config)
        if not valid:
            families = {
                ipaddress.ip_network(s.strip(), strict=False).version for s in services if _is_cidr(s)
            }
            valid = [
                net for family, net in ((4, "0.0.0.0/0"), (6, "::/0")) if family in families or not families
            ]
        shared = [f"{r.spec.vip.ip}/{32 if ':' not in str(r.spec.vip.ip) else 128}"
                  for r in ctx.list(OPERATOR_SPECS) if r.spec.operator == "vip"]  # fmt: skip
        exclude += [s.strip() for s in [*pods, *services] if _is_cidr(s)] + shared
        return {
            KUBELET_ID: NodeIPConfigSpec(
                valid_subnets=tuple(valid), exclude_subnets=tuple(dict.fromkeys(exclude))
            )
        }

    return TransformController(
        "k8s.NodeIPConfigController", inputs=[ACTIVE_CONFIG, Input(OPERATOR_SPECS)], output=NODE_IP_CONFIGS,
        map_inputs=derive,
    )  # fmt: skip


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return False
    return True


def node_ip_controller() -> TransformController[NodeIPSpec]:
    def derive(ctx: ControllerContext) -> dict[str, NodeIPSpec]:
        config = ctx.get_or_none(NODE_IP_CONFIGS, KUBELET_ID)
        addresses = ctx.get_or_none(NODE_ADDRESSES, _NODE_IP_ADDRESSES)
        if config is None or addresses is None:
            raise SkipReconcile
        valid = config.spec.valid_subnets
        families = tuple(
            sorted({ipaddress.ip_network(s, strict=False).version for s in valid if _is_cidr(s)})
        )
        wanted = [*valid, *(f"!{s}" for s in config.spec.exclude_subnets)]
        try:
            picked = subnets.pick_node_ips(
                [str(p.ip) for p in addresses.spec.addresses], wanted, setting=VALID_SUBNETS_KEY,
                families=families or (4, 6),
            )  # fmt: skip
        except SubnetError as err:
            raise WaitingFor("node IP", f"{err} ({err.hint})" if err.hint else str(err)) from None
        return {KUBELET_ID: NodeIPSpec(addresses=tuple(picked))}

    return TransformController(
        "k8s.NodeIPController",
        inputs=[Input(NODE_IP_CONFIGS, id=KUBELET_ID), Input(NODE_ADDRESSES, id=_NODE_IP_ADDRESSES)],
        output=NODE_IPS, map_inputs=derive,
    )  # fmt: skip


def nodename_controller() -> TransformController[NodenameSpec]:
    def derive(ctx: ControllerContext) -> dict[str, NodenameSpec]:
        config = active_config(ctx)
        hostname = ctx.get_or_none(HOSTNAME_STATUSES, HOSTNAME_STATUS_ID)
        if hostname is None:
            raise SkipReconcile
        kubelet = config.machine.kubelet if config.machine is not None else None
        fqdn = bool(kubelet is not None and kubelet.register_with_fqdn)
        name = hostname.spec.fqdn if fqdn else hostname.spec.hostname
        return {NODENAME_ID: NodenameSpec(
            nodename=name.lower(), hostname_version=str(hostname.metadata.version),
            skip_node_registration=bool(kubelet is not None and kubelet.skip_node_registration),
        )}  # fmt: skip

    return TransformController(
        "k8s.NodenameController", inputs=[ACTIVE_CONFIG, Input(HOSTNAME_STATUSES, id=HOSTNAME_STATUS_ID)],
        output=NODENAMES, map_inputs=derive,
    )  # fmt: skip


def kubelet_spec_controller(*, container_platform: bool = False) -> TransformController[KubeletSpecSpec]:
    """``container_platform``: the node shares the host's kernel (see :mod:`.kubelet_render`)."""

    def derive(ctx: ControllerContext) -> dict[str, KubeletSpecSpec]:
        config = ctx.get_or_none(KUBELET_CONFIGS, KUBELET_ID)
        nodename = ctx.get_or_none(NODENAMES, NODENAME_ID)
        if config is None or nodename is None:
            raise SkipReconcile
        node_ips: tuple[str, ...] = ()
        if "node-ip" not in config.spec.extra_args:
            found = ctx.get_or_none(NODE_IPS, KUBELET_ID)
            if found is None:
                raise SkipReconcile
            node_ips = found.spec.addresses
        try:
            args = render.kubelet_args(config.spec, nodename=nodename.spec.nodename, node_ips=node_ips)
            kubelet_yaml = render.kubelet_configuration(config.spec, container_platform=container_platform)
            credentials.typed_credential_provider_config(config.spec.credential_provider_config)
        except ConfigError as err:
            raise WaitingFor("kubelet spec", f"{err} ({err.hint})" if err.hint else str(err)) from None
        return {KUBELET_ID: KubeletSpecSpec(
            image=config.spec.image, args=args, extra_mounts=config.spec.extra_mounts,
            expected_nodename=nodename.spec.nodename, config=kubelet_yaml,
            credential_provider_config=config.spec.credential_provider_config,
        )}  # fmt: skip

    return TransformController(
        "k8s.KubeletSpecController",
        inputs=[Input(KUBELET_CONFIGS, id=KUBELET_ID), Input(NODENAMES, id=NODENAME_ID), Input(NODE_IPS, id=KUBELET_ID)],
        output=KUBELET_SPECS, map_inputs=derive,
    )  # fmt: skip


def kubelet_server(config: Config) -> str:
    """The API server kubelet bootstraps against: KubePrism (``https://127.0.0.1:<port>``) when
    ``machine.features.kubePrism.enabled``, else ``localhost:<localAPIServerPort>`` on a control
    plane and ``cluster.controlPlane.endpoint`` on a worker."""
    features = config.machine.features if config.machine is not None else None
    prism = features.kube_prism if features is not None else None
    if prism is not None and prism.enabled:
        return f"https://127.0.0.1:{prism.port or constants.KUBEPRISM_PORT}"
    plane = config.cluster.control_plane if config.cluster is not None else None
    if machine_type_of(config).is_control_plane:
        port = (plane.local_api_server_port if plane is not None else None) or constants.KUBE_APISERVER_PORT
        return f"https://localhost:{port}"
    if plane is None or not plane.endpoint:
        raise ConfigError(
            "the cluster has no control plane endpoint",
            hint="set cluster.controlPlane.endpoint (https://<address>:6443)",
        )
    return str(plane.endpoint)


def kubelet_ca_bundle(config: Config) -> bytes:
    """The CAs the kubelet trusts (its ``pki/ca.crt``, its kubeconfigs' CA): ``cluster.ca`` then
    every ``cluster.acceptedCAs`` (Talos's ``secrets.Kubelet`` AcceptedCAs), so that during a CA
    rotation (``talosctl rotate-ca``) certificates from the old and the new CA are both good."""
    cluster = config.cluster
    if cluster is None or cluster.ca is None or not cluster.ca.crt:
        raise ConfigError(
            "the machine config has no Kubernetes CA", hint="set cluster.ca.crt (talosctl gen config)"
        )
    bundle = [pki.CertKey.from_b64(cluster.ca.crt, "", what="cluster.ca").crt]
    for index, accepted in enumerate(cluster.accepted_cas or []):
        if accepted.crt:
            bundle.append(pki.CertKey.from_b64(accepted.crt, "", what=f"cluster.acceptedCAs[{index}]").crt)
    return b"".join(crt if crt.endswith(b"\n") else crt + b"\n" for crt in bundle)


def kubelet_files(spec: KubeletSpecSpec, config: Config) -> dict[str, tuple[str | bytes, int]]:
    """Each file the kubelet reads (Talos path -> content, mode); the credential provider config
    only when one is set (:data:`OPTIONAL_FILES`: removed otherwise)."""
    cluster = config.cluster
    if cluster is None or cluster.ca is None or not cluster.ca.crt:
        raise ConfigError(
            "the machine config has no Kubernetes CA", hint="set cluster.ca.crt (talosctl gen config)"
        )
    ca_pem = kubelet_ca_bundle(config)
    files: dict[str, tuple[str | bytes, int]] = {
        render.CONFIG_FILE: (yamlio.dump_document(yamlio.from_plain(spec.config)), 0o600),
        render.CA_FILE: (ca_pem, 0o400),
    }
    if spec.credential_provider_config:
        text = credentials.render_credential_provider_config(spec.credential_provider_config)
        files[credentials.CONFIG_FILE] = (text, 0o600)
    if spec.config.get("registerNode", True) is not False:
        if not cluster.token:
            raise ConfigError(
                "the machine config has no bootstrap token", hint="set cluster.token (talosctl gen config)"
            )
        server = kubelet_server(config)
        files[render.BOOTSTRAP_KUBECONFIG] = (
            render.bootstrap_kubeconfig(server=server, ca_pem=ca_pem, token=str(cluster.token)),
            0o600,
        )
    return files


OPTIONAL_FILES = (credentials.CONFIG_FILE,)
"""Files :func:`kubelet_files` writes only for some specs: removed from the node when it does not."""


class KubeletServiceController(Controller):
    """Writes the kubelet's files into the node from KubeletSpec and the config; calls ``on_change``
    after a pass that changed any of them (the node restarts a running kubelet).

    Not Talos: it also calls ``on_change`` once when a kubelet that started without a client
    certificate (a node joining: its bootstrap CSR waits for the API server and the controller
    manager) gets one, looked for every :data:`CERT_POLL` seconds. That kubelet's Node and Pod
    informers listed with no credentials and were refused until then, and client-go's reflector
    backs off up to 30 s: it registered its Node up to 7 s after the certificate (its registration
    retries every 7 s by then), saw the DaemonSet pods (flannel, so the node's Ready) 10-26 s
    late, and made the static pods' mirror pods late. Restarted, it lists at once."""

    name = "k8s.KubeletServiceController"
    inputs = (Input(KUBELET_SPECS, id=KUBELET_ID), ACTIVE_CONFIG, Input(SERVICES, id="kubelet"))
    outputs: tuple[Output, ...] = ()
    writes = (
        f"({render.CONFIG_FILE}, {render.BOOTSTRAP_KUBECONFIG}, {render.CA_FILE}, {credentials.CONFIG_FILE}, "
        f"{render.KUBECONFIG}'s CA, {render.PKI_DIR} in the node)"
    )

    def __init__(self, layout: Layout, on_change: Callable[[], Awaitable[None]] | None = None) -> None:
        self._layout = layout
        self._on_change = on_change
        self._spec: KubeletSpecSpec | None = None
        """The KubeletSpec of the last pass: the one a running kubelet was started from."""
        self._joining = False
        """A running kubelet was seen without a client certificate (see the class doc)."""

    async def run(self, ctx: ControllerContext) -> None:
        retry: float | None = None
        while True:
            await ctx.changed(timeout=retry)
            spec = ctx.get_or_none(KUBELET_SPECS, KUBELET_ID)
            resource = ctx.get_or_none(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
            config = resource.spec.v1alpha1 if resource is not None else None
            if spec is None or config is None or spec.metadata.phase is not Phase.RUNNING:
                continue
            problems: list[str] = []
            bootstrap = False  # the kubelet joins with a bootstrap token (it registers a Node)
            # As Talos, a new spec (image, args, mounts: ``upgrade-k8s``, ``machine.kubelet.*``)
            # restarts the kubelet, which reads its spec when it starts.
            changed = self._spec is not None and self._spec != spec.spec
            self._spec = spec.spec
            try:
                files = kubelet_files(spec.spec, config)
                for path, (content, mode) in files.items():
                    changed |= self._write(path, content, mode)
                for path in OPTIONAL_FILES:
                    changed |= path not in files and self._remove(path)
                bootstrap = render.BOOTSTRAP_KUBECONFIG in files
                if bootstrap:
                    changed |= self._refresh_client(kubelet_ca_bundle(config), kubelet_server(config))
            except (MachineryError, OSError) as err:
                hint = getattr(err, "hint", None)
                problems.append(f"{err} ({hint})" if hint else str(err))
            if self._joined(ctx, bootstrap=bootstrap):
                ctx.logger.info(
                    "the kubelet has its client certificate: restarting it, so that it lists at once"
                )
                changed = True
            if changed and self._on_change is not None:
                await self._on_change()
            retry = ctx.waiting_on("kubelet files", problems, retry_after=_RETRY_AFTER)
            if self._joining:
                retry = min(retry or CERT_POLL, CERT_POLL)

    def _joined(self, ctx: ControllerContext, *, bootstrap: bool) -> bool:
        """True once when a running kubelet seen without a client certificate has one."""
        service = ctx.get_or_none(SERVICES, "kubelet")
        if not bootstrap or service is None or not service.spec.running:
            self._joining = False
            return False
        if self._read_client_certificate() is None:
            self._joining = True
            return False
        joined, self._joining = self._joining, False
        return joined

    def _read_client_certificate(self) -> bytes | None:
        """The kubelet's current client certificate file (a symlink the kubelet points at its newest
        ``kubelet-client-<time>.pem`` by its own absolute path), or None when it has none yet."""
        current = self._layout.path(render.CLIENT_CERTIFICATE)
        if current.is_symlink():
            target = os.readlink(current)
            current = self._layout.path(target) if target.startswith("/") else current.parent / target
        return current.read_bytes() if current.is_file() else None

    def _refresh_client(self, bundle: bytes, server: str) -> bool:
        """Talos's ``refreshKubeletCerts`` and ``updateKubeconfig``: a client certificate that no
        CA of ``bundle`` signed (the old CA left ``cluster.acceptedCAs`` at the end of a CA
        rotation) is removed with the kubelet's kubeconfig, so the restarted kubelet joins again
        with its bootstrap token; otherwise the kubeconfig's CA and server follow the config."""
        cert = self._read_client_certificate()
        kubeconfig = self._layout.path(render.KUBECONFIG)
        if cert is not None:
            try:
                trusted = pki.issued_by_any(cert, bundle)
            except MachineryError:
                trusted = False
            if not trusted:
                shutil.rmtree(self._layout.path(render.PKI_DIR), ignore_errors=True)
                kubeconfig.unlink(missing_ok=True)
                return True
        if not kubeconfig.is_file():
            return False
        return self._update_kubeconfig(kubeconfig, bundle, server)

    def _update_kubeconfig(self, kubeconfig: Path, bundle: bytes, server: str) -> bool:
        docs = yamlio.load_documents(kubeconfig.read_text(), source=render.KUBECONFIG)
        doc = yamlio.to_plain(docs[0]) if docs else None
        if not isinstance(doc, dict):
            return False
        contexts = {
            c.get("name"): c.get("context") or {} for c in doc.get("contexts") or [] if isinstance(c, dict)
        }
        wanted = (contexts.get(doc.get("current-context")) or {}).get("cluster")
        values = {"certificate-authority-data": base64.b64encode(bundle).decode("ascii"), "server": server}
        changed = False
        for entry in doc.get("clusters") or []:
            if not isinstance(entry, dict) or entry.get("name") != wanted:
                continue
            cluster = entry.get("cluster")
            if not isinstance(cluster, dict):
                continue
            for key, value in values.items():
                changed |= cluster.get(key) != value
                cluster[key] = value
        if changed:  # compared by value: the kubelet's own formatting of the file is no change
            write_atomic(kubeconfig, yamlio.dump_document(yamlio.from_plain(doc)).encode(), mode=0o600)
        return changed

    def _remove(self, path: str) -> bool:
        target = self._layout.path(path)
        if not target.is_file():
            return False
        target.unlink()
        return True

    def _write(self, path: str, content: str | bytes, mode: int) -> bool:
        target = self._layout.path(path)
        data = content.encode() if isinstance(content, str) else content
        if target.is_file() and target.read_bytes() == data:
            return False
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        write_atomic(target, data, mode=mode)
        return True


def kubelet_controllers(
    layout: Layout,
    *,
    static_pod_status: ResourceType[Any] | None = None,
    on_change: Callable[[], Awaitable[None]] | None = None,
) -> list[Controller]:
    """Every kubelet controller of a node, in registration order."""
    return [
        kubelet_config_controller(static_pod_status),
        node_ip_config_controller(),
        node_ip_controller(),
        nodename_controller(),
        kubelet_spec_controller(container_platform=layout.platform is Platform.CONTAINER),
        KubeletServiceController(layout, on_change),
    ]
