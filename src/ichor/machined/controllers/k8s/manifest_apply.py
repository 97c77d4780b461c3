"""Area ``k8s``, manifest apply: ``Manifests`` -> the cluster, create-only (control planes only).

``k8s.ManifestApplyController`` waits until the local etcd service is healthy and the localhost
admin kubeconfig (:data:`ADMIN_KUBECONFIG`, made with the Kubernetes secrets) exists, takes the
etcd mutex ``talos:v1:manifestApplyMutex`` (etcd's concurrency mutex: a key under the prefix bound
to a lease; the holder is the key with the lowest create revision, the others wait for the keys
before theirs to go) and creates every object of every manifest: Namespaces first, then
CustomResourceDefinitions, then the rest, each group in manifest-id order. Existing objects are
left untouched (``AlreadyExists`` counts as applied), field manager ``talos``. Every reason to
wait (etcd, kubeconfig, API server not reachable, a kind not served yet) is a wait with the reason;
``ManifestStatuses/manifests`` lists the manifest ids applied.

Until kube-apiserver answers ``GET /readyz`` with 200 the controller asks again every
:data:`READY_POLL` seconds (one local request, no etcd mutex) instead of backing off: the bootstrap
token Secret is among these manifests, and each joining kubelet asks for its client certificate with
that token at about 0, 2, 6, 15 and 31 s after it starts, then only a minute later; an apply that slept through the API
server becoming ready would make every node miss that window. Failures of the apply itself back off
exponentially (1 s doubling, at most 30 s).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from ichor import kubeapi
from ichor.etcd import EtcdError
from ichor.machined.controllers.network.vip import ElectionStore, StoreFactory, wait_for_turn
from ichor.machined.cosi import Controller, ControllerContext, Input, Output
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    MANIFEST_STATUS_ID,
    MANIFEST_STATUSES,
    MANIFESTS,
    SERVICES,
    ManifestStatusSpec,
)
from ichor.machined.resources._k8s import K8S_SECRETS, K8S_SECRETS_ID

__all__ = [
    "ADMIN_KUBECONFIG",
    "FIELD_MANAGER",
    "MUTEX_PREFIX",
    "READY_POLL",
    "ClientFactory",
    "ManifestApplyController",
    "admin_client",
    "apply_manifests",
    "apply_order",
    "etcd_mutex",
]

ADMIN_KUBECONFIG = "KubernetesSecrets/k8s-certs localhostAdminKubeconfig"
"""Where the admin kubeconfig for ``https://localhost:<port>`` comes from (as in Talos, the
Kubernetes secrets resource, never a file)."""
MUTEX_PREFIX = "talos:v1:manifestApplyMutex"
FIELD_MANAGER = "talos"
SESSION_TTL = 60
READY_POLL = 1.0
"""Seconds between ``GET /readyz`` probes while kube-apiserver is not ready yet."""
"""Seconds: how long a dead holder keeps the mutex (etcd's concurrency session default)."""

ClientFactory = Callable[[bytes], kubeapi.KubeClient]


def admin_client(kubeconfig: bytes) -> kubeapi.KubeClient:
    """A client of the node's local API server with the localhost admin kubeconfig."""
    return kubeapi.KubeClient(
        kubeapi.load_kubeconfig(kubeconfig, source=ADMIN_KUBECONFIG), field_manager=FIELD_MANAGER
    )


def apply_order(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Namespaces, then CRDs, then the rest; stable within each group."""

    def rank(obj: dict[str, Any]) -> int:
        kind = obj.get("kind")
        return 0 if kind == "Namespace" else 1 if kind == "CustomResourceDefinition" else 2

    return sorted(objects, key=rank)


async def _create_if_absent(client: kubeapi.KubeClient, obj: dict[str, Any]) -> bool:
    # Ask first, as Talos does: the API server validates some creates (a Service's clusterIP)
    # before it notices the object exists, and would fail instead of answering AlreadyExists.
    if await client.exists(obj):
        return False
    try:
        await client.create(obj)
    except kubeapi.KubeAlreadyExistsError:
        return False
    return True


async def apply_manifests(client: kubeapi.KubeClient, objects: list[dict[str, Any]]) -> tuple[int, int]:
    """Create each object that does not exist yet; (created, already there)."""
    created = existing = 0
    for obj in apply_order(objects):
        try:
            made = await _create_if_absent(client, obj)
        except kubeapi.KubeUnknownKindError:
            # a kind from a CRD created just now: discovery is cached, ask again once
            await client.resource_for(str(obj.get("apiVersion")), str(obj.get("kind")), refresh=True)
            made = await _create_if_absent(client, obj)
        created, existing = created + made, existing + (not made)
    return created, existing


async def _keep_alive(store: ElectionStore, lease: int) -> None:
    while True:
        await asyncio.sleep(SESSION_TTL / 3)
        await store.lease_keepalive(lease, timeout=SESSION_TTL / 3)


@contextlib.asynccontextmanager
async def etcd_mutex(store: ElectionStore, prefix: str, value: str = "") -> AsyncIterator[None]:
    """Hold etcd's concurrency mutex ``prefix`` for the block (the lease is revoked on the way out)."""
    lease = await store.lease_grant(SESSION_TTL)
    try:
        key = f"{prefix}/{lease:x}"
        created = await store.create(key, value, lease=lease)
        if created is None:
            raise EtcdError(f"mutex key {key} already exists")
        await wait_for_turn(store, prefix, created)
        # A lost lease only means another holder may start: creates stay create-only, so no harm.
        keepalive = asyncio.ensure_future(_keep_alive(store, lease))
        try:
            yield
        finally:
            keepalive.cancel()
            await asyncio.gather(keepalive, return_exceptions=True)
    finally:
        with contextlib.suppress(EtcdError, OSError, TimeoutError):
            await store.lease_revoke(lease, timeout=3.0)


class ManifestApplyController(Controller):
    name = "k8s.ManifestApplyController"
    inputs = (Input(MANIFESTS), Input(SERVICES, id="etcd"), Input(K8S_SECRETS, id=K8S_SECRETS_ID))
    outputs = (Output(MANIFEST_STATUSES),)

    def __init__(
        self, layout: Layout, store: StoreFactory | None, *, client: ClientFactory | None = None,
        first_retry: float = 1.0, max_retry: float = 30.0, ready_poll: float = READY_POLL,
    ) -> None:  # fmt: skip
        self._layout = layout
        self._store = store
        self._client = client or admin_client
        self._first_retry = first_retry
        self._max_retry = max_retry
        self._ready_poll = ready_poll

    async def run(self, ctx: ControllerContext) -> None:
        retry: float | None = None
        failures = 0
        applied: dict[str, str] = {}  # manifest id -> version applied
        while True:
            await ctx.changed(timeout=retry)
            retry = None
            manifests = sorted(ctx.list(MANIFESTS), key=lambda r: r.id)
            wanted = {r.id: r.metadata.version_string for r in manifests}
            if not manifests or all(applied.get(id) == v for id, v in wanted.items()):
                ctx.clear_waiting()
                continue
            etcd = ctx.get_or_none(SERVICES, "etcd")
            if etcd is None or not etcd.spec.healthy:
                ctx.waiting("etcd", "the local etcd service is not healthy yet")
                continue
            secrets = ctx.get_or_none(K8S_SECRETS, K8S_SECRETS_ID)
            if secrets is None or not secrets.spec.localhost_admin_kubeconfig:
                ctx.waiting(
                    "admin kubeconfig", "the Kubernetes secrets (localhost admin kubeconfig) are not made yet"
                )
                continue
            problem = await self._apply(ctx, manifests, secrets.spec.localhost_admin_kubeconfig.encode())
            if problem is None:
                failures = 0
                applied = wanted
                ctx.modify(
                    MANIFEST_STATUSES, MANIFEST_STATUS_ID, ManifestStatusSpec(manifests_applied=tuple(wanted))
                )
                ctx.clear_waiting()
                continue
            waiting_for, reason, not_ready = problem
            if not_ready:
                retry = self._ready_poll
            else:
                failures += 1
                retry = min(self._first_retry * 2 ** (failures - 1), self._max_retry)
            ctx.waiting(waiting_for, reason, retry_after=retry)

    async def _apply(
        self, ctx: ControllerContext, manifests: list[Any], kubeconfig: bytes
    ) -> tuple[str, str, bool] | None:
        """Apply everything under the mutex once the API server is ready; None, or (what we wait
        for, why, whether only because kube-apiserver is not ready yet)."""
        objects = [obj for r in manifests for obj in r.spec.items]
        try:
            client = self._client(kubeconfig)
        except kubeapi.KubeAPIError as exc:
            ctx.logger.warning("error applying manifests", error=str(exc))
            return "kubernetes API", str(exc), False
        try:
            not_ready = await client.readyz()
        except kubeapi.KubeAPIError as exc:
            not_ready = str(exc)
        if not_ready is not None:
            return "kube-apiserver ready", f"kube-apiserver is not ready yet: {not_ready}", True
        try:
            if self._store is None:
                created, existing = await apply_manifests(client, objects)
            else:
                async with self._store() as store, etcd_mutex(store, MUTEX_PREFIX, self.name):
                    created, existing = await apply_manifests(client, objects)
        except kubeapi.KubeAPIError as exc:
            ctx.logger.warning("error applying manifests", error=str(exc))
            return "kubernetes API", str(exc), False
        except (EtcdError, OSError, TimeoutError) as exc:
            return "etcd mutex", f"{MUTEX_PREFIX}: {exc}", False
        ctx.logger.info("applied manifests", manifests=len(manifests), created=created, unchanged=existing)
        return None
