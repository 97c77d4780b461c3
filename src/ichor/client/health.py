"""Cluster health checks (``talosctl health``, the node's HealthCheck, ``talosctl cluster create``).

Stages run in order; each retries until it passes or the overall timeout runs out, reporting
``waiting for <what>: <why> (<elapsed>)`` whenever its reason changes and ``waiting for <what>: OK``
when it passes (Talos's check descriptions):

1. ``all nodes' APIs to be reachable`` - Version on every control plane and worker node;
2. ``etcd to be healthy`` - on every control plane node: the ``etcd`` service is Running and its
   health check passes (ServiceList, as ``talosctl service etcd`` shows it; Talos's
   ServiceHealthAssertion), the member is not a learner and reports no errors (EtcdStatus), and
   EtcdAlarmList has no alarms;
3. ``etcd members to be consistent across nodes`` - every control plane sees the same members, and
   none of them is still a learner (Ichor's addition: a learner is not a member you can count on);
4. ``etcd members to be control plane nodes`` - the members are exactly ``control_plane_nodes``;
5. the node stages (``apid to be ready``, ``all nodes memory sizes``, ``all nodes disk sizes``,
   :mod:`ichor.client.health_nodes`); Talos 1.7 has no ``no diagnostics`` stage (1.8 added it);
6. the Kubernetes stages (``kubelet to be healthy`` ... ``all k8s nodes to report schedulable``,
   :mod:`ichor.client.health_k8s`); on nodes that run no kubelet (process nodes) the first of them
   fails at once, saying so. A stage with nothing to check (no kube-proxy DaemonSet) reports ``SKIP``.

A reason says what is being waited for, in words (``service etcd is Preparing``, ``not answering
yet``); the raw error behind it (a gRPC status, a refused connection) is kept as the reason's
``detail`` and printed only when the stage times out. :func:`wait_for` runs any list of
:class:`Check` s that way: ``talosctl cluster create`` waits for its nodes with the same stages
(:func:`cluster_checks`) plus :func:`maintenance_check`.

The nodes are the ones given (``--control-plane-nodes``/``--worker-nodes``) or, by default, the
cluster members from discovery (:func:`discover`, :meth:`ClusterInfo.from_members`), as in Talos.
The same code runs in talosctl (``--server=false``) and in the node's ClusterService.
This module never prints: lines go to the ``report`` callback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from ichor.client._errors import (
    ClientError,
    ConnectionLostError,
    EndpointUnreachableError,
    MaintenanceModeError,
    RPCError,
)
from ichor.client._types import StageResult

__all__ = [
    "CHECK_NAMES",
    "ETCD_CHECKS",
    "KUBERNETES_CHECKS",
    "NODE_CHECKS",
    "NO_KUBERNETES",
    "REACHABLE",
    "Check",
    "CheckFailed",
    "CheckSkipped",
    "ClusterInfo",
    "HealthCheckError",
    "HealthError",
    "cluster_checks",
    "discover",
    "each_node",
    "maintenance_check",
    "member_entries",
    "plain_reason",
    "run_checks",
    "service_state",
    "stages",
    "wait_for",
]

NO_KUBERNETES = "the nodes run no Kubernetes"
REACHABLE = "all nodes' APIs to be reachable"
ETCD_CHECKS = (
    "etcd to be healthy",
    "etcd members to be consistent across nodes",
    "etcd members to be control plane nodes",
)
NODE_CHECKS = ("apid to be ready", "all nodes memory sizes", "all nodes disk sizes")
KUBERNETES_CHECKS = (
    "kubelet to be healthy",
    "all nodes to finish boot sequence",
    "all k8s nodes to report",
    "all k8s nodes to report ready",
    "all control plane static pods to be running",
    "all control plane components to be ready",
    "kube-proxy to report ready",
    "coredns to report ready",
    "all k8s nodes to report schedulable",
)
CHECK_NAMES = (REACHABLE, *ETCD_CHECKS, *NODE_CHECKS, *KUBERNETES_CHECKS)
"""The stages of ``talosctl health``, in order (Talos 1.7's: a Node's Ready comes before the control
plane's static pods; Talos 1.8 moved it after them)."""

_K8S_LOOK = "(`talosctl service kubelet`, `talosctl logs kubelet`, `talosctl containers -k`)"
_LOOK_AT = {
    **{name: _K8S_LOOK for name in KUBERNETES_CHECKS},
    NODE_CHECKS[0]: "(`talosctl service apid`, `talosctl logs apid`)",
    NODE_CHECKS[1]: "(`talosctl memory`: give the machine more memory)",
    NODE_CHECKS[2]: "(`talosctl disks`: install to a larger system disk)",
}
"""Where to look when a stage times out (etcd's services otherwise)."""
_UNAVAILABLE = 14
_NOT_ANSWERING = "not answering yet"


class HealthError(ClientError):
    """The cluster information is unusable (no control plane nodes, ...); raised before any check."""


class HealthCheckError(ClientError):
    """A check did not pass: it timed out, or it can never pass (Kubernetes stages)."""


class CheckSkipped(Exception):
    """Raised by an attempt whose subject is not deployed (no kube-proxy DaemonSet): the stage
    reports ``SKIP`` and the next one runs, as Talos's conditions do."""


class CheckFailed(Exception):
    """Raised by one attempt of a check: ``str()`` is the reason shown after ``waiting for ...:``."""

    def __init__(
        self, reason: str, *, final: bool = False, detail: str = "", hint: str | None = None
    ) -> None:
        super().__init__(reason)
        self.final = final
        """No retry can help (no kubelet on any control plane)."""
        self.hint = hint
        """What to do, when ``final``."""
        self.detail = detail
        """The error behind the reason (a gRPC status, ...), shown only if the stage times out."""


@dataclass(frozen=True)
class Check:
    """One stage: ``attempt()`` returns when the condition holds, raises :class:`CheckFailed` (or
    a :class:`ClientError`) when it does not yet."""

    name: str
    attempt: Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class ClusterInfo:
    control_plane_nodes: list[str]
    worker_nodes: list[str] = field(default_factory=list)
    other_addresses: dict[str, list[str]] = field(default_factory=dict)
    """A node's addresses besides the one it is named by (a node on two networks): an etcd member
    advertised on any of them is that node, as Talos matches members against all of a node's IPs."""

    @classmethod
    def from_flags(
        cls, control_plane_nodes: Sequence[str], worker_nodes: Sequence[str], init_node: str = ""
    ) -> ClusterInfo | None:
        """The nodes given on the command line; ``None`` when none are (discover them instead)."""
        cps = [n for n in control_plane_nodes if n]
        if init_node and init_node not in cps:
            cps.append(init_node)
        workers = [n for n in worker_nodes if n]
        if not cps and not workers:
            return None
        if not cps:
            raise HealthError(
                "control plane nodes are not known",
                hint="pass --control-plane-nodes <IP>,<IP> with --worker-nodes, or neither to use the "
                "cluster members from discovery",
            )
        return cls(cps, workers)

    @classmethod
    def from_members(cls, members: Iterable[tuple[str, Sequence[str]]]) -> ClusterInfo:
        """From discovered cluster members, each ``(machine type, addresses)``: the first address of
        each control plane (``controlplane``, ``init``) and worker; other types are left out."""
        cps: list[str] = []
        workers: list[str] = []
        others: dict[str, list[str]] = {}
        for machine_type, addresses in members:
            if not addresses:
                continue
            if machine_type in ("controlplane", "init"):
                cps.append(addresses[0])
            elif machine_type == "worker":
                workers.append(addresses[0])
            if len(addresses) > 1:
                others[addresses[0]] = list(addresses[1:])
        if not cps:
            raise HealthError(
                "no control plane nodes were discovered",
                hint="check `talosctl get members` (cluster.discovery.enabled must be true), or pass "
                "--control-plane-nodes and --worker-nodes",
            )
        return cls(cps, workers, others)


def member_entries(resources: Iterable[Any]) -> list[tuple[str, list[str]]]:
    """``(machine type, addresses)`` of COSI ``Members.cluster.talos.dev`` resources (protobuf)."""
    from ichor.machinery.yamlio import load_documents, to_plain

    out: list[tuple[str, list[str]]] = []
    for resource in resources:
        docs = to_plain(load_documents(resource.spec.yaml_spec or "{}", source="member spec"))
        spec = docs[0] if docs and isinstance(docs[0], dict) else {}
        out.append((str(spec.get("machineType", "")), [str(a) for a in spec.get("addresses") or []]))
    return out


async def discover(client: Any) -> ClusterInfo:
    """The cluster's nodes from the ``members`` resources of the node ``client`` is bound to."""
    resources = await client.list_resources("cluster", "Members.cluster.talos.dev")
    return ClusterInfo.from_members(member_entries(resources))


def plain_reason(exc: ClientError) -> str:
    """What a client error means while a cluster is starting, in words: a node whose API (or whose
    etcd) cannot be reached yet is "not answering yet"; anything else (a TLS failure, a refusal) is
    the error itself, without its gRPC code."""
    if isinstance(exc, EndpointUnreachableError | ConnectionLostError):
        return _NOT_ANSWERING
    if isinstance(exc, MaintenanceModeError):
        return "still in maintenance mode"
    if isinstance(exc, RPCError):
        return _NOT_ANSWERING if exc.code == _UNAVAILABLE else exc.rpc_message
    return str(exc)


async def each_node(nodes: Sequence[str], attempt: Callable[[str], Awaitable[None]]) -> None:
    """Run ``attempt(node)`` on every node; raise one :class:`CheckFailed` naming each node that
    failed, nodes with the same reason together (``a, b: not answering yet``)."""
    by_reason: dict[str, list[str]] = {}
    details: list[str] = []
    for node in nodes:
        try:
            await attempt(node)
        except CheckFailed as exc:
            by_reason.setdefault(str(exc), []).append(node)
            if exc.detail:
                details.append(f"{node}: {exc.detail}")
        except ClientError as exc:
            by_reason.setdefault(plain_reason(exc), []).append(node)
            details.append(f"{node}: {exc}")
    if by_reason:
        reason = "; ".join(f"{', '.join(failed)}: {why}" for why, failed in by_reason.items())
        raise CheckFailed(reason, detail="; ".join(details))


def _service(services: Iterable[Any], name: str) -> Any:
    return next((s for s in services if s.id == name), None)


def service_state(service: Any, name: str) -> str | None:
    """Why ``service`` (a ServiceInfo, None when the node has none) is not Running and healthy."""
    if service is None:
        return f"service {name} is not started yet"
    if service.state != "Running":
        events = service.events.events
        last = f" ({events[-1].msg})" if events and events[-1].msg else ""
        return f"service {name} is {service.state}{last}"
    if service.health.unknown:
        return f"service {name} is Running, its health is not known yet"
    if not service.health.healthy:
        return f"service {name} is Running, its last health check failed: {service.health.last_message or 'no reason given'}"
    return None


def cluster_checks(
    client: Any,
    info: ClusterInfo,
    *,
    k8s_endpoint: str = "",
    kube: Callable[[], Awaitable[Any]] | None = None,
) -> list[Check]:
    """The stages of ``talosctl health`` (:data:`CHECK_NAMES`) over ``client``, in order."""
    from google.protobuf import empty_pb2  # type: ignore[import-untyped]

    from ichor.api.gen.machine import machine_pb2

    cps = info.control_plane_nodes
    every = [*cps, *info.worker_nodes]

    async def reachable() -> None:
        async def one(node: str) -> None:
            await client.with_node(node).machine.Version(empty_pb2.Empty())

        await each_node(every, one)

    async def etcd_healthy() -> None:
        async def one(node: str) -> None:
            view = client.with_node(node).machine
            listing = await view.ServiceList(empty_pb2.Empty())
            service = _service((s for m in listing.messages for s in m.services), "etcd")
            # A member that is still a learner fails its health check (a quorum read): say why.
            if service is not None and service.state == "Running":
                status = await view.EtcdStatus(empty_pb2.Empty())
                for message in status.messages:
                    if message.member_status.is_learner:
                        raise CheckFailed("etcd is a learner, not yet promoted to a voting member")
                    if message.member_status.errors:
                        raise CheckFailed("etcd member errors: " + ", ".join(message.member_status.errors))
            waiting = service_state(service, "etcd")
            if waiting:
                raise CheckFailed(waiting)
            alarms = await view.EtcdAlarmList(empty_pb2.Empty())
            raised = [
                machine_pb2.EtcdMemberAlarm.AlarmType.Name(a.alarm)
                for m in alarms.messages
                for a in m.member_alarms
                if a.alarm
            ]
            if raised:
                raise CheckFailed("etcd alarms raised: " + ", ".join(raised))

        await each_node(cps, one)

    async def members_of(node: str) -> list[Any]:
        reply = await client.with_node(node).machine.EtcdMemberList(
            machine_pb2.EtcdMemberListRequest(query_local=True)
        )
        return [m for message in reply.messages for m in message.members]

    async def consistent() -> None:
        seen: dict[str, list[Any]] = {}

        async def one(node: str) -> None:
            seen[node] = await members_of(node)

        await each_node(cps, one)
        learners = {
            m.id: m.hostname or f"{m.id:x}" for members in seen.values() for m in members if m.is_learner
        }
        if learners:
            voting = {m.id for members in seen.values() for m in members} - set(learners)
            raise CheckFailed(
                f"{len(voting)} of {len(cps)} control planes voting "
                f"(learner: {', '.join(sorted(learners.values()))})"
            )
        first = {m.id for m in seen[cps[0]]}
        for node in cps[1:]:
            ids = {m.id for m in seen[node]}
            if ids != first:
                raise CheckFailed(
                    f"{node}: etcd members differ from {cps[0]}'s ({len(ids)} vs {len(first)} members)"
                )

    async def are_control_planes() -> None:
        members = await members_of(cps[0])
        hosts = set()
        for member in members:
            for url in member.peer_urls:
                host = urlsplit(url).hostname
                if host:
                    hosts.add(host)
        expected = set(cps)
        found = {cp for cp in cps if hosts & {cp, *info.other_addresses.get(cp, ())}}
        if len(members) != len(cps) or found != expected:
            raise CheckFailed(
                f"etcd members {sorted(hosts)} do not match the control plane nodes {sorted(expected)}"
            )

    from ichor.client.health_k8s import kubernetes_checks
    from ichor.client.health_nodes import node_checks

    attempts = [reachable, etcd_healthy, consistent, are_control_planes]
    etcd = [Check(name, attempt) for name, attempt in zip(CHECK_NAMES, attempts, strict=False)]
    return [
        *etcd,
        *node_checks(client, info),
        *kubernetes_checks(client, info, k8s_endpoint=k8s_endpoint, kube=kube),
    ]


def maintenance_check(client: Any, nodes: Sequence[str]) -> Check:
    """Every node of ``nodes`` answers on its insecure maintenance API (``client`` is a maintenance-mode
    client, ``insecure=True``) with its machine in the ``maintenance`` stage (``MachineStatuses``)."""
    from ichor.api.gen.v1alpha1 import state_pb2
    from ichor.machinery.yamlio import load_documents, to_plain

    async def one(node: str) -> None:
        request = state_pb2.GetRequest(
            namespace="runtime", type="MachineStatuses.runtime.talos.dev", id="machine"
        )
        resource = (await client.with_node(node).cosi.Get(request)).resource
        docs = to_plain(load_documents(resource.spec.yaml_spec or "{}", source="machine status spec"))
        stage = docs[0].get("stage") if docs and isinstance(docs[0], dict) else None
        if stage != "maintenance":
            raise CheckFailed(f"machine stage is {stage or 'unknown'}, not maintenance")

    async def attempt() -> None:
        await each_node(nodes, one)

    return Check("all nodes to be in maintenance mode", attempt)


def _elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60}s" if seconds >= 60 else f"{seconds}s"


async def stages(
    checks: Iterable[Check],
    *,
    timeout: timedelta,
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> AsyncIterator[StageResult]:
    """Run ``checks`` in order, each until it passes, yielding a :class:`StageResult` whenever a
    stage's reason changes and when it passes (``ok``) or is skipped; raise :class:`HealthCheckError`
    (after yielding its last reason) at the first that cannot pass within ``timeout`` (for all of
    them together), with the last error behind it."""
    start = clock()
    deadline = start + timeout.total_seconds()
    for check in checks:
        last = ""
        while True:
            try:
                await check.attempt()
            except CheckSkipped:
                yield StageResult(check.name, "skip", line=f"waiting for {check.name}: SKIP")
                break
            except (CheckFailed, ClientError) as exc:
                failed = (
                    exc if isinstance(exc, CheckFailed) else CheckFailed(plain_reason(exc), detail=str(exc))
                )
                reason = str(failed)
                if reason != last:
                    elapsed = _elapsed(clock() - start)
                    yield StageResult(
                        check.name,
                        "waiting",
                        reason=reason,
                        elapsed=elapsed,
                        line=f"waiting for {check.name}: {reason} ({elapsed})",
                    )
                    last = reason
                if failed.final:
                    raise HealthCheckError(f"{check.name}: {reason}", hint=failed.hint) from None
                if clock() + interval > deadline:
                    behind = f" (last error: {failed.detail})" if failed.detail else ""
                    raise HealthCheckError(
                        f"timed out waiting for {check.name}: {reason}{behind}",
                        hint="raise --wait-timeout, or look at the nodes named above "
                        + _LOOK_AT.get(check.name, "(`talosctl service etcd`, `talosctl logs etcd`)"),
                    ) from None
                await sleep(interval)
                continue
            yield StageResult(check.name, "ok", line=f"waiting for {check.name}: OK")
            break


async def wait_for(
    checks: Iterable[Check],
    *,
    timeout: timedelta,
    report: Callable[[str], object],
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> None:
    """:func:`stages`, reporting each result's line (``waiting for <what>: ...``) to ``report``."""
    async for result in stages(checks, timeout=timeout, interval=interval, clock=clock, sleep=sleep):
        report(str(result))


async def run_checks(
    client: Any,
    info: ClusterInfo,
    *,
    timeout: timedelta,
    report: Callable[[str], object],
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    k8s_endpoint: str = "",
) -> None:
    """``talosctl health``: every stage of :func:`cluster_checks`, in order (see :func:`wait_for`);
    ``k8s_endpoint`` replaces the kubeconfig's API server host (``--k8s-endpoint``)."""
    await wait_for(
        cluster_checks(client, info, k8s_endpoint=k8s_endpoint),
        timeout=timeout,
        report=report,
        interval=interval,
        clock=clock,
        sleep=sleep,
    )
