"""``talosctl upgrade-k8s``'s pre-upgrade checks: removed flags, feature gates, admission plugins and API resources.

Talos 1.7.6 runs go-kubernetes v0.2.9's ``upgrade.Checks`` after discovering the nodes and before
pre-pulling anything (in a dry run too). For an upgrade path with an entry in :data:`REMOVED`
(``1.29->1.30`` for the 1.30.x line: eight feature gates and the ``SecurityContextDeny`` admission
plugin) it says ``checking for removed Kubernetes component flags`` and reads, on every control
plane, the ``StaticPods`` of kube-apiserver, kube-controller-manager and kube-scheduler (the first
container's command) and, on every node it discovered (workers only with ``--upgrade-kubelet``),
the ``KubeletSpec`` args; then ``checking for removed Kubernetes API resource versions`` and lists
each removed resource (``podsecuritypolicies.v1beta1.policy``) on the API server, a 404 counting
as none. Anything found stops the upgrade with Talos's tables (a Go ``tabwriter``, padding 3): a
``REMOVED ADMISSION PLUGIN``, ``REMOVED FEATURE GATE`` and ``REMOVED FLAG`` table (``NODE``,
``COMPONENT``, the value) and a ``REMOVED RESOURCE``/``COUNT`` one. A path without an entry
(within one minor, e.g. 1.30.2 -> 1.30.3) checks nothing and says nothing.

Matching is Talos's: a flag matches on the text before ``=`` (``--flag`` or ``--flag=value``); only
the first ``--feature-gates`` and ``--enable-admission-plugins`` argument counts, split on ``,``
(a gate by its name before ``=``). Go prints the resource table in map order; here it is sorted.

Reads go through :class:`ChecksAPI` (the live one is
:class:`~ichor.client.upgrade_k8s.LiveUpgradeAPI`); the failure is
:class:`~ichor.client.upgrade_k8s.UpgradeK8sError` with :class:`RemovedItems` as ``.removed``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

from ichor.client._output import format_tabbed

__all__ = ["REMOVED", "ChecksAPI", "ComponentChecks", "RemovedItems", "find_removed"]

Printf = Callable[[str], None]

KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KUBELET = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
)


@dataclasses.dataclass(frozen=True)
class ComponentChecks:
    """What one upgrade path removes (go-kubernetes's ``componentChecks``)."""

    feature_gates: tuple[str, ...] = ()
    """Common to kube-apiserver, kube-controller-manager and kube-scheduler."""
    apiserver_flags: tuple[str, ...] = ()
    apiserver_admission_plugins: tuple[str, ...] = ()
    apiserver_resources: tuple[str, ...] = ()
    """``resource.version.group`` as ``schema.ParseResourceArg`` reads it."""
    controller_manager_flags: tuple[str, ...] = ()
    scheduler_flags: tuple[str, ...] = ()
    kubelet_flags: tuple[str, ...] = ()


REMOVED: dict[str, ComponentChecks] = {
    "1.24->1.25": ComponentChecks(
        feature_gates=("CSIVolumeFSGroupPolicy", "ConfigurableFSGroupPolicy", "PodDisruptionBudget", "SelectorIndex"),
        apiserver_flags=("service-account-api-audiences",),
        apiserver_admission_plugins=("PodSecurityPolicy",),
        apiserver_resources=("podsecuritypolicies.v1beta1.policy",),
        controller_manager_flags=("deleting-pods-qps", "deleting-pods-burst", "register-retry-count"),
    ),
    "1.25->1.26": ComponentChecks(feature_gates=("DynamicKubeletConfig",), apiserver_flags=("master-service-namespace",)),
    "1.26->1.27": ComponentChecks(
        feature_gates=("ExpandCSIVolumes", "ExpandInUsePersistentVolumes", "ExpandPersistentVolumes",
                       "ControllerManagerLeaderMigration", "CSIMigration", "CSIInlineVolume", "EphemeralContainers",
                       "LocalStorageCapacityIsolation", "NetworkPolicyEndPort", "StatefulSetMinReadySeconds",
                       "IdentifyPodOS", "DaemonSetUpdateSurge"),
        controller_manager_flags=("enable-taint-manager", "pod-eviction-timeout"),
        kubelet_flags=("container-runtime", "master-service-namespace"),
    ),
    "1.27->1.28": ComponentChecks(
        feature_gates=("AdvancedAuditing", "DelegateFSGroupToCSIDriver", "DevicePlugins",
                       "DisableAcceleratorUsageMetrics", "EndpointSliceTerminatingCondition", "CSIStorageCapacity",
                       "CSIMigrationGCE", "KubeletCredentialProviders", "MixedProtocolLBService",
                       "ServiceInternalTrafficPolicy", "ServiceIPStaticSubrange", "WindowsHostProcessContainers"),
    ),
    "1.28->1.29": ComponentChecks(apiserver_resources=("clustercidrs.v1alpha1.networking.k8s.io",)),
    "1.29->1.30": ComponentChecks(
        feature_gates=("ExpandedDNSConfig", "ExperimentalHostUserNamespaceDefaultingGate", "IPTablesOwnershipCleanup",
                       "KubeletPodResources", "KubeletPodResourcesGetAllocatable", "MinimizeIPTablesRestore",
                       "ProxyTerminatingEndpoints", "RemoveSelfLink"),
        apiserver_admission_plugins=("SecurityContextDeny",),
    ),
}  # fmt: skip
"""go-kubernetes v0.2.9's ``upgradeVersionCheck`` (Talos 1.7.6), by ``upgrade.Path.String()``."""


class ChecksAPI(Protocol):
    """What the checks read."""

    async def static_pod_command(self, node: str, service: str) -> list[str] | None:
        """The first container's command of the node's ``StaticPods`` ``service``; None without one."""
        ...

    async def kubelet_args(self, node: str) -> list[str] | None:
        """The node's ``KubeletSpec`` args; None without one."""
        ...

    async def count_resources(self, resource: str) -> int:
        """How many objects the API server lists for ``resource.version.group`` (0 when it answers 404)."""
        ...


Item = tuple[str, str, str]
"""(node, component, value)."""


@dataclasses.dataclass
class RemovedItems:
    """go-kubernetes's ``ComponentRemovedItemsError``: what was found, and Talos's text for it."""

    admission_plugins: list[Item] = dataclasses.field(default_factory=list)
    feature_gates: list[Item] = dataclasses.field(default_factory=list)
    flags: list[Item] = dataclasses.field(default_factory=list)
    resources: dict[str, int] = dataclasses.field(default_factory=dict)

    def add_flags(self, node: str, component: str, args: Sequence[str], removed: Sequence[str]) -> None:
        keys = {arg.split("=", 1)[0] for arg in args}
        self.flags += [(node, component, flag) for flag in removed if f"--{flag}" in keys]

    def add_feature_gates(
        self, node: str, component: str, args: Sequence[str], removed: Sequence[str]
    ) -> None:
        values = _first_list(args, "--feature-gates")
        if values is not None:
            names = {gate.split("=")[0] for gate in values}
            self.feature_gates += [(node, component, gate) for gate in removed if gate in names]

    def add_admission_plugins(
        self, node: str, component: str, args: Sequence[str], removed: Sequence[str]
    ) -> None:
        values = _first_list(args, "--enable-admission-plugins")
        if values is not None:
            self.admission_plugins += [(node, component, plugin) for plugin in removed if plugin in values]

    def __bool__(self) -> bool:
        return bool(self.admission_plugins or self.feature_gates or self.flags or self.resources)

    def text(self) -> str:
        """``ComponentRemovedItemsError.Error()``: each non-empty table after a blank line."""
        lines: list[str] = []
        for title, items in (("REMOVED ADMISSION PLUGIN", self.admission_plugins),
                             ("REMOVED FEATURE GATE", self.feature_gates), ("REMOVED FLAG", self.flags)):  # fmt: skip
            if items:
                lines += ["", f"NODE\tCOMPONENT\t{title}"] + ["\t".join(item) for item in items]
        if self.resources:
            lines += ["", "REMOVED RESOURCE\tCOUNT\t"]
            lines += [f"{resource}\t{count}\t" for resource, count in sorted(self.resources.items())]
        return format_tabbed("\n".join(lines) + "\n") if lines else ""


def _first_list(args: Sequence[str], prefix: str) -> list[str] | None:
    """The comma-separated values of the first argument starting with ``prefix`` (as Talos: a
    prefix match, then ``prefix=`` trimmed)."""
    for arg in args:
        if arg.startswith(prefix):
            value = arg[len(prefix) + 1 :] if arg.startswith(prefix + "=") else arg
            return value.split(",")
    return None


async def find_removed(
    api: ChecksAPI, path: str, control_planes: Sequence[str], workers: Sequence[str], printf: Printf
) -> RemovedItems:
    """``Checks.Run`` for the upgrade path ``path`` (``1.29->1.30``): what the cluster still uses
    that the new version removed (empty when nothing, or when the path has no checks)."""
    found = RemovedItems()
    checks = REMOVED.get(path)
    if checks is None:
        return found
    printf("checking for removed Kubernetes component flags")
    for node in control_planes:
        for service in (KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER):
            command = await api.static_pod_command(node, service)
            if command is None:
                continue
            if service == KUBE_APISERVER:
                found.add_admission_plugins(node, service, command, checks.apiserver_admission_plugins)
                found.add_flags(node, service, command, checks.apiserver_flags)
            elif service == KUBE_CONTROLLER_MANAGER:
                found.add_flags(node, service, command, checks.controller_manager_flags)
            else:
                found.add_flags(node, service, command, checks.scheduler_flags)
            found.add_feature_gates(node, service, command, checks.feature_gates)
    for node in [*control_planes, *workers]:
        args = await api.kubelet_args(node)
        if args is not None:
            found.add_flags(node, KUBELET, args, checks.kubelet_flags)
    printf("checking for removed Kubernetes API resource versions")
    for resource in checks.apiserver_resources:
        count = await api.count_resources(resource)
        if count > 0:
            found.resources[resource] = count
    return found


def resource_path(resource: str) -> str:
    """The list URL of ``resource.version.group`` (``schema.ParseResourceArg``: two dots at least)."""
    parts = resource.split(".", 2)
    if len(parts) < 3:
        raise ValueError(f"failed to parse group version resource {resource}")
    name, version, group = parts
    return f"/apis/{group}/{version}/{name}"
