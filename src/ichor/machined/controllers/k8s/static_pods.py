"""Static pods: the control plane's three, and the ones of ``machine.pods``.

* ``k8s.ControlPlaneStaticPodController``: APIServerConfig + ControllerManagerConfig +
  SchedulerConfig + SecretsStatus + ConfigStatus + Services ``etcd`` -> StaticPods
  ``kube-apiserver``, ``kube-controller-manager``, ``kube-scheduler``. Nothing is rendered until
  the local etcd is healthy (the apiserver talks to it on localhost) and the files exist; the pods
  go away when etcd's service does. Unlike Talos, kube-controller-manager and kube-scheduler come
  only once the local kube-apiserver has answered ``GET /readyz`` (probed every
  ``manifest_apply.READY_POLL`` seconds with the localhost admin kubeconfig while the kubelet runs;
  once per boot, then never again): started beside it, as Talos does, they reach it before its RBAC bootstrap made their
  roles, exit ("cannot get resource configmaps"), and the kubelet starts them again only after its
  10 s crash back-off; the controller manager signs the kubelets' certificates, so every node's
  registration waited for that. Until then the controller waits for "kube-apiserver ready",
  with the reason the probe gave. Arguments are Talos 1.7's for the configured version, with
  ``extraArgs`` merged as Talos merges them: most override, a few add to the list
  (``enable-admission-plugins``, ``feature-gates``, ...), and the ones that point at Talos's files
  cannot be overridden (an error naming the key, published as a wait; the pods already rendered stay).
* ``k8s.StaticPodConfigController``: MachineConfig ``machine.pods`` -> StaticPods ``<namespace>-<name>``
  (``metadata.namespace`` defaults to ``default``); a config change adds or removes them live, and
  the kubelet, polling the static pod server every second, starts or stops the pods.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ichor import kubeapi
from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.controllers.k8s.control_plane import kubernetes_version
from ichor.machined.controllers.k8s.manifest_apply import READY_POLL, ClientFactory, admin_client
from ichor.machined.controllers.k8s.render import (
    APISERVER_CONFIG_DIR,
    APISERVER_SECRETS_DIR,
    AUDIT_LOG_DIR,
    CONTROLLER_MANAGER_SECRETS_DIR,
    RUN_USERS,
    SCHEDULER_CONFIG_DIR,
    SCHEDULER_SECRETS_DIR,
)
from ichor.machined.cosi import (
    ControllerContext,
    Input,
    OutputKind,
    Partial,
    Resource,
    ResourceType,
    SkipReconcile,
    TransformController,
    WaitingFor,
)
from ichor.machined.resources import SERVICES
from ichor.machined.resources._k8s import (
    APISERVER_CONFIGS,
    APISERVER_ID,
    CONFIG_STATUSES,
    CONTROLLER_MANAGER_CONFIGS,
    CONTROLLER_MANAGER_ID,
    K8S_SECRETS,
    K8S_SECRETS_ID,
    SCHEDULER_CONFIGS,
    SCHEDULER_ID,
    SECRETS_STATUSES,
    STATIC_PODS,
    STATIC_PODS_STATUS_ID,
    APIServerConfigSpec,
    ControllerManagerConfigSpec,
    ExtraVolume,
    ResourcesSpec,
    SchedulerConfigSpec,
    StaticPodSpec,
)

__all__ = [
    "HELD_UNTIL_READY",
    "ArgsError",
    "control_plane_static_pod_controller",
    "merge_args",
    "static_pod_config_controller",
]

SYSTEM_CRITICAL_PRIORITY = 2000000000
GO_GC_MEM_LIMIT_PERCENT = 95
_TLS12_SUITES = (
    "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256,"
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,"
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,"
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,"
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
)

ADDITIVE, DENIED, APPEND = "additive", "denied", "append"


class ArgsError(ValueError):
    """An ``extraArgs`` key that Talos does not let a user set; ``key`` is the config key to fix."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


def merge_args(
    base: Mapping[str, str], extra: Mapping[str, str], policies: Mapping[str, str], key: str
) -> list[str]:
    """``--flag=value`` lines, sorted by flag: ``extra`` overrides ``base`` unless the flag's policy
    says to join the lists (additive), to repeat the flag (append) or to refuse it (denied)."""
    values: dict[str, list[str]] = {k: [v] for k, v in base.items()}
    for flag, value in extra.items():
        policy = policies.get(flag)
        if policy == DENIED:
            raise ArgsError(f"extra arg {flag!r} is not allowed", f"{key}.{flag}")
        if policy == ADDITIVE and flag in values:
            merged = values[flag][0].split(",") if values[flag][0] else []
            merged += [v for v in value.split(",") if v and v not in merged]
            values[flag] = [",".join(merged)]
        elif policy == APPEND and flag in values:
            values[flag].append(value)
        else:
            values[flag] = [value]
    return [f"--{flag}={v}" for flag in sorted(values) for v in values[flag]]


def _image_version(image: str) -> str:
    match = re.search(r":v?(\d+\.\d+\.\d+[\w.+-]*)(?:@|$)", image)
    return match.group(1) if match else ""


def _resources(spec: ResourcesSpec, cpu: str, memory: str) -> dict[str, Any]:
    requests = {
        "cpu": cpu,
        "memory": memory,
        **{k: v for k, v in spec.requests.items() if k in ("cpu", "memory")},
    }
    limits = {k: v for k, v in spec.limits.items() if k in ("cpu", "memory")}
    return {"requests": requests, "limits": limits} if limits else {"requests": requests}


_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_UNITS = {
    None: 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def _env(environment: Mapping[str, str], resources: dict[str, Any], key: str) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    # Kubernetes expands $(VAR) in values: escape '$' so a value is taken as written.
    env += [{"name": k, "value": environment[k].replace("$", "$$")} for k in sorted(environment)]
    memory = resources.get("limits", {}).get("memory")
    if memory:
        match = _QUANTITY.match(memory)
        if match is None:
            raise ArgsError(
                f"memory limit {memory!r} is not a quantity (e.g. 512Mi)", f"{key}.resources.limits.memory"
            )
        limit = int(float(match.group(1)) * _UNITS[match.group(2)])
        env.append({"name": "GOMEMLIMIT", "value": str(limit * GO_GC_MEM_LIMIT_PERCENT // 100)})
    return env


def _host_volume(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path}}


def _probe(path: str, port: int, **extra: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "host": "localhost", "port": port, "scheme": "HTTPS"}, **extra}


def _pod(
    name: str,
    image: str,
    command: list[str],
    *,
    annotations: dict[str, str],
    env: list[dict[str, Any]],
    mounts: Sequence[tuple[str, str, bool]],
    extra_volumes: Sequence[ExtraVolume],
    resources: dict[str, Any],
    probes: dict[str, Any],
    capabilities: dict[str, Any],
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name, "image": image, "command": command, "env": env,
        "volumeMounts": [{"name": n, "mountPath": p, **({"readOnly": True} if ro else {})} for n, p, ro in mounts]
        + [{"name": v.name, "mountPath": v.mount_path, **({"readOnly": True} if v.read_only else {})}
           for v in extra_volumes],
        **probes, "resources": resources,
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": capabilities,
                            "seccompProfile": {"type": "RuntimeDefault"}},
    }  # fmt: skip
    uid = RUN_USERS[name]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "kube-system", "annotations": annotations,
                     "labels": {"k8s-app": name, "tier": "control-plane"}, "creationTimestamp": None},
        "spec": {
            "priority": SYSTEM_CRITICAL_PRIORITY, "priorityClassName": "system-cluster-critical",
            "containers": [container], "hostNetwork": True,
            "securityContext": {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid},
            "volumes": [_host_volume(n, p) for n, p, _ in mounts] + [_host_volume(v.name, v.host_path) for v in extra_volumes],
        },
        "status": {},
    }  # fmt: skip


def _apiserver(cfg: APIServerConfigSpec, annotations: dict[str, str]) -> dict[str, Any]:
    s = APISERVER_SECRETS_DIR
    base = {
        "admission-control-config-file": f"{APISERVER_CONFIG_DIR}/admission-control-config.yaml",
        "allow-privileged": "true", "anonymous-auth": "false", "api-audiences": cfg.control_plane_endpoint,
        "authorization-mode": "Node,RBAC", "bind-address": "0.0.0.0", "client-ca-file": f"{s}/ca.crt",
        "enable-admission-plugins": "NodeRestriction", "enable-bootstrap-token-auth": "true",
        "requestheader-client-ca-file": f"{s}/aggregator-ca.crt", "requestheader-allowed-names": "front-proxy-client",
        "requestheader-extra-headers-prefix": "X-Remote-Extra-", "requestheader-group-headers": "X-Remote-Group",
        "requestheader-username-headers": "X-Remote-User", "proxy-client-cert-file": f"{s}/front-proxy-client.crt",
        "proxy-client-key-file": f"{s}/front-proxy-client.key", "tls-min-version": "VersionTLS12",
        "tls-cipher-suites": _TLS12_SUITES, "encryption-provider-config": f"{s}/encryptionconfig.yaml",
        "audit-policy-file": f"{APISERVER_CONFIG_DIR}/auditpolicy.yaml",
        "audit-log-path": f"{AUDIT_LOG_DIR}/kube-apiserver.log", "audit-log-maxage": "30",
        "audit-log-maxbackup": "10", "audit-log-maxsize": "100", "profiling": "false",
        "etcd-cafile": f"{s}/etcd-client-ca.crt", "etcd-certfile": f"{s}/etcd-client.crt",
        "etcd-keyfile": f"{s}/etcd-client.key", "etcd-servers": ",".join(cfg.etcd_servers),
        "kubelet-client-certificate": f"{s}/apiserver-kubelet-client.crt",
        "kubelet-client-key": f"{s}/apiserver-kubelet-client.key", "secure-port": str(cfg.local_port),
        "service-account-issuer": cfg.control_plane_endpoint, "service-account-key-file": f"{s}/service-account.pub",
        "service-account-signing-key-file": f"{s}/service-account.key",
        "service-cluster-ip-range": ",".join(cfg.service_cidrs), "tls-cert-file": f"{s}/apiserver.crt",
        "tls-private-key-file": f"{s}/apiserver.key", "kubelet-preferred-address-types": "InternalIP,ExternalIP,Hostname",
    }  # fmt: skip
    if cfg.advertised_address:
        base["advertise-address"] = cfg.advertised_address
    if cfg.cloud_provider:
        base["cloud-provider"] = cfg.cloud_provider
    policies = {
        k: ADDITIVE
        for k in ("enable-admission-plugins", "feature-gates", "authorization-mode", "tls-cipher-suites")
    }
    policies["service-account-issuer"] = APPEND
    policies.update({k: DENIED for k in (
        "etcd-servers", "client-ca-file", "requestheader-client-ca-file", "proxy-client-cert-file",
        "proxy-client-key-file", "encryption-provider-config", "etcd-cafile", "etcd-certfile", "etcd-keyfile",
        "kubelet-client-certificate", "kubelet-client-key", "service-account-key-file",
        "service-account-signing-key-file", "tls-cert-file", "tls-private-key-file",
    )})  # fmt: skip
    key = "cluster.apiServer"
    args = merge_args(base, cfg.extra_args, policies, f"{key}.extraArgs")
    resources = _resources(cfg.resources, "200m", "512Mi")
    return _pod(
        APISERVER_ID, cfg.image, ["/usr/local/bin/kube-apiserver", *args], annotations=annotations,
        env=_env(cfg.environment_variables, resources, key),
        mounts=[("secrets", APISERVER_SECRETS_DIR, True), ("config", APISERVER_CONFIG_DIR, True),
                ("audit", AUDIT_LOG_DIR, False)],
        extra_volumes=cfg.extra_volumes, resources=resources, probes={},
        capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
    )  # fmt: skip


def _controller_manager(cfg: ControllerManagerConfigSpec, annotations: dict[str, str]) -> dict[str, Any]:
    s = CONTROLLER_MANAGER_SECRETS_DIR
    base = {
        "allocate-node-cidrs": "true", "bind-address": "127.0.0.1", "cluster-cidr": ",".join(cfg.pod_cidrs),
        "service-cluster-ip-range": ",".join(cfg.service_cidrs), "cluster-signing-cert-file": f"{s}/ca.crt",
        "cluster-signing-key-file": f"{s}/ca.key", "controllers": "*,tokencleaner", "configure-cloud-routes": "false",
        "kubeconfig": f"{s}/kubeconfig", "authentication-kubeconfig": f"{s}/kubeconfig",
        "authorization-kubeconfig": f"{s}/kubeconfig", "leader-elect": "true", "root-ca-file": f"{s}/ca.crt",
        "service-account-private-key-file": f"{s}/service-account.key", "profiling": "false",
        "tls-min-version": "VersionTLS13",
    }  # fmt: skip
    if cfg.cloud_provider:
        base["cloud-provider"] = cfg.cloud_provider
    policies = {"service-cluster-ip-range": ADDITIVE, "controllers": ADDITIVE}
    policies.update({k: DENIED for k in (
        "cluster-signing-cert-file", "cluster-signing-key-file", "authentication-kubeconfig",
        "authorization-kubeconfig", "root-ca-file", "service-account-private-key-file",
    )})  # fmt: skip
    key = "cluster.controllerManager"
    args = merge_args(base, cfg.extra_args, policies, f"{key}.extraArgs")
    resources = _resources(cfg.resources, "50m", "256Mi")
    return _pod(
        CONTROLLER_MANAGER_ID, cfg.image,
        ["/usr/local/bin/kube-controller-manager", "--use-service-account-credentials", *args],
        annotations=annotations, env=_env(cfg.environment_variables, resources, key),
        mounts=[("secrets", s, True)], extra_volumes=cfg.extra_volumes, resources=resources,
        probes={"startupProbe": _probe("/healthz", 10257, periodSeconds=5, failureThreshold=12),
                "livenessProbe": _probe("/healthz", 10257, timeoutSeconds=15)},
        capabilities={"drop": ["ALL"]},
    )  # fmt: skip


def _scheduler(cfg: SchedulerConfigSpec, annotations: dict[str, str]) -> dict[str, Any]:
    s = SCHEDULER_SECRETS_DIR
    base = {
        "config": f"{SCHEDULER_CONFIG_DIR}/scheduler-config.yaml", "authentication-tolerate-lookup-failure": "false",
        "authentication-kubeconfig": f"{s}/kubeconfig", "authorization-kubeconfig": f"{s}/kubeconfig",
        "bind-address": "127.0.0.1", "leader-elect": "true", "profiling": "false", "tls-min-version": "VersionTLS13",
    }  # fmt: skip
    policies = {
        k: DENIED for k in ("kubeconfig", "authentication-kubeconfig", "authorization-kubeconfig", "config")
    }
    key = "cluster.scheduler"
    args = merge_args(base, cfg.extra_args, policies, f"{key}.extraArgs")
    resources = _resources(cfg.resources, "10m", "64Mi")
    # A 1.30.3 scheduler answers 404 on /livez (seen here: its startup probe killed it), so probes use
    # /healthz up to 1.30, Talos 1.7's newest; /livez and /readyz from 1.31 on.
    new = kubernetes_version(cfg.image, f"{key}.image") >= (1, 31)
    return _pod(
        SCHEDULER_ID, cfg.image, ["/usr/local/bin/kube-scheduler", *args], annotations=annotations,
        env=_env(cfg.environment_variables, resources, key),
        mounts=[("secrets", s, True), ("config", SCHEDULER_CONFIG_DIR, True)], extra_volumes=cfg.extra_volumes,
        resources=resources,
        probes={"startupProbe": _probe("/livez" if new else "/healthz", 10259),
                "livenessProbe": _probe("/livez" if new else "/healthz", 10259),
                "readinessProbe": _probe("/readyz" if new else "/healthz", 10259)},
        capabilities={"drop": ["ALL"]},
    )  # fmt: skip


HELD_UNTIL_READY = (CONTROLLER_MANAGER_ID, SCHEDULER_ID)
"""The pods rendered only once the local kube-apiserver has answered ``GET /readyz`` this boot."""


def control_plane_static_pod_controller(
    client: ClientFactory = admin_client, *, ready_poll: float = READY_POLL
) -> TransformController[StaticPodSpec]:
    api_ready = False

    def render(ctx: ControllerContext) -> dict[str, StaticPodSpec]:
        etcd = ctx.get_or_none(SERVICES, "etcd")
        secrets = ctx.get_or_none(SECRETS_STATUSES, STATIC_PODS_STATUS_ID)
        configs = ctx.get_or_none(CONFIG_STATUSES, STATIC_PODS_STATUS_ID)
        if etcd is None or secrets is None or configs is None:
            return {}
        if not etcd.spec.healthy:
            raise SkipReconcile
        pods: dict[str, StaticPodSpec] = {}
        try:
            renderers: tuple[
                tuple[ResourceType[Any], str, Callable[[Any, dict[str, str]], dict[str, Any]]], ...
            ] = (
                (APISERVER_CONFIGS, APISERVER_ID, _apiserver),
                (CONTROLLER_MANAGER_CONFIGS, CONTROLLER_MANAGER_ID, _controller_manager),
                (SCHEDULER_CONFIGS, SCHEDULER_ID, _scheduler),
            )
            for type_, id_, renderer in renderers:
                config: Resource[Any] | None = ctx.get_or_none(type_, id_)
                if config is None or not getattr(config.spec, "enabled", True):
                    continue
                annotations = {
                    "talos.dev/secrets-version": secrets.spec.version,
                    "talos.dev/config-version": str(config.metadata.version),
                }
                if id_ == APISERVER_ID:
                    annotations["talos.dev/config-file-version"] = configs.spec.version
                pods[id_] = StaticPodSpec(renderer(config.spec, annotations))
        except ArgsError as err:
            raise WaitingFor(
                "control plane static pods", f"{err}: remove {err.key} from the machine config"
            ) from None
        return pods

    async def not_ready(ctx: ControllerContext) -> tuple[str, float | None] | None:
        """None once ready, else why not and when to ask again (None: when an input changes)."""
        kubelet = ctx.get_or_none(SERVICES, "kubelet")
        if kubelet is None or not kubelet.spec.running:
            return "the kubelet, which runs kube-apiserver, is not running", None
        k8s_secrets = ctx.get_or_none(K8S_SECRETS, K8S_SECRETS_ID)
        if k8s_secrets is None or not k8s_secrets.spec.localhost_admin_kubeconfig:
            return "the Kubernetes secrets (localhost admin kubeconfig) are not made yet", None
        try:
            reason = await client(k8s_secrets.spec.localhost_admin_kubeconfig.encode()).readyz()
        except kubeapi.KubeAPIError as exc:
            reason = str(exc)
        return None if reason is None else (reason, ready_poll)

    async def derive(ctx: ControllerContext) -> Mapping[str, StaticPodSpec] | Partial[StaticPodSpec]:
        nonlocal api_ready
        pods = render(ctx)
        held = sorted(set(HELD_UNTIL_READY) & pods.keys())
        if api_ready or APISERVER_ID not in pods or not held:
            return pods
        problem = await not_ready(ctx)
        if problem is None:
            api_ready = True
            ctx.logger.info("kube-apiserver is ready", starting=", ".join(held))
            return pods
        reason, retry = problem
        wait = WaitingFor(
            "kube-apiserver ready",
            f"{' and '.join(held)} start once the local kube-apiserver answers /readyz "
            f"(until its RBAC roles are made they would exit and restart after a back-off): {reason}",
            retry_after=retry,
        )
        return Partial({id_: pod for id_, pod in pods.items() if id_ not in held}, wait)

    return TransformController(
        "k8s.ControlPlaneStaticPodController",
        inputs=[Input(APISERVER_CONFIGS), Input(CONTROLLER_MANAGER_CONFIGS), Input(SCHEDULER_CONFIGS),
                Input(SECRETS_STATUSES, id=STATIC_PODS_STATUS_ID), Input(CONFIG_STATUSES, id=STATIC_PODS_STATUS_ID),
                Input(SERVICES, id="etcd"), Input(SERVICES, id="kubelet"), Input(K8S_SECRETS, id=K8S_SECRETS_ID)],
        output=STATIC_PODS, map_inputs=derive, output_kind=OutputKind.SHARED,
    )  # fmt: skip


def static_pod_config_controller() -> TransformController[StaticPodSpec]:
    def derive(ctx: ControllerContext) -> dict[str, StaticPodSpec]:
        machine = active_config(ctx).machine
        pods: dict[str, StaticPodSpec] = {}
        for index, pod in enumerate((machine.pods if machine is not None else None) or []):
            meta = pod.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            if not isinstance(meta, dict) or not isinstance(name, str) or not name:
                raise WaitingFor(
                    "static pods from machine.pods",
                    f"machine.pods[{index}] has no metadata.name: name the pod",
                )
            namespace = meta.get("namespace") or "default"
            pods[f"{namespace}-{name}"] = StaticPodSpec(pod)
        return pods

    return TransformController(
        "k8s.StaticPodConfigController", inputs=[ACTIVE_CONFIG], output=STATIC_PODS, map_inputs=derive,
        output_kind=OutputKind.SHARED,
    )  # fmt: skip
