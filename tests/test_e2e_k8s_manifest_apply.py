"""The manifest apply controller against a REAL kube-apiserver (v1.30.3, built by the lead into
/tmp/k8sb/bin) on a real etcd: Talos's bootstrap manifests are created once under the etcd mutex;
applying again changes nothing (create-only: an object changed in the cluster keeps the change).
Skips only when the kube-apiserver binary is absent."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import pytest
from controller_helpers import running
from etcd_helpers import etcd_cluster
from kube_helpers import new_kube_pki

from ichor import kubeapi
from ichor.machined.controllers.k8s import manifest_apply, manifests
from ichor.machined.cosi import assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    MANIFEST_STATUSES,
    MANIFESTS,
    SERVICES,
    BootstrapManifestsConfigSpec,
    ServiceSpec,
)
from ichor.machined.resources._k8s import K8S_SECRETS, K8S_SECRETS_ID, KubernetesSecretsSpec
from ichor.machinery import proc

pytestmark = pytest.mark.e2e

CANDIDATES = [
    Path("/tmp/k8sb/bin/kube-apiserver"),
    *Path.home().glob(".cache/ichor/kubernetes/**/kube-apiserver"),
]
APISERVER = next((p for p in CANDIDATES if p.is_file() and os.access(p, os.X_OK)), None)
START_TIMEOUT = 180.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.skipif(
    APISERVER is None, reason="no kube-apiserver binary in /tmp/k8sb/bin or ~/.cache/ichor/kubernetes"
)
def test_bootstrap_manifests_are_created_once_and_never_changed(tmp_path: Path) -> None:
    assert APISERVER is not None
    address = f"127.{os.getpid() % 200 + 20}.77.1"
    pki = new_kube_pki()
    files = tmp_path / "k8s"
    files.mkdir()
    for name, data in {"ca.crt": pki.ca.crt, "server.crt": pki.server.crt, "server.key": pki.server.key,
                       "sa.key": pki.server.key}.items():  # fmt: skip
        (files / name).write_bytes(data)
    port = _free_port()
    layout = Layout(tmp_path / "node", "127.0.0.1")

    with etcd_cluster(tmp_path / "etcd", [("cp-1", address)]) as etcd:
        member = etcd.members[0]
        args = [
            str(APISERVER), f"--etcd-servers={member.client_url}", f"--etcd-cafile={member.pki.ca_crt}",
            f"--etcd-certfile={member.pki.admin_crt}", f"--etcd-keyfile={member.pki.admin_key}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
            f"--client-ca-file={files / 'ca.crt'}", f"--tls-cert-file={files / 'server.crt'}",
            f"--tls-private-key-file={files / 'server.key'}", f"--service-account-key-file={files / 'sa.key'}",
            f"--service-account-signing-key-file={files / 'sa.key'}",
            "--service-account-issuer=https://127.0.0.1:6443", "--service-cluster-ip-range=10.96.0.0/12",
            "--authorization-mode=Node,RBAC", "--enable-bootstrap-token-auth=true", "--anonymous-auth=false",
            "--allow-privileged=true",  # as Talos runs it: kube-proxy and flannel are privileged
        ]  # fmt: skip
        apiserver = proc.start(args, output=tmp_path / "kube-apiserver.log")
        try:
            asyncio.run(
                _scenario(
                    layout, port, pki.kubeconfig(f"https://127.0.0.1:{port}"), etcd, apiserver, tmp_path
                )
            )
        finally:
            apiserver.stop(timeout=10.0)


async def _wait_ready(client: kubeapi.KubeClient, apiserver: proc.Background, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            await client.get("/api/v1/namespaces/kube-system")
            return
        except kubeapi.KubeAPIError as exc:
            if apiserver.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"kube-apiserver not ready ({exc}):\n{log.read_text()[-3000:]}"
                ) from None
        await asyncio.sleep(0.5)


async def _scenario(layout: Layout, port: int, kubeconfig: str, etcd, apiserver, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    client = kubeapi.KubeClient(kubeapi.load_kubeconfig(kubeconfig), field_manager="talos", timeout=20)
    await _wait_ready(client, apiserver, tmp_path / "kube-apiserver.log")
    spec = BootstrapManifestsConfigSpec(
        server=f"https://127.0.0.1:{port}", cluster_domain="cluster.local", pod_cidrs=("10.244.0.0/16",),
        proxy_enabled=True, proxy_image="registry.k8s.io/kube-proxy:v1.30.3", proxy_args=("--proxy-mode=iptables",),
        core_dns_enabled=True, core_dns_image="registry.k8s.io/coredns/coredns:v1.11.1", dns_service_ip="10.96.0.10",
        flannel_enabled=True, flannel_image="ghcr.io/siderolabs/flannel:v0.25.3", talos_api_service_enabled=True,
    )  # fmt: skip
    rendered = manifests.render_bootstrap_manifests(spec, "abcdef.0123456789abcdef")
    rendered["99-extra"] = manifests.ManifestSpec(
        items=(
            {
                "apiVersion": "talos.dev/v1alpha1",
                "kind": "ServiceAccount",
                "metadata": {"name": "sa", "namespace": "extra"},
            },
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "extra"}},
        )
    )  # fmt: skip — a namespace and a custom resource after the CRD that defines it: order matters
    controller = manifest_apply.ManifestApplyController(
        layout, lambda: etcd.client(timeout=10.0), client=lambda _: client, first_retry=0.5
    )
    async with running(controller) as state:
        state.create(SERVICES.new("etcd", ServiceSpec(running=True, healthy=True)))
        state.create(
            K8S_SECRETS.new(K8S_SECRETS_ID, KubernetesSecretsSpec(localhost_admin_kubeconfig=kubeconfig))
        )
        for id, items in rendered.items():
            state.create(MANIFESTS.new(id, items))
        status = await assert_resource(state, MANIFEST_STATUSES, "manifests", timeout=120)
        assert list(status.spec.manifests_applied) == sorted(rendered)

    kcic = "/api/v1/namespaces/kube-system/configmaps/kubeconfig-in-cluster"
    await client.patch(kcic, {"data": {"kubeconfig": "changed by the user"}})
    ds = await client.get("/apis/apps/v1/namespaces/kube-system/daemonsets/kube-flannel")
    assert ds["spec"]["template"]["spec"]["initContainers"][0]["name"] == "install-config"
    assert any(f.get("manager") == "talos" for f in ds["metadata"].get("managedFields", []))
    secret = await client.get("/api/v1/namespaces/kube-system/secrets/bootstrap-token-abcdef")
    assert secret["type"] == "bootstrap.kubernetes.io/token"

    # the second apply creates nothing and leaves the user's change alone
    objects = [o for m in rendered.values() for o in m.items]
    async with (
        etcd.client(timeout=10.0) as store,
        manifest_apply.etcd_mutex(store, manifest_apply.MUTEX_PREFIX),
    ):
        created, existing = await manifest_apply.apply_manifests(client, objects)
    assert (created, existing) == (0, len(objects))
    assert (await client.get(kcic))["data"]["kubeconfig"] == "changed by the user"
    # the mutex key went with its lease
    async with etcd.client(timeout=10.0) as store:
        assert (await store.get(manifest_apply.MUTEX_PREFIX + "/", prefix=True)).kvs == []

    await client.delete(kcic)
    with pytest.raises(kubeapi.KubeNotFoundError):
        await client.get(kcic)
