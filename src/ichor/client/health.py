"""Cluster health checks (``talosctl health``), run against a :class:`~ichor.client.Client`.

Stages run in order; each retries until it passes or the overall timeout runs out, reporting
``waiting for <what>: <why> (<elapsed>)`` whenever its reason changes and ``waiting for <what>: OK``
when it passes (Talos's check descriptions):

1. ``all nodes' APIs to be reachable`` - Version on every control plane and worker node;
2. ``etcd to be healthy`` - EtcdStatus with no member errors and EtcdAlarmList with no alarms, on
   every control plane node;
3. ``etcd members to be consistent across nodes`` - every control plane sees the same members;
4. ``etcd members to be control plane nodes`` - the members are exactly ``control_plane_nodes``;
5. Kubernetes stages (``kubelet to be healthy`` ...): Ichor runs no Kubernetes components yet, so
   these fail at once with that reason. They never pass.

The nodes are the ones given (``--control-plane-nodes``/``--worker-nodes``) or, by default, the
cluster members from discovery (:func:`discover`, :meth:`ClusterInfo.from_members`), as in Talos.
The same code runs in talosctl (``--server=false``) and in the node's ClusterService.
This module never prints: lines go to the ``report`` callback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from ichor.client._errors import ClientError

__all__ = [
    "KUBERNETES_CHECKS",
    "NO_KUBERNETES",
    "CheckFailed",
    "ClusterInfo",
    "HealthCheckError",
    "HealthError",
    "discover",
    "member_entries",
    "run_checks",
]

NO_KUBERNETES = "Ichor runs no Kubernetes components yet"
KUBERNETES_CHECKS = (
    "kubelet to be healthy",
    "all nodes to finish boot sequence",
    "all k8s nodes to report",
    "all control plane static pods to be running",
    "all control plane components to be ready",
    "all k8s nodes to report ready",
    "kube-proxy to report ready",
    "coredns to report ready",
    "all k8s nodes to report schedulable",
)


class HealthError(ClientError):
    """The cluster information is unusable (no control plane nodes, ...); raised before any check."""


class HealthCheckError(ClientError):
    """A check did not pass: it timed out, or it can never pass (Kubernetes stages)."""


class CheckFailed(Exception):
    """Raised by one attempt of a check: ``str()`` is the reason shown after ``waiting for ...:``."""

    def __init__(self, reason: str, *, final: bool = False) -> None:
        super().__init__(reason)
        self.final = final
        """No retry can help (the Kubernetes stages)."""


@dataclass(frozen=True)
class ClusterInfo:
    control_plane_nodes: list[str]
    worker_nodes: list[str] = field(default_factory=list)

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
        for machine_type, addresses in members:
            if not addresses:
                continue
            if machine_type in ("controlplane", "init"):
                cps.append(addresses[0])
            elif machine_type == "worker":
                workers.append(addresses[0])
        if not cps:
            raise HealthError(
                "no control plane nodes were discovered",
                hint="check `talosctl get members` (cluster.discovery.enabled must be true), or pass "
                "--control-plane-nodes and --worker-nodes",
            )
        return cls(cps, workers)


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


def _errors(reasons: list[str]) -> str:
    if len(reasons) == 1:
        return reasons[0]
    return f"{len(reasons)} errors occurred: " + "; ".join(reasons)


async def _each(nodes: Sequence[str], attempt: Callable[[str], Awaitable[None]]) -> None:
    reasons: list[str] = []
    for node in nodes:
        try:
            await attempt(node)
        except CheckFailed as exc:
            reasons.append(f"{node}: {exc}")
        except ClientError as exc:
            reasons.append(f"{node}: {exc}")
    if reasons:
        raise CheckFailed(_errors(reasons))


def _checks(client: Any, info: ClusterInfo) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
    from google.protobuf import empty_pb2  # type: ignore[import-untyped]

    from ichor.api.gen.machine import machine_pb2

    cps = info.control_plane_nodes
    every = [*cps, *info.worker_nodes]

    async def reachable() -> None:
        async def one(node: str) -> None:
            await client.with_node(node).machine.Version(empty_pb2.Empty())

        await _each(every, one)

    async def etcd_healthy() -> None:
        async def one(node: str) -> None:
            view = client.with_node(node).machine
            status = await view.EtcdStatus(empty_pb2.Empty())
            for message in status.messages:
                if message.member_status.errors:
                    raise CheckFailed("etcd member errors: " + ", ".join(message.member_status.errors))
            alarms = await view.EtcdAlarmList(empty_pb2.Empty())
            raised = [
                machine_pb2.EtcdMemberAlarm.AlarmType.Name(a.alarm)
                for m in alarms.messages
                for a in m.member_alarms
                if a.alarm
            ]
            if raised:
                raise CheckFailed("etcd alarms raised: " + ", ".join(raised))

        await _each(cps, one)

    async def members_of(node: str) -> list[Any]:
        reply = await client.with_node(node).machine.EtcdMemberList(
            machine_pb2.EtcdMemberListRequest(query_local=True)
        )
        return [m for message in reply.messages for m in message.members]

    async def consistent() -> None:
        seen: dict[str, set[int]] = {}

        async def one(node: str) -> None:
            seen[node] = {m.id for m in await members_of(node)}

        await _each(cps, one)
        first = seen[cps[0]]
        for node in cps[1:]:
            if seen[node] != first:
                raise CheckFailed(
                    f"{node}: etcd members differ from {cps[0]}'s ({len(seen[node])} vs {len(first)} members)"
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
        if len(members) != len(cps) or not expected <= hosts:
            raise CheckFailed(
                f"etcd members {sorted(hosts)} do not match the control plane nodes {sorted(expected)}"
            )

    def kubernetes(name: str) -> Callable[[], Awaitable[None]]:
        async def never() -> None:
            raise CheckFailed(f"{NO_KUBERNETES} ({name.split(' to ')[0]} is not implemented)", final=True)

        return never

    return [
        ("all nodes' APIs to be reachable", reachable),
        ("etcd to be healthy", etcd_healthy),
        ("etcd members to be consistent across nodes", consistent),
        ("etcd members to be control plane nodes", are_control_planes),
        *((name, kubernetes(name)) for name in KUBERNETES_CHECKS[:1]),
    ]


def _elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60}s" if seconds >= 60 else f"{seconds}s"


async def run_checks(
    client: Any,
    info: ClusterInfo,
    *,
    timeout: timedelta,
    report: Callable[[str], object],
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> None:
    """Run every stage in order; raise :class:`HealthCheckError` at the first that cannot pass in time."""
    start = clock()
    deadline = start + timeout.total_seconds()
    for name, check in _checks(client, info):
        last = ""
        while True:
            try:
                await check()
            except CheckFailed as exc:
                reason = str(exc)
                if reason != last:
                    report(f"waiting for {name}: {reason} ({_elapsed(clock() - start)})")
                    last = reason
                if exc.final:
                    raise HealthCheckError(
                        f"{name}: {reason}",
                        hint="Kubernetes health can be checked once Ichor runs Kubernetes; the etcd stages "
                        "above are the cluster health Ichor has today",
                    ) from None
                if clock() + interval > deadline:
                    raise HealthCheckError(
                        f"timed out waiting for {name}: {reason}",
                        hint="raise --wait-timeout, or look at the nodes named above "
                        "(`talosctl service etcd`, `talosctl logs etcd`)",
                    ) from None
                await sleep(interval)
                continue
            report(f"waiting for {name}: OK")
            break
