"""What the kubelet runs with, rendered as Talos 1.7 renders it: args, ``/etc/kubernetes/kubelet.yaml``
(a ``KubeletConfiguration``) and ``/etc/kubernetes/bootstrap-kubeconfig``. Pure functions.

Args (sorted ``--key=value``, as Talos's argsbuilder prints them): ``--config``, ``--cert-dir``,
``--hostname-override``, ``--node-ip`` (unless ``extraArgs`` sets it), ``--bootstrap-kubeconfig`` and
``--kubeconfig`` (unless ``skipNodeRegistration``), ``--cloud-provider=external`` with an external
cloud provider. ``machine.kubelet.extraArgs`` override any other flag; the flags Talos owns
(:data:`DENIED_ARGS`) are refused. With ``credentialProviderConfig``,
``--image-credential-provider-config`` and ``--image-credential-provider-bin-dir``
(:mod:`.kubelet_credentials`) come last and override ``extraArgs`` as Talos's do. No ``--node-labels``: Talos 1.7 applies
``node-role.kubernetes.io/control-plane`` through NodeLabelSpecs after registration (the
NodeRestriction admission plugin forbids a kubelet to set ``node-role`` labels on itself).

``container_platform`` (a node sharing the host's kernel, Ichor's ``container`` platform):

* ``protectKernelDefaults: false`` as Talos sets it in container mode: kubelet must not fail on
  kernel settings it does not own;
* feature gate ``KubeletInUserNamespace``: kubelet then ignores failures to write sysctls
  (``vm.overcommit_memory``, ``kernel.panic``, ...), which the node's read-only ``/proc/sys`` makes
  fail, so no host-global setting is ever changed;
* ``cgroupDriver: cgroupfs`` (no systemd in a node) with Talos's ``cgroupRoot: /``,
  ``systemCgroups``/``kubeletCgroups``: inside the node's cgroup namespace ``/`` is the node's own
  subtree, so every pod cgroup stays under it;
* ``localStorageCapacityIsolation: false``: the node's root is a directory of the host's file system,
  whose capacity kubelet would otherwise account as the node's own.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from ichor.machined.resources._kubelet import KubeletConfigSpec
from ichor.machinery import yamlio
from ichor.machinery.errors import ConfigError

from .kubelet_credentials import credential_provider_args

__all__ = [
    "BOOTSTRAP_KUBECONFIG",
    "CA_FILE",
    "CLIENT_CERTIFICATE",
    "CONFIG_FILE",
    "DENIED_ARGS",
    "PROTECTED_CONFIG_FIELDS",
    "STATIC_POD_URL_CHECK",
    "bootstrap_kubeconfig",
    "cluster_dns",
    "kubelet_args",
    "kubelet_configuration",
]

CONFIG_FILE = "/etc/kubernetes/kubelet.yaml"
BOOTSTRAP_KUBECONFIG = "/etc/kubernetes/bootstrap-kubeconfig"
KUBECONFIG = "/etc/kubernetes/kubeconfig-kubelet"
CA_FILE = "/etc/kubernetes/pki/ca.crt"
PKI_DIR = "/var/lib/kubelet/pki"
CLIENT_CERTIFICATE = f"{PKI_DIR}/kubelet-client-current.pem"
"""The kubelet's client certificate and key, which it writes once its bootstrap CSR is signed (a
symlink to its newest ``kubelet-client-<time>.pem``)."""
CRI_ENDPOINT = "unix:///run/containerd/containerd.sock"
RESOLV_CONF = "/system/resolved/resolv.conf"
MANIFESTS_DIR = "/etc/kubernetes/manifests"
STATIC_POD_URL_CHECK = "1s"
"""``httpCheckFrequency``: how often the kubelet fetches ``staticPodURL`` (Kubernetes's default, which
Talos keeps, is 20 s). The list is machined's loopback server and the kubelet drops a fetch whose bytes
did not change, so a fetch a second costs a local GET; at 20 s a control plane whose pods were rendered
just after the kubelet's first fetch started its API server 20 s late, and each later change (an
upgrade, the mirror pods' nudge) waited up to 20 s. ``machine.kubelet.extraConfig`` may set it back."""

DENIED_ARGS = (
    "bootstrap-kubeconfig", "kubeconfig", "container-runtime", "container-runtime-endpoint", "config", "cert-dir",
)  # fmt: skip
"""Flags Talos sets and ``extraArgs`` may not (argsbuilder ``MergeDenied``)."""

PROTECTED_CONFIG_FIELDS = (
    "apiVersion", "kind", "authentication", "authorization", "cgroupRoot", "cgroupsPerQOS", "kubeletCgroups",
    "systemCgroups", "port", "staticPodURL", "containerRuntimeEndpoint",
)  # fmt: skip
"""``extraConfig`` keys refused: authentication and authorization, cgroups, ports (the schema's words)
and what ties kubelet to the node (static pod URL, CRI socket)."""

_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(
        ("failSwapOn", "protectKernelDefaults", "seccompDefault", "serializeImagePulls", "rotateCertificates",
         "serverTLSBootstrap", "localStorageCapacityIsolation", "registerNode", "enableDebuggingHandlers"),
        (bool,),
    ),
    **dict.fromkeys(
        ("maxPods", "podPidsLimit", "oomScoreAdj", "imageGCHighThresholdPercent", "imageGCLowThresholdPercent",
         "maxParallelImagePulls", "containerLogMaxFiles", "healthzPort", "kubeAPIQPS", "kubeAPIBurst"),
        (int,),
    ),
    **dict.fromkeys(
        ("shutdownGracePeriod", "shutdownGracePeriodCriticalPods", "streamingConnectionIdleTimeout",
         "cgroupDriver", "clusterDomain", "resolvConf", "cpuManagerPolicy", "memoryManagerPolicy",
         "topologyManagerPolicy", "containerLogMaxSize", "tlsMinVersion", "address", "healthzBindAddress",
         "staticPodPath", "imageMinimumGCAge", "httpCheckFrequency"),
        (str,),
    ),
    **dict.fromkeys(
        ("systemReserved", "kubeReserved", "evictionHard", "evictionSoft", "evictionSoftGracePeriod",
         "featureGates", "logging"),
        (dict,),
    ),
    **dict.fromkeys(("clusterDNS", "registerWithTaints", "tlsCipherSuites", "allowedUnsafeSysctls"), (list,)),
}  # fmt: skip
_TYPE_WORDS = {bool: "a boolean", int: "an integer", str: "a string", dict: "a mapping", list: "a list"}


def cluster_dns(service_subnets: Sequence[str]) -> tuple[str, ...]:
    """The 10th address of each service subnet (``10.96.0.10`` for ``10.96.0.0/12``)."""
    out: list[str] = []
    for subnet in service_subnets:
        try:
            network = ipaddress.ip_network(subnet.strip(), strict=False)
        except ValueError:
            raise ConfigError(
                f"failed to parse service CIDR {subnet!r}",
                hint="cluster.network.serviceSubnets entries are CIDRs such as 10.96.0.0/12",
            ) from None
        out.append(str(network.network_address + 10))
    return tuple(out)


def kubelet_args(config: KubeletConfigSpec, *, nodename: str, node_ips: Sequence[str]) -> tuple[str, ...]:
    """Talos's flags merged with ``machine.kubelet.extraArgs`` (which override all but :data:`DENIED_ARGS`)."""
    args: dict[str, str] = {"config": CONFIG_FILE, "cert-dir": PKI_DIR, "hostname-override": nodename}
    if not config.skip_node_registration:
        args["bootstrap-kubeconfig"] = BOOTSTRAP_KUBECONFIG
        args["kubeconfig"] = KUBECONFIG
    if config.cloud_provider_external:
        args["cloud-provider"] = "external"
    if "node-ip" not in config.extra_args and node_ips:
        args["node-ip"] = ",".join(node_ips)
    for key, value in config.extra_args.items():
        if key in DENIED_ARGS:
            raise ConfigError(
                f'extra arg "{key}" is not allowed',
                hint=f"remove {key} from machine.kubelet.extraArgs: Talos sets --{key} itself",
            )
        args[key] = value
    args.update(credential_provider_args(config.credential_provider_config))  # over extraArgs, as Talos
    return tuple(f"--{key}={args[key]}" for key in sorted(args))


def _check_extra_config(extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if key in PROTECTED_CONFIG_FIELDS:
            raise ConfigError(
                f"kubelet configuration field {key!r} cannot be overridden",
                hint=f"remove {key} from machine.kubelet.extraConfig (Talos sets it)",
            )
        expected = _TYPES.get(key)
        if expected and (not isinstance(value, expected) or (expected == (int,) and isinstance(value, bool))):
            raise ConfigError(
                f"machine.kubelet.extraConfig.{key}: expected {_TYPE_WORDS[expected[0]]}, got "
                f"{type(value).__name__} {value!r}",
                hint=f"give machine.kubelet.extraConfig.{key} as {_TYPE_WORDS[expected[0]]} "
                "(KubeletConfiguration v1beta1)",
            )


def kubelet_configuration(config: KubeletConfigSpec, *, container_platform: bool = False) -> dict[str, Any]:
    """The ``KubeletConfiguration`` (``kubelet.config.k8s.io/v1beta1``), ``extraConfig`` merged last."""
    _check_extra_config(config.extra_config)
    registered = not config.skip_node_registration
    out: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "staticPodPath": "" if config.disable_manifests_directory else MANIFESTS_DIR,
        "address": "0.0.0.0",
        "port": 10250,
        "oomScoreAdj": -450,
        "rotateCertificates": True,
        "authentication": {
            "x509": {"clientCAFile": CA_FILE},
            "webhook": {"enabled": registered},
            "anonymous": {"enabled": False},
        },
        "authorization": {"mode": "Webhook" if registered else "AlwaysAllow"},
        "clusterDomain": config.cluster_domain,
        "clusterDNS": list(config.cluster_dns),
        "serializeImagePulls": False,
        "failSwapOn": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": "/",
        "systemCgroups": "/system",
        "kubeletCgroups": "/podruntime/kubelet",
        "systemReserved": {"cpu": "50m", "memory": "192Mi", "pid": "100", "ephemeral-storage": "256Mi"},
        "logging": {"format": "json"},
        "shutdownGracePeriod": "30s",
        "shutdownGracePeriodCriticalPods": "10s",
        "streamingConnectionIdleTimeout": "5m0s",
        "tlsMinVersion": "VersionTLS13",
        "protectKernelDefaults": not container_platform,
        "seccompDefault": config.default_runtime_seccomp_profile_enabled,
        "containerRuntimeEndpoint": CRI_ENDPOINT,
        "resolvConf": RESOLV_CONF,
    }
    if config.static_pod_list_url:
        out["staticPodURL"] = config.static_pod_list_url
        out["httpCheckFrequency"] = STATIC_POD_URL_CHECK
    if not registered:
        out["registerNode"] = False
    if config.enable_fs_quota_monitoring:
        out["featureGates"] = {"LocalStorageCapacityIsolationFSQuotaMonitoring": True}
    if container_platform:
        out["featureGates"] = {**out.get("featureGates", {}), "KubeletInUserNamespace": True}
        out["localStorageCapacityIsolation"] = False
    for key, value in config.extra_config.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def bootstrap_kubeconfig(*, server: str, ca_pem: bytes, token: str) -> str:
    """The kubeconfig kubelet joins with: the bootstrap token ``<id>.<secret>`` against ``server``."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode("ascii"),
        }}],
        "users": [{"name": "kubelet", "user": {"token": token}}],
        "contexts": [{"name": "kubelet@local", "context": {"cluster": "local", "user": "kubelet"}}],
        "current-context": "kubelet@local",
    }  # fmt: skip
    return yamlio.dump_document(yamlio.from_plain(doc))
