"""``talosctl upgrade-k8s``: Talos 1.7's Kubernetes upgrade of a running cluster, node by node.

The steps and their order are Talos 1.7.6's (``pkg/cluster/kubernetes``): the nodes come from the
Kubernetes ``Node`` objects (control planes by their ``node-role.kubernetes.io/control-plane``
label, each by its ``InternalIP``); with ``pre_pull_images`` each control plane pulls the three
control plane images and every node the kubelet's; then for ``kube-apiserver``,
``kube-controller-manager`` and ``kube-scheduler`` in turn, **one control plane at a time**, the
node's machine config gets the new image (``ApplyConfiguration`` mode ``no-reboot``), and the next
node is only touched once **this** node's static pod runs the new config version and is Ready
(talos#14227); then kube-proxy's image in every control plane's config; then, with
``upgrade_kubelet``, every node's ``machine.kubelet.image``, one node at a time, waiting for the
kubelet to restart and the ``Node`` to report the new version and Ready; last, the bootstrap
manifests (``Manifests`` of the first control plane: kube-proxy, CoreDNS, flannel, ...) are synced
to the API server and the rollout of every changed Deployment and DaemonSet awaited.

A component already at the target (its image in the machine config or in the node's
``APIServerConfig``/``KubeletSpec``) is not patched again, only checked, so a run that stopped
(a node that did not come back) is resumed by running the same command again. With ``dry_run``
every step prints what it would change and nothing is patched or applied. Talos's printed lines
(Go's ``%q`` and all) go to ``printf``; this module never prints.

Before any pre-pull, Talos's pre-upgrade checks of the path (:mod:`ichor.client.upgrade_k8s_checks`:
removed flags, feature gates, admission plugins and API resources; ``1.29->1.30`` has some, a path
within one minor none) stop the upgrade with Talos's tables when the cluster still uses one.

Not done as Talos: the wait for a static pod is a poll (every ``Pace.poll`` seconds) rather than a watch.

Everything the upgrade reads or changes goes through :class:`UpgradeAPI`; :class:`LiveUpgradeAPI`
is the real one (the Talos API :class:`~ichor.client.Talos` for the nodes, :mod:`ichor.kubeapi`
for Kubernetes), and unit tests give a double of their own.

Exceptions: :class:`UpgradeK8sError` (a :class:`~ichor.client.ClientError`) with ``.node`` and
``.component`` set when one node's component failed; errors of the API clients pass through.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import functools
import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

from ichor.client._errors import ClientError
from ichor.client.upgrade_k8s_checks import ChecksAPI, RemovedItems, find_removed, resource_path
from ichor.machinery import goquote
from ichor.machinery.constants import (
    DEFAULT_KUBERNETES_VERSION,
    KUBE_APISERVER_IMAGE,
    KUBE_CONTROLLER_MANAGER_IMAGE,
    KUBE_PROXY_IMAGE,
    KUBE_SCHEDULER_IMAGE,
    KUBELET_IMAGE,
)

__all__ = [
    "KUBELET",
    "STATIC_PODS",
    "KubeletState",
    "LiveUpgradeAPI",
    "NodeState",
    "Pace",
    "PodState",
    "SyncResult",
    "UpgradeAPI",
    "UpgradeK8sError",
    "UpgradeOptions",
    "UpgradePath",
    "detect_lowest_version",
    "patch_machine_config",
    "upgrade_kubernetes",
]

Printf = Callable[[str], None]

KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
)
STATIC_PODS = (KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER)
KUBELET = "kubelet"
KUBE_PROXY = "kube-proxy"
CONFIG_VERSION_ANNOTATION = "talos.dev/config-version"
CONFIG_RESOURCES = {
    KUBE_APISERVER: "APIServerConfigs.kubernetes.talos.dev",
    KUBE_CONTROLLER_MANAGER: "ControllerManagerConfigs.kubernetes.talos.dev",
    KUBE_SCHEDULER: "SchedulerConfigs.kubernetes.talos.dev",
}
CONFIG_KEYS = {
    KUBE_APISERVER: ("cluster", "apiServer"),
    KUBE_CONTROLLER_MANAGER: ("cluster", "controllerManager"),
    KUBE_SCHEDULER: ("cluster", "scheduler"),
    KUBE_PROXY: ("cluster", "proxy"),
    KUBELET: ("machine", "kubelet"),
}
"""Where each component's image is in the v1alpha1 document (its ``image`` key)."""
_SUPPORTED_MINORS = range(19, 31)
"""go-kubernetes v0.2.9 (Talos 1.7.6): ``1.19->1.19`` ... ``1.29->1.30``, ``1.30->1.30``."""


class UpgradeK8sError(ClientError):
    """The upgrade stopped; ``node`` and ``component`` say where when one node's component failed."""

    def __init__(self, message: str, *, hint: str | None = None, component: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.component = component
        self.removed: RemovedItems | None = None
        """What the pre-upgrade checks found, when they stopped the upgrade."""


class UnimplementedError(ClientError):
    """The node does not implement the call (Talos skips a pre-pull the node cannot do)."""


@dataclasses.dataclass(frozen=True)
class UpgradePath:
    """go-kubernetes's ``upgrade.Path``: the versions without their ``v``."""

    from_version: str
    to_version: str

    @classmethod
    def parse(cls, from_version: str, to_version: str) -> UpgradePath:
        for what, value in (("from", from_version), ("to", to_version)):
            if _semver(value) is None:
                raise UpgradeK8sError(
                    f"error creating upgrade path error parsing {what} version: "
                    f"Invalid character(s) found in major number {goquote.quote(value.lstrip('v'))}",
                    hint="versions look like 1.30.3",
                )
        return cls(from_version.lstrip("v"), to_version.lstrip("v"))

    def __str__(self) -> str:
        a, b = _semver(self.from_version), _semver(self.to_version)
        assert a is not None and b is not None
        return f"{a[0]}.{a[1]}->{b[0]}.{b[1]}"

    def is_supported(self) -> bool:
        a, b = _semver(self.from_version), _semver(self.to_version)
        assert a is not None and b is not None
        if a[0] != 1 or b[0] != 1 or a[1] not in _SUPPORTED_MINORS:
            return False
        return b[1] == a[1] or (b[1] == a[1] + 1 and b[1] in _SUPPORTED_MINORS)


def _semver(value: str) -> tuple[int, int, int] | None:
    """``semver.ParseTolerant``'s reading of a Kubernetes version (``v1.30``, ``1.30.3``)."""
    match = re.fullmatch(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[-+].*)?", value.strip())
    if match is None:
        return None
    return int(match[1]), int(match[2] or 0), int(match[3] or 0)


@dataclasses.dataclass(frozen=True)
class UpgradeOptions:
    """``talosctl upgrade-k8s``'s flags, with Talos 1.7.6's defaults (images without their tag)."""

    path: UpgradePath
    dry_run: bool = False
    pre_pull_images: bool = True
    upgrade_kubelet: bool = True
    kubelet_image: str = KUBELET_IMAGE
    apiserver_image: str = KUBE_APISERVER_IMAGE
    controller_manager_image: str = KUBE_CONTROLLER_MANAGER_IMAGE
    scheduler_image: str = KUBE_SCHEDULER_IMAGE
    proxy_image: str = KUBE_PROXY_IMAGE
    with_docs: bool = True
    with_examples: bool = True

    def image(self, component: str) -> str:
        """The target image of ``component`` (``registry.k8s.io/kube-apiserver:v1.30.3``)."""
        base = {
            KUBE_APISERVER: self.apiserver_image,
            KUBE_CONTROLLER_MANAGER: self.controller_manager_image,
            KUBE_SCHEDULER: self.scheduler_image,
            KUBE_PROXY: self.proxy_image,
            KUBELET: self.kubelet_image,
        }[component]
        return f"{base}:v{self.path.to_version}"


DEFAULT_TO_VERSION = DEFAULT_KUBERNETES_VERSION


@dataclasses.dataclass(frozen=True)
class Pace:
    """Time for the waits (injectable, so tests do not sleep); the limits are Talos's."""

    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    monotonic: Callable[[], float] = time.monotonic
    poll: float = 1.0
    pod_limit: float = 300.0
    """checkPodStatus: 5 minutes per static pod."""
    kubelet_limit: float = 300.0
    """The kubelet's restart after its patch (Talos waits without a limit of its own)."""
    node_limit: float = 180.0
    """checkNodeKubeletVersion: 3 minutes."""
    sync_limit: float = 180.0
    """manifests.Sync: each object retried for 3 minutes."""
    deployment_limit: float = 180.0
    daemonset_limit: float = 300.0


@dataclasses.dataclass(frozen=True)
class PodState:
    """A static pod's mirror as the API server has it."""

    host_ip: str
    config_version: str
    ready: bool


@dataclasses.dataclass(frozen=True)
class KubeletState:
    """The node's ``kubelet`` service: healthy (running, health check passed) and its events so far."""

    healthy: bool
    events: tuple[tuple[float, str], ...] = ()
    """(time as a POSIX timestamp, state) of each service event."""


@dataclasses.dataclass(frozen=True)
class NodeState:
    """A Kubernetes ``Node``: its addresses, kubelet version and readiness."""

    name: str
    addresses: tuple[str, ...]
    kubelet_version: str
    ready: bool
    control_plane: bool


@dataclasses.dataclass(frozen=True)
class SyncResult:
    """One manifest object after its sync: its path, the diff, whether nothing changed."""

    path: str
    diff: str
    skipped: bool


class UpgradeAPI(ChecksAPI, Protocol):
    """What the upgrade reads and changes (the pre-upgrade checks' reads too). Errors are
    :class:`ClientError` (Talos API) or :class:`~ichor.kubeapi.KubeAPIError` (Kubernetes);
    ``retryable`` says which ones are worth waiting out (an API server that is restarting)."""

    async def nodes(self) -> list[NodeState]: ...
    async def machine_config(self, node: str) -> str: ...
    async def apply_config(self, node: str, text: str) -> None: ...
    async def component_config(self, node: str, service: str) -> tuple[str, str]:
        """The version and image of the node's ``APIServerConfig`` (etc.) resource."""
        ...

    async def static_pods(self, service: str) -> list[PodState]: ...
    async def kubelet(self, node: str) -> KubeletState: ...
    async def kubelet_image(self, node: str) -> str: ...
    async def pull_image(self, node: str, namespace: str, reference: str) -> None:
        """Raises :class:`UnimplementedError` when the node cannot."""
        ...

    async def pod_images(self) -> list[tuple[str, str, str]]:
        """(``k8s-app`` label, container name, image) of every container in kube-system."""
        ...

    async def manifests(self, node: str) -> list[dict[str, Any]]: ...
    async def sync_object(self, obj: dict[str, Any], dry_run: bool) -> SyncResult: ...
    async def rollout_pending(self, obj: dict[str, Any]) -> str | None:
        """Why the Deployment/DaemonSet ``obj`` has not rolled out yet, None once it has."""
        ...

    def retryable(self, exc: BaseException) -> bool: ...


# --- machine config -----------------------------------------------------------------------------


def patch_machine_config(text: str, component: str, image: str, *, with_docs: bool = True,
                         with_examples: bool = True) -> str:  # fmt: skip
    """The node's machine config (every document) with ``component``'s image set, re-encoded as
    Talos re-encodes it (``--with-docs``/``--with-examples``)."""
    from ichor.machinery.docident import is_v1alpha1
    from ichor.machinery.generate import render_documents
    from ichor.machinery.yamlio import load_documents, to_plain

    docs = [to_plain(d) for d in load_documents(text, source="the node's machine config")]
    main = next((d for d in docs if isinstance(d, dict) and is_v1alpha1(d)), None)
    if main is None:
        raise UpgradeK8sError("error patching config: the node's machine config has no v1alpha1 document")
    part: Any = main
    for key in CONFIG_KEYS[component]:
        if not isinstance(part.get(key), dict):
            part[key] = {}
        part = part[key]
    part["image"] = image
    return render_documents(docs, with_docs=with_docs, with_examples=with_examples)


def config_image(text: str, component: str) -> str:
    """``component``'s image in a machine config, "" when it has none."""
    from ichor.machinery.docident import is_v1alpha1
    from ichor.machinery.yamlio import load_documents, to_plain

    for doc in (to_plain(d) for d in load_documents(text, source="the node's machine config")):
        if isinstance(doc, dict) and is_v1alpha1(doc):
            part: Any = doc
            for key in CONFIG_KEYS[component]:
                part = part.get(key) if isinstance(part, dict) else None
            return str(part.get("image") or "") if isinstance(part, dict) else ""
    return ""


def _tag(image: str) -> str:
    """The tag of an image reference, "" without one."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else ""


# --- the upgrade --------------------------------------------------------------------------------


@dataclasses.dataclass
class _Run:
    api: UpgradeAPI
    options: UpgradeOptions
    printf: Printf
    pace: Pace
    control_planes: list[str] = dataclasses.field(default_factory=list)
    workers: list[str] = dataclasses.field(default_factory=list)

    @property
    def to(self) -> str:
        return self.options.path.to_version

    async def retry(self, what: Callable[[], Awaitable[Any]], limit: float, *, log: bool = True) -> Any:
        """``what()`` again while it fails with an error the API calls retryable, for up to ``limit``."""
        start = self.pace.monotonic()
        while True:
            try:
                return await what()
            except Exception as exc:
                if not self.api.retryable(exc) or self.pace.monotonic() - start >= limit:
                    raise
                if log:
                    self.printf(f"retrying error: {exc}")
            await self.pace.sleep(self.pace.poll)

    async def update(self, node: str, component: str, image: str, *, skipped: bool, old: str) -> bool:
        """Talos's patcher for one component: say and patch unless ``skipped`` (already at the
        target); False in a dry run, where nothing more is done for the node."""
        if not skipped:
            self.printf(f" > update {component}: {old} -> {self.to}")
            if self.options.dry_run:
                self.printf(" > skipped in dry-run")
                return False
            await self.patch(node, component, image)
        if self.options.dry_run:
            return False
        self.printf(f" > {_q(node)}: machine configuration patched")
        return True

    async def patch(self, node: str, component: str, image: str) -> None:
        """patchNodeConfig: read the node's machine config, set the image, apply it ``no-reboot``."""
        text = await self.retry(lambda: self.api.machine_config(node), 30, log=False)
        new = patch_machine_config(text, component, image, with_docs=self.options.with_docs,
                                   with_examples=self.options.with_examples)  # fmt: skip
        await self.retry(lambda: self.api.apply_config(node, new), 30, log=False)


def _q(value: str) -> str:
    return goquote.quote(value)


def _qs(values: Sequence[str]) -> str:
    return "[" + " ".join(_q(v) for v in values) + "]"


async def detect_lowest_version(api: UpgradeAPI, printf: Printf = lambda _l: None) -> str:
    """Talos's ``DetectLowestVersion``: the lowest version among the kube-system containers of
    kube-apiserver, kube-controller-manager, kube-proxy and kube-scheduler."""
    apps = {KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_PROXY, KUBE_SCHEDULER}
    lowest: tuple[int, int, int] | None = None
    for app, container, image in await api.pod_images():
        if app not in apps or container != app or ":" not in image:
            continue
        tag = image[image.rindex(":") + 1 :]
        version = _semver(tag.lstrip("v"))
        if version is None:
            printf(
                f"failed to parse {app} container version Invalid character(s) found in major number {_q(tag)}"
            )
            continue
        lowest = version if lowest is None or version < lowest else lowest
    if lowest is None:
        raise UpgradeK8sError(
            "error detecting the lowest Kubernetes version failed to detect lowest Kubernetes version"
        )
    return ".".join(map(str, lowest))


async def upgrade_kubernetes(
    api: UpgradeAPI, options: UpgradeOptions, *, printf: Printf, pace: Pace = Pace()
) -> None:
    """Upgrade the cluster's Kubernetes as Talos 1.7's ``upgrade-k8s`` (the module docstring)."""
    path = options.path
    if not path.is_supported():
        raise UpgradeK8sError(
            f"unsupported upgrade path {path} (from {_q(path.from_version)} to {_q(path.to_version)})",
            hint="Talos 1.7 upgrades within a minor version or to the next one (1.29 -> 1.30)",
        )
    run = _Run(api, options, printf, pace)
    try:
        nodes = await run.retry(api.nodes, 30, log=False)
    except Exception as exc:
        raise UpgradeK8sError(f"error fetching controlplane nodes: {exc}") from None
    run.control_planes = [a for n in nodes if n.control_plane for a in n.addresses]
    if not run.control_planes:
        raise UpgradeK8sError("no controlplane nodes discovered")
    printf(f"discovered controlplane nodes {_qs(run.control_planes)}")
    if options.upgrade_kubelet:
        run.workers = [a for n in nodes if not n.control_plane for a in n.addresses]
        printf(f"discovered worker nodes {_qs(run.workers)}")

    removed = await find_removed(api, str(path), run.control_planes, run.workers, printf)
    if removed:
        failure = UpgradeK8sError(removed.text(), hint="remove what the table lists from the machine configs "
                                  "(and the listed objects) before upgrading")  # fmt: skip
        failure.removed = removed
        raise failure

    if options.pre_pull_images:
        try:
            await _pre_pull(run)
        except UpgradeK8sError as exc:
            raise UpgradeK8sError(f"failed pre-pulling images: {exc}", component=exc.component,
                                  hint=exc.hint) from None  # fmt: skip

    for service in STATIC_PODS:
        printf(f"updating {_q(service)} to version {_q(run.to)}")
        for node in run.control_planes:
            await _step(f"failed updating service {_q(service)}: error updating node {_q(node)}", node, service,
                        _static_pod_on_node(run, service, node))  # fmt: skip

    printf(f"updating kube-proxy to version {_q(run.to)}")
    for node in run.control_planes:
        printf(f" > {_q(node)}: starting update")
        await _step(f"failed updating kube-proxy: error updating node {_q(node)}", node, KUBE_PROXY,
                    _kube_proxy_on_node(run, node))  # fmt: skip

    if not options.upgrade_kubelet:
        printf("skipped updating kubelet")
    else:
        printf(f"updating kubelet to version {_q(run.to)}")
        for node in [*run.control_planes, *run.workers]:
            await _step(f"failed upgrading kubelet: error updating node {_q(node)}", node, KUBELET,
                        _kubelet_on_node(run, node))  # fmt: skip

    await _sync_manifests(run)


async def _step(prefix: str, node: str, component: str, work: Awaitable[None]) -> None:
    """Run one node's step; any failure becomes Talos's wrapped error naming the node and component."""
    try:
        await work
    except UpgradeK8sError as exc:
        failure = UpgradeK8sError(f"{prefix}: {exc}", hint=exc.hint, component=component)
        failure.node = node
        raise failure from None
    except Exception as exc:
        failure = UpgradeK8sError(f"{prefix}: {exc}", hint=getattr(exc, "hint", None), component=component)
        failure.node = node
        raise failure from None


async def _pre_pull(run: _Run) -> None:
    for service in STATIC_PODS:
        reference = run.options.image(service)
        for node in run.control_planes:
            await _pull(run, node, "cri", reference)
    if not run.options.upgrade_kubelet:
        return
    reference = run.options.image(KUBELET)
    for node in [*run.control_planes, *run.workers]:
        await _pull(run, node, "system", reference)


async def _pull(run: _Run, node: str, namespace: str, reference: str) -> None:
    run.printf(f" > {_q(node)}: pre-pulling {reference}")
    try:
        await run.api.pull_image(node, namespace, reference)
    except UnimplementedError:
        run.printf(f" < {_q(node)}: not implemented, skipping")
    except Exception as exc:
        failure = UpgradeK8sError(f"error pre-pulling {reference} on {node}: {exc}", hint=getattr(exc, "hint", None),
                                  component=reference)  # fmt: skip
        failure.node = node
        raise failure from None


async def _static_pod_on_node(run: _Run, service: str, node: str) -> None:
    """upgradeStaticPodOnNode: patch this node's image, then wait for this node's pod of the new config."""
    run.printf(f" > {_q(node)}: starting update")
    version, resource_image = await run.retry(lambda: run.api.component_config(node, service), 30, log=False)
    image = run.options.image(service)
    text = await run.retry(lambda: run.api.machine_config(node), 30, log=False)
    current = config_image(text, service)
    skipped = current == image or resource_image == image
    if not await run.update(
        node, service, image, skipped=skipped, old=_tag(current) or run.options.path.from_version
    ):
        return
    run.printf(f" > {_q(node)}: waiting for {service} pod update")
    if not skipped:
        version = await _new_config_version(run, node, service, version)
    await _pod_ready(run, service, node, version)
    run.printf(f" < {_q(node)}: successfully updated")


async def _new_config_version(run: _Run, node: str, service: str, before: str) -> str:
    """The version of the node's component config once the patch has changed it."""
    start = run.pace.monotonic()
    while True:
        version, _image = await run.retry(lambda: run.api.component_config(node, service), 30, log=False)
        if version != before:
            return str(version)
        if run.pace.monotonic() - start >= run.pace.pod_limit:
            raise UpgradeK8sError(
                f"the node's {CONFIG_RESOURCES[service]} did not change after the patch "
                f"(version {before} for {run.pace.pod_limit:g}s)",
                hint=f"check `talosctl -n {node} get {CONFIG_RESOURCES[service].split('.')[0].lower()}`",
            )
        await run.pace.sleep(run.pace.poll)


async def _pod_ready(run: _Run, service: str, node: str, version: str) -> None:
    """checkPodStatus: the node's mirror pod of ``service`` with config version ``version``, Ready.
    Beyond Talos, a config that moved on again meanwhile (another change of the node's config) is
    waited for instead of waiting for a version the node no longer runs."""
    start = run.pace.monotonic()
    said = ""
    while True:
        line = ""
        try:
            latest = str((await run.api.component_config(node, service))[0])
            version = latest if _newer(latest, version) else version
            pods = [p for p in await run.api.static_pods(service) if p.host_ip == node]
            pod = pods[0] if pods else None
            if pod is None:
                line = f" > {_q(node)}: {service}: waiting, no pod on the node yet"
            elif pod.config_version != version:
                line = (f" > {_q(node)}: {service}: waiting, config version mismatch: "
                        f"got {_q(pod.config_version)}, expected {_q(version)}")  # fmt: skip
            elif not pod.ready:
                line = f" > {_q(node)}: {service}: pod is not ready, waiting"
            else:
                return
        except Exception as exc:
            if not run.api.retryable(exc):
                raise
            line = f"kubernetes endpoint watch error: {exc}"
        if line != said:
            run.printf(line)
            said = line
        if run.pace.monotonic() - start >= run.pace.pod_limit:
            raise UpgradeK8sError(
                f"context deadline exceeded ({service} on {node} not running config version {version} and "
                f"Ready within {run.pace.pod_limit:g}s; last: {line.strip()})",
                hint=f"check `talosctl -n {node} logs {service}` and `talosctl -n {node} get staticpodstatus`; "
                "re-run the same upgrade-k8s command to resume",
            )
        await run.pace.sleep(run.pace.poll)


def _newer(a: str, b: str) -> bool:
    """Whether resource version ``a`` is after ``b`` (COSI versions are counters)."""
    try:
        return int(a) > int(b)
    except ValueError:
        return False


async def _kube_proxy_on_node(run: _Run, node: str) -> None:
    if run.options.dry_run:
        run.printf(" > skipped in dry-run")
        return
    await run.patch(node, KUBE_PROXY, run.options.image(KUBE_PROXY))


async def _kubelet_on_node(run: _Run, node: str) -> None:
    """upgradeKubeletOnNode: patch, wait for the kubelet to restart healthy, then for the Node."""
    run.printf(f" > {_q(node)}: starting update")
    before: KubeletState = await run.retry(lambda: run.api.kubelet(node), 30, log=False)
    if not before.healthy:
        raise UpgradeK8sError("kubelet is not healthy", hint=f"check `talosctl -n {node} service kubelet`")
    old = await run.retry(lambda: run.api.kubelet_image(node), 30, log=False)
    image = run.options.image(KUBELET)
    skipped = old == image
    shown = (_tag(old) or run.options.path.from_version).lstrip("v")
    if not await run.update(node, KUBELET, image, skipped=skipped, old=shown):
        return
    if not skipped:
        run.printf(f" > {_q(node)}: waiting for kubelet restart")
        await _kubelet_restarted(run, node, before)
    run.printf(f" > {_q(node)}: waiting for node update")
    await _node_updated(run, node)
    run.printf(f" < {_q(node)}: successfully updated")


async def _kubelet_restarted(run: _Run, node: str, before: KubeletState) -> None:
    last = before.events[-1][0] if before.events else None
    start, restarted = run.pace.monotonic(), False
    while True:
        now: KubeletState = await run.retry(lambda: run.api.kubelet(node), 30, log=False)
        fresh = [s for t, s in now.events if last is None or t > last] or [
            s for _t, s in now.events[len(before.events) :]
        ]
        restarted = restarted or any(s != "Running" for s in fresh)
        if restarted and now.healthy:
            return
        if run.pace.monotonic() - start >= run.pace.kubelet_limit:
            what = "come back healthy" if restarted else "restart"
            raise UpgradeK8sError(
                f"kubelet did not {what} within {run.pace.kubelet_limit:g}s of the config change",
                hint=f"check `talosctl -n {node} service kubelet` and `talosctl -n {node} logs kubelet`; "
                "re-run the same upgrade-k8s command to resume",
            )
        await run.pace.sleep(run.pace.poll)


async def _node_updated(run: _Run, node: str) -> None:
    """checkNodeKubeletVersion, retried for 3 minutes."""
    version = f"v{run.to}"
    start = run.pace.monotonic()
    while True:
        try:
            problem = _node_problem(await run.api.nodes(), node, version)
        except Exception as exc:
            if not run.api.retryable(exc):
                raise
            problem = str(exc)
        if problem is None:
            return
        if run.pace.monotonic() - start >= run.pace.node_limit:
            raise UpgradeK8sError(
                problem,
                hint=f"check `talosctl -n {node} logs kubelet`; re-run the same upgrade-k8s command to resume",
            )
        await run.pace.sleep(run.pace.poll)


def _node_problem(nodes: Sequence[NodeState], address: str, version: str) -> str | None:
    for found in nodes:
        if address not in found.addresses:
            continue
        if found.kubelet_version != version:
            return f"node version mismatch: got {_q(found.kubelet_version)}, expected {_q(version)}"
        return None if found.ready else "node is not ready"
    return f"node {_q(address)} not found"


async def _sync_manifests(run: _Run) -> None:
    """manifests.SyncWithLog over the first control plane's bootstrap manifests."""
    node = run.control_planes[0]
    try:
        objects = await run.retry(lambda: run.api.manifests(node), 30, log=False)
    except Exception as exc:
        raise UpgradeK8sError(f"error fetching the bootstrap manifests of {node}: {exc}") from None
    run.printf("updating manifests")
    updated: list[dict[str, Any]] = []
    for obj in objects:
        try:
            result: SyncResult = await run.retry(
                functools.partial(run.api.sync_object, obj, run.options.dry_run), run.pace.sync_limit
            )
        except Exception as exc:
            failure = UpgradeK8sError(f"{manifest_path(obj)}: {exc}", hint=getattr(exc, "hint", None),
                                      component="manifests")  # fmt: skip
            failure.node = node
            raise failure from None
        run.printf(f" > processing manifest {result.path}")
        if result.skipped:
            run.printf(" < no changes")
        elif run.options.dry_run:
            run.printf(result.diff)
            run.printf(" < dry run, change skipped")
        else:
            run.printf(result.diff)
            run.printf(" < applied successfully")
            updated.append(obj)
    if run.options.dry_run:
        return
    run.printf("waiting for all manifests to be applied")
    kinds = [o for o in updated if o.get("kind") == "Deployment"] + [
        o for o in updated if o.get("kind") == "DaemonSet"
    ]
    for obj in kinds:
        if str(obj.get("apiVersion", "")).split("/")[0] != "apps":
            continue
        run.printf(f" > waiting for {manifest_path(obj)}")
        limit = run.pace.deployment_limit if obj.get("kind") == "Deployment" else run.pace.daemonset_limit
        start = run.pace.monotonic()
        while True:
            try:
                pending = await run.api.rollout_pending(obj)
            except Exception as exc:
                if not run.api.retryable(exc):
                    raise
                pending = str(exc)
            if pending is None:
                break
            if run.pace.monotonic() - start >= limit:
                failure = UpgradeK8sError(pending, component="manifests",
                                          hint="check the rollout with kubectl; re-run the same upgrade-k8s command")  # fmt: skip
                failure.node = node
                raise failure
            await run.pace.sleep(run.pace.poll)


def manifest_path(obj: dict[str, Any]) -> str:
    """go-kubernetes's ``manifestPath``: ``apps/v1.DaemonSet/kube-system/kube-proxy``."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    if meta.get("namespace"):
        name = f"{meta['namespace']}/{name}"
    return f"{obj.get('apiVersion', '')}.{obj.get('kind', '')}/{name}"


# --- manifests: diff and rollout ------------------------------------------------------------------

_DROPPED_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                     "deletionGracePeriodSeconds", "managedFields", "finalizers", "selfLink", "ownerReferences")  # fmt: skip


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """What go-kubernetes compares: no server-set metadata, no ``kubernetes.io/`` annotations, no
    ServiceAccount ``secrets``, and no ``status``."""
    out: dict[str, Any] = json.loads(json.dumps(obj))
    meta = out.get("metadata") or {}
    for key in _DROPPED_METADATA:
        meta.pop(key, None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if "kubernetes.io/" not in k}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    if out.get("kind") == "ServiceAccount":
        out.pop("secrets", None)
    out.pop("status", None)
    return out


def manifest_diff(path: str, current: dict[str, Any] | None, wanted: dict[str, Any]) -> str:
    """A unified diff of the two objects' YAML (empty when equal), ``a/<path>`` against ``b/<path>``."""
    from ichor.machinery.yamlio import dump_documents, from_plain

    def text(obj: dict[str, Any] | None) -> list[str]:
        return [] if obj is None else dump_documents([from_plain(obj)]).splitlines(keepends=True)

    a, b = text(None if current is None else _comparable(current)), text(_comparable(wanted))
    if a == b:
        return ""
    return "".join(difflib.unified_diff(a, b, f"a/{path}", f"b/{path}")).rstrip("\n")


def rollout_problem(obj: dict[str, Any]) -> str | None:
    """go-kubernetes's rollout checks of a Deployment/DaemonSet as read back; None when done."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    status = obj.get("status") or {}

    def n(key: str) -> int:
        return int(status.get(key) or 0)

    if obj.get("kind") == "Deployment":
        if generation != n("observedGeneration"):
            return (
                f"deployment {name} generation {generation} != observed generation {n('observedGeneration')}"
            )
        if n("readyReplicas") != n("replicas") or n("updatedReplicas") != n("replicas"):
            return f"deployment {name} ready replicas {n('readyReplicas')} != replicas {n('replicas')}"
        return None
    desired = n("desiredNumberScheduled")
    if generation != n("observedGeneration"):
        return f"expected observed generation for {name} to be {generation}, got {n('observedGeneration')}"
    if n("updatedNumberScheduled") != desired:
        return f"expected current number up-to-date for {name} to be {desired}, got {n('currentNumberScheduled')}"
    if n("currentNumberScheduled") != desired:
        return (
            f"expected current number scheduled for {name} to be {desired}, got {n('currentNumberScheduled')}"
        )
    if n("numberAvailable") != desired:
        return f"expected number available for {name} to be {desired}, got {n('numberAvailable')}"
    if n("numberReady") != desired:
        return f"expected number ready for {name} to be {desired}, got {n('numberReady')}"
    return None


# --- the real API ---------------------------------------------------------------------------------

DEFAULT_CONTROL_PLANE_PORT = 6443


def force_endpoint(endpoint: str) -> str:
    """The API server URL for ``--endpoint`` as Talos 1.7's ``KubernetesClient.ForceEndpoint``: an
    ``https://`` prefix dropped, then ``host:port`` as Go's ``net.SplitHostPort`` reads it, or, when
    that fails (no port, a bare IPv6 address), the whole text as the host and port 6443; always
    ``https`` unless the result is itself a URL, as client-go reads a ``Host``. The kubeconfig's
    server is not consulted (its port is not kept)."""
    hostport = endpoint.removeprefix("https://")
    try:
        host, port = _split_host_port(hostport)
    except ValueError:
        host, port = hostport, str(DEFAULT_CONTROL_PLANE_PORT)
    joined = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if "://" in joined and urlsplit(joined).netloc:
        return joined  # client-go takes a Host that is a URL as it is (``http://h`` -> ``http://h``)
    return f"https://{joined}"


def _split_host_port(hostport: str) -> tuple[str, str]:
    """Go's ``net.SplitHostPort``; ValueError where it errs."""
    i = hostport.rfind(":")
    if i < 0:
        raise ValueError("missing port in address")
    j = k = 0
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise ValueError("missing ']' in address")
        if end + 1 != i:
            raise ValueError("missing port in address")
        host, j, k = hostport[1:end], 1, end + 1
    else:
        host = hostport[:i]
        if ":" in host:
            raise ValueError("too many colons in address")
    if "[" in hostport[j:]:
        raise ValueError("unexpected '[' in address")
    if "]" in hostport[k:]:
        raise ValueError("unexpected ']' in address")
    return host, hostport[i + 1 :]


_UNIMPLEMENTED, _UNAVAILABLE = 12, 14
_CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


class LiveUpgradeAPI:
    """:class:`UpgradeAPI` over a Talos API client and the cluster's Kubernetes API (its admin
    kubeconfig fetched from the first control plane the client targets, :func:`force_endpoint`
    of ``endpoint`` instead of its server when given)."""

    def __init__(self, client: Any, kube: Any) -> None:
        from ichor.client._talos import Talos

        self.client = client
        self.talos = Talos(client)
        self.kube = kube

    @classmethod
    async def connect(cls, client: Any, endpoint: str = "") -> LiveUpgradeAPI:
        from ichor.client.health_k8s import fetch_kubeconfig
        from ichor.kubeapi import KubeClient, load_kubeconfig

        node = client.nodes[0] if client.nodes else client.peer_host
        text = await fetch_kubeconfig(client.with_node(node))
        config = load_kubeconfig(text, source=f"kubeconfig from {node}")
        if endpoint:
            config = dataclasses.replace(config, server=force_endpoint(endpoint))
        return cls(client, KubeClient(config))

    def retryable(self, exc: BaseException) -> bool:
        from ichor.client._errors import ConnectionFailedError, RPCError
        from ichor.client._types import NodeFailedError
        from ichor.kubeapi import KubeConnectionError, KubeStatusError

        if isinstance(exc, KubeConnectionError | ConnectionFailedError):
            return True
        if isinstance(exc, KubeStatusError):
            return exc.code in (409, 429, 500, 503, 504) or exc.reason in ("Conflict", "ServiceUnavailable")
        if isinstance(exc, RPCError | NodeFailedError):
            return exc.code == _UNAVAILABLE
        return False

    async def nodes(self) -> list[NodeState]:
        listing = await self.kube.get("/api/v1/nodes")
        out = []
        for item in (listing or {}).get("items") or []:
            meta, status = item.get("metadata") or {}, item.get("status") or {}
            addresses = tuple(str(a.get("address")) for a in status.get("addresses") or []
                              if a.get("type") == "InternalIP")  # fmt: skip
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
            )
            out.append(NodeState(str(meta.get("name", "")), addresses,
                                 str((status.get("nodeInfo") or {}).get("kubeletVersion", "")), ready,
                                 _CONTROL_PLANE_LABEL in (meta.get("labels") or {})))  # fmt: skip
        return out

    async def machine_config(self, node: str) -> str:
        found = await self.talos.with_node(node).get("MachineConfigs.config.talos.dev", "v1alpha1")
        return str(found[0].yaml_spec)

    async def apply_config(self, node: str, text: str) -> None:
        await self.talos.with_node(node).apply_config(text, mode="no-reboot")

    async def component_config(self, node: str, service: str) -> tuple[str, str]:
        found = await self.talos.with_node(node).get(CONFIG_RESOURCES[service], service)
        return str(found[0].version), str((found[0].spec or {}).get("image") or "")

    async def static_pods(self, service: str) -> list[PodState]:
        selector = quote(f"k8s-app={service}", safe="")
        listing = await self.kube.get(f"/api/v1/namespaces/kube-system/pods?labelSelector={selector}")
        out = []
        for pod in (listing or {}).get("items") or []:
            meta, status = pod.get("metadata") or {}, pod.get("status") or {}
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
            )
            out.append(PodState(str(status.get("hostIP", "")),
                                str((meta.get("annotations") or {}).get(CONFIG_VERSION_ANNOTATION, "")), ready))  # fmt: skip
        return out

    async def kubelet(self, node: str) -> KubeletState:
        found = await self.talos.with_node(node).services(KUBELET)
        if not found:
            raise UpgradeK8sError(f"{node}: the node has no kubelet service")
        service = found[0]
        events = tuple(
            (e.time.timestamp() if e.time is not None else 0.0, str(e.state)) for e in service.events
        )
        return KubeletState(service.healthy, events)

    async def kubelet_image(self, node: str) -> str:
        found = await self.talos.with_node(node).get("KubeletSpecs.kubernetes.talos.dev", KUBELET)
        return str((found[0].spec or {}).get("image") or "")

    async def static_pod_command(self, node: str, service: str) -> list[str] | None:
        from ichor.client._talos import ResourceNotFoundError

        try:
            found = await self.talos.with_node(node).get("StaticPods.kubernetes.talos.dev", service)
        except ResourceNotFoundError:
            return None
        spec = found[0].spec if found else None
        pod = spec.get("pod", spec) if isinstance(spec, dict) else None
        containers = ((pod or {}).get("spec") or {}).get("containers") or [{}]
        return [str(arg) for arg in containers[0].get("command") or []]

    async def kubelet_args(self, node: str) -> list[str] | None:
        from ichor.client._talos import ResourceNotFoundError

        try:
            found = await self.talos.with_node(node).get("KubeletSpecs.kubernetes.talos.dev", KUBELET)
        except ResourceNotFoundError:
            return None
        return [str(arg) for arg in ((found[0].spec or {}).get("args") or [])] if found else None

    async def count_resources(self, resource: str) -> int:
        from ichor.kubeapi import KubeNotFoundError

        try:
            listing = await self.kube.get(resource_path(resource))
        except KubeNotFoundError:
            return 0
        return len((listing or {}).get("items") or [])

    async def pull_image(self, node: str, namespace: str, reference: str) -> None:
        from ichor.api.gen.common import common_pb2
        from ichor.api.gen.machine import machine_pb2
        from ichor.client._errors import RPCError
        from ichor.client._replies import node_replies

        space = (
            common_pb2.ContainerdNamespace.NS_CRI
            if namespace == "cri"
            else common_pb2.ContainerdNamespace.NS_SYSTEM
        )
        client = self.client.with_node(node)
        try:
            response = await client.machine.ImagePull(
                machine_pb2.ImagePullRequest(namespace=space, reference=reference)
            )
            node_replies(response, fallback_node=node).check(f"error pulling image {reference}")
        except RPCError as exc:
            if exc.code == _UNIMPLEMENTED:
                raise UnimplementedError(str(exc)) from None
            raise

    async def pod_images(self) -> list[tuple[str, str, str]]:
        listing = await self.kube.get("/api/v1/namespaces/kube-system/pods")
        return [
            (str(((pod.get("metadata") or {}).get("labels") or {}).get("k8s-app", "")), str(c.get("name", "")),
             str(c.get("image", "")))
            for pod in (listing or {}).get("items") or []
            for c in (pod.get("spec") or {}).get("containers") or []
        ]  # fmt: skip

    async def manifests(self, node: str) -> list[dict[str, Any]]:
        found = await self.talos.with_node(node).get("Manifests.kubernetes.talos.dev")
        objects: list[dict[str, Any]] = []
        for resource in sorted(found, key=lambda r: r.id):
            items = resource.spec
            objects.extend(i for i in (items if isinstance(items, list) else []) if isinstance(i, dict))
        return objects

    async def sync_object(self, obj: dict[str, Any], dry_run: bool) -> SyncResult:
        from ichor.kubeapi import KubeNotFoundError

        api = await self.kube.resource_for(str(obj.get("apiVersion")), str(obj.get("kind")))
        meta = obj.get("metadata") or {}
        where = api.path(meta.get("namespace"), str(meta.get("name", "")))
        path = manifest_path(obj)
        try:
            current = await self.kube.get(where)
        except KubeNotFoundError:
            diff = manifest_diff(path, None, obj)
            if not dry_run:
                await self.kube.post(api.path(meta.get("namespace")), obj)
            return SyncResult(path, diff, False)
        wanted = json.loads(json.dumps(obj))
        wanted.setdefault("metadata", {})["resourceVersion"] = (current.get("metadata") or {}).get(
            "resourceVersion"
        )
        would = await self.kube.put(f"{where}?dryRun=All", wanted)
        diff = manifest_diff(path, current, would)
        if diff and not dry_run:
            await self.kube.put(where, wanted)
        return SyncResult(path, diff, diff == "")

    async def rollout_pending(self, obj: dict[str, Any]) -> str | None:
        api = await self.kube.resource_for(str(obj.get("apiVersion")), str(obj.get("kind")))
        meta = obj.get("metadata") or {}
        return rollout_problem(
            await self.kube.get(api.path(meta.get("namespace"), str(meta.get("name", ""))))
        )
