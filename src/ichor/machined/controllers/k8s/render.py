"""The files the control-plane static pods mount, written where Talos writes them.

* ``k8s.RenderSecretsStaticPodController``: KubernetesRootSecrets + KubernetesDynamicCerts +
  KubernetesSecrets + EtcdRootSecrets -> ``/system/secrets/kubernetes/kube-apiserver/`` (``ca.crt``,
  ``apiserver.{crt,key}``, ``apiserver-kubelet-client.{crt,key}``, ``aggregator-ca.crt``,
  ``front-proxy-client.{crt,key}``, ``service-account.{key,pub}``, ``etcd-client-ca.crt``,
  ``etcd-client.{crt,key}``, ``encryptionconfig.yaml``), ``.../kube-controller-manager/`` (``ca.{crt,key}``,
  ``service-account.key``, ``kubeconfig``), ``.../kube-scheduler/kubeconfig``; then SecretsStatus
  ``static-pods`` with the versions it wrote.
* ``k8s.RenderConfigsStaticPodController``: AdmissionControlConfig + AuditPolicyConfig +
  SchedulerConfig -> ``/system/config/kubernetes/kube-apiserver/{admission-control-config,auditpolicy}.yaml``
  and ``/system/config/kubernetes/kube-scheduler/scheduler-config.yaml``; then ConfigStatus ``static-pods``.

Files are owned by the component's run user (65534 apiserver, 65535 controller-manager, 65536
scheduler) with mode 0400, as Talos does. A file that cannot be written is a wait with the reason.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives import serialization

from ichor.machined.controllers.k8s.control_plane import kubernetes_version
from ichor.machined.cosi import ControllerContext, Input, SkipReconcile, TransformController, WaitingFor
from ichor.machined.platform import Layout
from ichor.machined.resources import ETCD_ROOT_ID, ETCD_ROOT_SECRETS
from ichor.machined.resources._k8s import (
    ADMISSION_CONTROL_CONFIGS,
    ADMISSION_CONTROL_ID,
    AUDIT_POLICY_CONFIGS,
    AUDIT_POLICY_ID,
    CONFIG_STATUSES,
    K8S_DYNAMIC_CERTS,
    K8S_DYNAMIC_CERTS_ID,
    K8S_ROOT_ID,
    K8S_ROOT_SECRETS,
    K8S_SECRETS,
    K8S_SECRETS_ID,
    SCHEDULER_CONFIGS,
    SCHEDULER_ID,
    SECRETS_STATUSES,
    STATIC_PODS_STATUS_ID,
    KubernetesRootSpec,
    SchedulerConfigSpec,
    VersionStatusSpec,
)
from ichor.machinery import pki
from ichor.machinery.files import write_atomic
from ichor.machinery.yamlio import dump_document

__all__ = [
    "APISERVER_CONFIG_DIR",
    "APISERVER_SECRETS_DIR",
    "AUDIT_LOG_DIR",
    "CONTROLLER_MANAGER_SECRETS_DIR",
    "RUN_USERS",
    "SCHEDULER_CONFIG_DIR",
    "SCHEDULER_SECRETS_DIR",
    "encryption_config",
    "render_configs_controller",
    "render_secrets_controller",
    "scheduler_config",
]

APISERVER_SECRETS_DIR = "/system/secrets/kubernetes/kube-apiserver"
CONTROLLER_MANAGER_SECRETS_DIR = "/system/secrets/kubernetes/kube-controller-manager"
SCHEDULER_SECRETS_DIR = "/system/secrets/kubernetes/kube-scheduler"
APISERVER_CONFIG_DIR = "/system/config/kubernetes/kube-apiserver"
SCHEDULER_CONFIG_DIR = "/system/config/kubernetes/kube-scheduler"
AUDIT_LOG_DIR = "/var/log/audit/kube"
RUN_USERS = {"kube-apiserver": 65534, "kube-controller-manager": 65535, "kube-scheduler": 65536}
_RETRY = 10.0


def _write_dir(layout: Layout, directory: str, owner: int, files: Mapping[str, bytes]) -> None:
    path = layout.path(directory)
    path.mkdir(parents=True, exist_ok=True, mode=0o755)
    for name, data in files.items():
        target = write_atomic(path / name, data, mode=0o400)
        # A process node may run unprivileged: the files stay its own then, and still readable by it.
        with contextlib.suppress(PermissionError):
            os.chown(target, owner, owner)


def encryption_config(root: KubernetesRootSpec) -> str:
    """``encryptionconfig.yaml``: secretbox first when set, then aescbc, then identity (reads old data)."""
    providers: list[dict[str, Any]] = []
    if root.secretbox_encryption_secret:
        providers.append(
            {"secretbox": {"keys": [{"name": "key2", "secret": root.secretbox_encryption_secret}]}}
        )
    if root.aescbc_encryption_secret:
        providers.append({"aescbc": {"keys": [{"name": "key1", "secret": root.aescbc_encryption_secret}]}})
    providers.append({"identity": {}})
    return dump_document({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
        "resources": [{"resources": ["secrets"], "providers": providers}],
    })  # fmt: skip


def _public_key(private_pem: bytes) -> bytes:
    key = pki.load_private_key(private_pem, what="cluster.serviceAccount.key")
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _version(*resources: Any) -> str:
    return "-".join(str(r.metadata.version) for r in resources)


def render_secrets_controller(layout: Layout) -> TransformController[VersionStatusSpec]:
    def derive(ctx: ControllerContext) -> dict[str, VersionStatusSpec]:
        root = ctx.get_or_none(K8S_ROOT_SECRETS, K8S_ROOT_ID)
        if root is None:
            return {}
        certs = ctx.get_or_none(K8S_DYNAMIC_CERTS, K8S_DYNAMIC_CERTS_ID)
        kubeconfigs = ctx.get_or_none(K8S_SECRETS, K8S_SECRETS_ID)
        etcd = ctx.get_or_none(ETCD_ROOT_SECRETS, ETCD_ROOT_ID)
        if certs is None or kubeconfigs is None or etcd is None or etcd.spec.etcd_ca is None:
            raise SkipReconcile
        r, c = root.spec, certs.spec
        if (
            r.issuing_ca is None
            or r.aggregator_ca is None
            or None in (c.api_server, c.api_server_kubelet_client, c.front_proxy, c.etcd_api_server)
        ):
            raise SkipReconcile
        assert c.api_server and c.api_server_kubelet_client and c.front_proxy and c.etcd_api_server
        try:
            sa_key = r.service_account.key if r.service_account is not None else b""
            sa_pub = _public_key(sa_key)
            _write_dir(layout, APISERVER_SECRETS_DIR, RUN_USERS["kube-apiserver"], {
                "etcd-client-ca.crt": etcd.spec.etcd_ca.crt,
                "etcd-client.crt": c.etcd_api_server.crt, "etcd-client.key": c.etcd_api_server.key,
                "ca.crt": b"".join(ca.crt for ca in r.accepted_cas),
                "apiserver.crt": c.api_server.crt, "apiserver.key": c.api_server.key,
                "apiserver-kubelet-client.crt": c.api_server_kubelet_client.crt,
                "apiserver-kubelet-client.key": c.api_server_kubelet_client.key,
                "service-account.pub": sa_pub, "service-account.key": sa_key,
                "aggregator-ca.crt": r.aggregator_ca.crt,
                "front-proxy-client.crt": c.front_proxy.crt, "front-proxy-client.key": c.front_proxy.key,
                "encryptionconfig.yaml": encryption_config(r).encode(),
            })  # fmt: skip
            _write_dir(layout, CONTROLLER_MANAGER_SECRETS_DIR, RUN_USERS["kube-controller-manager"], {
                "ca.crt": r.issuing_ca.crt, "ca.key": r.issuing_ca.key, "service-account.key": sa_key,
                "kubeconfig": kubeconfigs.spec.controller_manager_kubeconfig.encode(),
            })  # fmt: skip
            _write_dir(layout, SCHEDULER_SECRETS_DIR, RUN_USERS["kube-scheduler"], {
                "kubeconfig": kubeconfigs.spec.scheduler_kubeconfig.encode(),
            })  # fmt: skip
        except (OSError, ValueError) as err:
            raise WaitingFor("Kubernetes secrets on disk", f"{err}", retry_after=_RETRY) from None
        return {
            STATIC_PODS_STATUS_ID: VersionStatusSpec(
                ready=True, version=_version(root, certs, kubeconfigs, etcd)
            )
        }

    return TransformController(
        "k8s.RenderSecretsStaticPodController",
        inputs=[Input(K8S_ROOT_SECRETS, id=K8S_ROOT_ID), Input(K8S_DYNAMIC_CERTS, id=K8S_DYNAMIC_CERTS_ID),
                Input(K8S_SECRETS, id=K8S_SECRETS_ID), Input(ETCD_ROOT_SECRETS, id=ETCD_ROOT_ID)],
        output=SECRETS_STATUSES, map_inputs=derive,
    )  # fmt: skip


def scheduler_config(spec: SchedulerConfigSpec, version: tuple[int, int]) -> dict[str, Any]:
    """``scheduler-config.yaml``: the user's ``cluster.scheduler.config`` over Talos's defaults; the
    API version follows the scheduler's Kubernetes version (v1 from 1.25)."""
    api = "v1" if version >= (1, 25) else "v1beta3" if version >= (1, 23) else "v1beta1"
    config: dict[str, Any] = {
        "apiVersion": f"kubescheduler.config.k8s.io/{api}",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": f"{SCHEDULER_SECRETS_DIR}/kubeconfig"},
    }
    config.update(spec.config)
    return config


def render_configs_controller(layout: Layout) -> TransformController[VersionStatusSpec]:
    def derive(ctx: ControllerContext) -> dict[str, VersionStatusSpec]:
        admission = ctx.get_or_none(ADMISSION_CONTROL_CONFIGS, ADMISSION_CONTROL_ID)
        audit = ctx.get_or_none(AUDIT_POLICY_CONFIGS, AUDIT_POLICY_ID)
        scheduler = ctx.get_or_none(SCHEDULER_CONFIGS, SCHEDULER_ID)
        if admission is None or audit is None or scheduler is None:
            return {}
        version = kubernetes_version(scheduler.spec.image, "cluster.scheduler.image")
        admission_doc = {
            "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
            "plugins": [{"name": p.name, "configuration": p.configuration} for p in admission.spec.config],
        }  # fmt: skip
        try:
            _write_dir(layout, APISERVER_CONFIG_DIR, RUN_USERS["kube-apiserver"], {
                "admission-control-config.yaml": dump_document(admission_doc).encode(),
                "auditpolicy.yaml": dump_document(audit.spec.config).encode(),
            })  # fmt: skip
            _write_dir(layout, SCHEDULER_CONFIG_DIR, RUN_USERS["kube-scheduler"], {
                "scheduler-config.yaml": dump_document(scheduler_config(scheduler.spec, version)).encode(),
            })  # fmt: skip
            layout.path(AUDIT_LOG_DIR).mkdir(parents=True, exist_ok=True, mode=0o700)
            with contextlib.suppress(PermissionError):
                os.chown(layout.path(AUDIT_LOG_DIR), RUN_USERS["kube-apiserver"], RUN_USERS["kube-apiserver"])
        except OSError as err:
            raise WaitingFor("Kubernetes configuration on disk", f"{err}", retry_after=_RETRY) from None
        return {
            STATIC_PODS_STATUS_ID: VersionStatusSpec(
                ready=True, version=_version(admission, audit, scheduler)
            )
        }

    return TransformController(
        "k8s.RenderConfigsStaticPodController",
        inputs=[Input(ADMISSION_CONTROL_CONFIGS, id=ADMISSION_CONTROL_ID),
                Input(AUDIT_POLICY_CONFIGS, id=AUDIT_POLICY_ID), Input(SCHEDULER_CONFIGS, id=SCHEDULER_ID)],
        output=CONFIG_STATUSES, map_inputs=derive,
    )  # fmt: skip
