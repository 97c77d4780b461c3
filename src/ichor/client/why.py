"""``talosctl why``: from a service, a resource or a ``health`` stage down to the root cause.

The node already serves everything the walk needs, in Talos's wire formats: the controller graph
(``inspect.ControllerRuntimeDependencies``: which controller manages which type, which inputs it
reads), the resources (COSI ``List``: which exist and who owns them), the waits of Ichor's own
``WaitStatuses`` type (``talosctl get waits``: every stuck controller says what it waits for, why and
since when; a transform controller missing a named input waits on ``<Type>/<id>``) and the service
list (state, events). :func:`gather` reads them into a :class:`NodeView`; the walk itself
(:func:`why_service`, :func:`why_resource`) is a pure function of that view, so it is tested on a
fake graph.

Each hop is one line of the chain: a service and its state (``kubelet Waiting (2m)``), a
controller and what it waits on (``k8s.NodeIPController waits on node IP (2m): <reason>``). The walk
follows a wait on ``<Type>/<id>`` to the controller that manages that type, a service waiting for
another service to that service, a service condition (``kubelet spec``, ``time sync``, ...) to the
resource behind it. The last hop is the root cause; when its reason names a machine config key the
chain ends with ``fix:`` naming it, and when the cause is a service stopped on another node, with
the command that starts it there.

This module never prints and never raises for what it finds: a cause it cannot explain further is
still a hop, saying so.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "CONDITION_RESOURCES",
    "Chain",
    "Edge",
    "Hop",
    "NodeView",
    "ResourceRef",
    "ServiceView",
    "Wait",
    "age",
    "config_key",
    "gather",
    "pull_fix",
    "registry_of",
    "render",
    "short_type",
    "why_resource",
    "why_service",
]

WAIT_TYPE = "WaitStatuses.runtime.ichor.dev"
WAIT_NAMESPACE = "runtime"

CONDITION_RESOURCES: Mapping[str, tuple[str, str]] = {
    "time sync": ("TimeStatuses", "node"),
    "etcd spec": ("EtcdSpecs", "etcd"),
    "api certificates": ("ApiCertificates", "api"),
    "kubelet spec": ("KubeletSpecs", "kubelet"),
    "network": ("NetworkStatuses", "status"),
}
"""Talos's service condition words -> the resource (type's plural, id) that meets them."""

DAEMONS = frozenset({"apid", "trustd", "etcd", "containerd", "cri", "kubelet", "machined", "udevd"})
"""Services that run for as long as the node does: one of them Finished was stopped."""

FILE_WRITERS: Mapping[str, str] = {
    "/etc/kubernetes/kubelet.yaml": "k8s.KubeletServiceController",
    "/etc/kubernetes/bootstrap-kubeconfig": "k8s.KubeletServiceController",
}
"""Files a service waits for -> the controller that writes them (outside the state)."""

_KEY = re.compile(r"\b((?:machine|cluster)\.[A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z0-9_-]+|\[\d+\])*)")
_SERVICE_DEP = re.compile(r'^service "([^"]+)" to be "?(up|registered)"?$')
_FILE_DEP = re.compile(r'^file "([^"]+)" to exist$')
_MISSING = re.compile(r"^([A-Za-z][A-Za-z0-9]*)/(.+)$")


@dataclasses.dataclass(frozen=True)
class Edge:
    """One edge of the controller graph: ``output`` (the controller manages the type) or an input."""

    controller: str
    type: str
    namespace: str
    output: bool
    id: str = ""


@dataclasses.dataclass(frozen=True)
class ResourceRef:
    type: str
    namespace: str
    id: str
    owner: str
    updated: datetime | None = None


@dataclasses.dataclass(frozen=True)
class Wait:
    id: str
    owner: str
    waiting_for: str
    reason: str
    since: datetime | None


@dataclasses.dataclass(frozen=True)
class ServiceView:
    id: str
    state: str
    healthy: bool | None
    """None: no health check or not known yet."""
    message: str
    """The last event's message."""
    since: datetime | None
    """When the last event happened."""


@dataclasses.dataclass
class NodeView:
    """What one node told us: graph, resources by type, waits, services; ``now`` for the ages."""

    node: str
    edges: Sequence[Edge]
    resources: Mapping[str, Sequence[ResourceRef]]
    waits: Sequence[Wait]
    services: Mapping[str, ServiceView]
    now: datetime

    def managers(self, rtype: str) -> list[str]:
        return list(dict.fromkeys(e.controller for e in self.edges if e.output and e.type == rtype))

    def inputs(self, controller: str) -> list[Edge]:
        return [e for e in self.edges if e.controller == controller and not e.output]

    def find(self, rtype: str, id: str, namespace: str | None = None) -> ResourceRef | None:
        for ref in self.resources.get(rtype, ()):
            if ref.id == id and (namespace is None or ref.namespace == namespace):
                return ref
        return None

    def waits_of(self, controller: str) -> list[Wait]:
        own = [w for w in self.waits if w.owner == controller or w.id == controller]
        return sorted(own, key=lambda w: (w.id != controller, w.id))

    def type_named(self, plural: str) -> str:
        """The full type whose plural is ``plural`` (``TimeStatuses`` -> ``TimeStatuses.v1alpha1.talos.dev``)."""
        return next((e.type for e in self.edges if short_type(e.type) == plural), plural)


@dataclasses.dataclass(frozen=True)
class Hop:
    """One line: ``<subject> <state> (<age>)[: <reason>]``."""

    subject: str
    state: str
    since: datetime | None = None
    reason: str = ""


@dataclasses.dataclass
class Chain:
    node: str
    asked: str
    hops: list[Hop]
    ok: bool = False
    """The thing asked about is up: nothing waits."""
    fix: str = ""

    @property
    def root(self) -> Hop:
        return self.hops[-1]

    def as_json(self, now: datetime) -> dict[str, Any]:
        return {
            "node": self.node,
            "asked": self.asked,
            "ok": self.ok,
            "chain": [
                {
                    "subject": h.subject,
                    "state": h.state,
                    "since": h.since.isoformat() if h.since else None,
                    "age": age(h.since, now),
                    "reason": h.reason,
                }
                for h in self.hops
            ],
            "rootCause": render_hop(self.root, now),
            "fix": self.fix,
        }


def short_type(rtype: str) -> str:
    """``NodeIPs.kubernetes.talos.dev`` -> ``NodeIPs`` (how a wait names a missing input)."""
    return rtype.split(".", 1)[0]


def age(since: datetime | None, now: datetime) -> str:
    """Talos's short ages: ``12s``, ``2m``, ``1h5m``; ``?`` when unknown."""
    if since is None:
        return "?"
    seconds = max(0, int((now - since).total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60}m"


def config_key(text: str) -> str | None:
    """The first machine config key a reason names (``machine.kubelet.nodeIP.validSubnets``)."""
    found = _KEY.search(text)
    return found.group(1).rstrip(".") if found else None


def render_hop(hop: Hop, now: datetime) -> str:
    line = f"{hop.subject} {hop.state}" + (f" ({age(hop.since, now)})" if hop.since is not None else "")
    return f"{line}: {hop.reason}" if hop.reason else line


def render(chain: Chain, now: datetime) -> list[str]:
    """One line per hop (``<-`` before every hop but the first), then ``fix:`` when there is one."""
    lines = [("<- " if n else "") + render_hop(hop, now) for n, hop in enumerate(chain.hops)]
    if chain.fix:
        lines.append(f"fix: {chain.fix}")
    return lines


# --- the walk -------------------------------------------------------------------------------------


class _Walk:
    def __init__(self, view: NodeView) -> None:
        self.view = view
        self.hops: list[Hop] = []
        self.seen: set[str] = set()
        self.fix = ""

    def visit(self, key: str) -> bool:
        """False when ``key`` was already on the chain (a cycle ends the walk there)."""
        if key in self.seen:
            self.hops.append(Hop(key, "is already on this chain", reason="the waits form a cycle"))
            return False
        self.seen.add(key)
        return True

    # services ----------------------------------------------------------------------------------

    def service(self, sid: str) -> bool:
        """Walk from service ``sid``; True when it is up (nothing to explain)."""
        if not self.visit(f"service {sid}"):
            return False
        svc = self.view.services.get(sid)
        if svc is None:
            refusal = self.view.find(WAIT_TYPE, sid)
            reason = f"no service {sid} is registered on this node"
            self.hops.append(Hop(sid, "not registered", reason=reason if refusal is None else ""))
            if refusal is not None:
                self.wait_hops(sid)
            return False
        state = svc.state
        health = "" if svc.healthy is None else (" (OK)" if svc.healthy else " (Fail)")
        stopped = state == "Finished" and sid in DAEMONS
        if state in ("Running", "Finished", "Skipped") and svc.healthy is not False and not stopped:
            self.hops.append(Hop(sid, state + health, svc.since, svc.message))
            return True
        waiting = next((w for w in self.view.waits if w.id == f"service-{sid}"), None)
        if state != "Waiting" or waiting is None:
            self.hops.append(Hop(sid, state + health, svc.since, svc.message))
            node = self.view.node
            if any(w.id == sid and not w.owner for w in self.view.waits):  # its pre stage says why
                self.wait_hops(sid)
                return False
            if stopped:
                self.fix = f"start it: talosctl -n {node} service {sid} start"
            elif pulled := pull_fix(svc.message):
                self.fix = pulled
            elif state == "Failed" or svc.healthy is False:
                what = "failed" if state == "Failed" else "fails its health check"
                self.fix = f"{sid} on {node} {what}: see talosctl -n {node} logs {sid}"
            return False
        since = waiting.since or svc.since
        self.hops.append(Hop(sid, "Waiting", since, svc.message))
        conditions = waiting.waiting_for.split(": ", 1)[-1]
        for condition in _split_conditions(conditions):
            mark, seen, fix = len(self.hops), set(self.seen), self.fix
            if self.condition(sid, condition, since):
                return False
            del self.hops[mark:]  # met by now: the next condition is the one holding it back
            self.seen, self.fix = seen, fix
        return False

    def condition(self, sid: str, text: str, since: datetime | None) -> bool:
        """Follow one condition; True when it is still unmet (the chain now ends in its cause)."""
        dep = _SERVICE_DEP.match(text)
        if dep is not None:
            return not self.service(dep.group(1))
        if text in CONDITION_RESOURCES:
            plural, rid = CONDITION_RESOURCES[text]
            return not self.resource(self.view.type_named(plural), rid)
        path = _FILE_DEP.match(text)
        if path is not None:
            writer = FILE_WRITERS.get(path.group(1))
            if writer is not None and self.view.waits_of(writer):
                self.controller_waits(writer)
                return True
            if writer is None:
                self.hops.append(Hop(f'file "{path.group(1)}"', "never appears", since,
                                     "nothing on this node creates it"))  # fmt: skip
                self.fix = (f"create {path.group(1)} on the node, or remove it from the depends of "
                            f"{sid}" + (" (its spec in /usr/local/etc/containers)" if sid.startswith("ext-") else ""))  # fmt: skip
                return True
            return False
        if text.startswith("extension service config"):
            name = sid.removeprefix("ext-")
            self.hops.append(Hop(f"ExtensionServiceConfigs/{name}", "does not exist", since,
                                 f"no ExtensionServiceConfig document named {name} in the machine config"))  # fmt: skip
            self.fix = f"apply an ExtensionServiceConfig document with name: {name}"
            return True
        return False

    # resources and controllers -----------------------------------------------------------------

    def resource(self, rtype: str, rid: str, *, namespace: str | None = None) -> bool:
        """Walk from resource ``rtype``/``rid``; True when it exists and its controller waits on nothing."""
        name = f"{short_type(rtype)}/{rid}"
        if not self.visit(name):
            return False
        found = self.view.find(rtype, rid, namespace)
        managers = self.view.managers(rtype)
        if found is not None and found.owner:
            manager = found.owner
        else:
            waiting = [m for m in managers if self.view.waits_of(m)]
            manager = (waiting or managers or [""])[0]
        waits = self.view.waits_of(manager) if manager else []
        if found is not None and not waits:
            self.hops.append(Hop(name, f"exists (owner {found.owner or 'none'})", found.updated))
            return True
        if found is None and not manager:
            self.hops.append(Hop(name, "does not exist", reason="no controller on this node produces it"))
            if short_type(rtype) == "MachineConfigs":
                self.fix = (
                    f"apply a machine config: talosctl -n {self.view.node} apply-config --file <config>"
                )
            return False
        if found is None and not waits:
            missing = self.missing_inputs(manager)
            if missing:
                edge = missing[0]
                since = None
                self.hops.append(Hop(manager, f"waits on {short_type(edge.type)}/{edge.id}", since))
                self.resource(edge.type, edge.id, namespace=edge.namespace)
                return False
            self.hops.append(Hop(manager, f"has not produced {name}", reason="it records no wait"))
            return False
        self.controller_waits(manager)
        return False

    def missing_inputs(self, controller: str) -> list[Edge]:
        return [
            e
            for e in self.view.inputs(controller)
            if e.id and self.view.find(e.type, e.id, e.namespace) is None
        ]

    def controller_waits(self, controller: str) -> None:
        if not self.visit(controller):
            return
        self.wait_hops(controller)

    def wait_hops(self, controller: str) -> None:
        wait = self.view.waits_of(controller)[0]
        missing = _MISSING.match(wait.waiting_for)
        inputs = {(short_type(e.type), e.id): e for e in self.view.inputs(controller) if e.id}
        if missing is not None and (missing.group(1), missing.group(2)) in inputs:
            edge = inputs[(missing.group(1), missing.group(2))]
            self.hops.append(Hop(wait.owner or controller, f"waits on {wait.waiting_for}", wait.since))
            self.resource(edge.type, edge.id, namespace=edge.namespace)
            return
        self.hops.append(
            Hop(wait.owner or controller, f"waits on {wait.waiting_for}", wait.since, wait.reason)
        )
        key = config_key(wait.reason)
        if key is not None:
            hint = re.search(r"\((fix [^)]*)\)\s*$", wait.reason) or re.search(
                r":\s*(remove [^;]*)$", wait.reason
            )
            self.fix = hint.group(1) if hint is not None else f"fix {key} in the machine config"
        elif wait.waiting_for == "time sync":
            self.fix = "make a time server in machine.time.servers reachable from the node"
        elif pulled := pull_fix(wait.reason):
            self.fix = pulled


def _split_conditions(text: str) -> list[str]:
    """``service "cri" to be "up", time sync, file "/a, b" to exist`` -> its parts (quotes kept whole)."""
    parts, current, quoted = [], "", False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == "," and not quoted:
            parts.append(current)
            current = ""
            continue
        current += char
    return [p.strip() for p in [*parts, current] if p.strip()]


_PULL = re.compile(r'failed to pull image "([^"]+)": (.*)$')
_MIRROR = re.compile(r"mirror ([^:;\s]+(?::\d+)?)")


def registry_of(reference: str) -> str:
    """The registry host of an image reference (``docker.io`` when it names none)."""
    first = reference.split("/", 1)[0]
    return (
        first if "/" in reference and ("." in first or ":" in first or first == "localhost") else "docker.io"
    )


def pull_fix(message: str) -> str:
    """The fix for a failed image pull a service reports: the mirror to bring up, naming its key."""
    pulled = _PULL.search(message)
    if pulled is None:
        return ""
    key = f'machine.registries.mirrors["{registry_of(pulled.group(1))}"]'
    mirrors = _MIRROR.findall(pulled.group(2))
    if mirrors:
        return f"bring up the registry mirror {', '.join(dict.fromkeys(mirrors))}, or fix {key}"
    return f"make {registry_of(pulled.group(1))} reachable, or add a mirror in {key}"


def why_service(view: NodeView, sid: str) -> Chain:
    walk = _Walk(view)
    ok = walk.service(sid)
    return Chain(view.node, sid, walk.hops, ok=ok and not walk.fix, fix=walk.fix)


def why_resource(view: NodeView, rtype: str, rid: str | None, namespace: str | None = None) -> Chain:
    """Walk from ``rtype``/``rid``; without ``rid``, from the type itself (its managers' waits, else
    the id its consumers ask for)."""
    walk = _Walk(view)
    asked = f"{short_type(rtype)}/{rid}" if rid else short_type(rtype)
    if rid is None:
        rid = _wanted_id(view, rtype)
    if rid is None:
        managers = view.managers(rtype)
        stuck = [m for m in managers if view.waits_of(m)]
        if stuck:
            walk.controller_waits(stuck[0])
            return Chain(view.node, asked, walk.hops, fix=walk.fix)
        present = view.resources.get(rtype, ())
        state = f"{len(present)} exist" if present else "none exist"
        walk.hops.append(
            Hop(short_type(rtype), state, reason=f"managed by {', '.join(managers) or 'no controller'}")
        )
        return Chain(view.node, asked, walk.hops, ok=bool(present))
    ok = walk.resource(rtype, rid, namespace=namespace)
    return Chain(view.node, asked, walk.hops, ok=ok, fix=walk.fix)


def _wanted_id(view: NodeView, rtype: str) -> str | None:
    """The one id of ``rtype`` the graph names (a consumer's input), if exactly one is named."""
    ids = {e.id for e in view.edges if e.type == rtype and e.id and not e.output}
    if len(ids) == 1:
        return ids.pop()
    present = view.resources.get(rtype, ())
    return present[0].id if len(present) == 1 else None


# --- reading a node -------------------------------------------------------------------------------


def _time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def _proto_time(ts: Any) -> datetime | None:
    if ts is None or (not ts.seconds and not ts.nanos):
        return None
    return datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, UTC)


def edges_from(messages: Iterable[Any]) -> list[Edge]:
    """:class:`Edge` s from ``inspect.ControllerDependencyEdge`` messages."""
    from ichor.api.gen.inspectapi.inspect_pb2 import MANAGES

    return [Edge(e.controller_name, e.resource_type, e.resource_namespace, e.edge_type == MANAGES, e.resource_id)
            for e in messages]  # fmt: skip


def services_from(messages: Iterable[Any]) -> dict[str, ServiceView]:
    """:class:`ServiceView` s from ``machine.ServiceInfo`` messages."""
    out = {}
    for svc in messages:
        last = svc.events.events[-1] if svc.events.events else None
        healthy = None if svc.health.unknown else bool(svc.health.healthy)
        out[svc.id] = ServiceView(svc.id, svc.state, healthy, last.msg if last else "",
                                  _proto_time(last.ts) if last else None)  # fmt: skip
    return out


def wait_from(resource: Any) -> Wait:
    from ichor.machinery.yamlio import load_documents, to_plain

    docs = load_documents(resource.spec.yaml_spec or "{}", source="WaitStatus spec")
    spec = to_plain(docs[0]) if docs else {}
    meta = resource.metadata
    return Wait(meta.id, meta.owner, str(spec.get("waitingFor", "")), str(spec.get("reason", "")),
                _time(spec.get("since")))  # fmt: skip


def ref_from(resource: Any) -> ResourceRef:
    meta = resource.metadata
    return ResourceRef(meta.type, meta.namespace, meta.id, meta.owner, _proto_time(meta.updated))


async def gather(client: Any, node: str, *, now: datetime | None = None) -> NodeView:
    """Read ``node``'s graph, resources, waits and services over the Talos API (``client`` is any
    Ichor :class:`~ichor.client.Client`)."""
    import asyncio

    from google.protobuf.empty_pb2 import Empty  # type: ignore[import-untyped]

    from ichor.client._errors import RPCError
    from ichor.client._replies import node_replies

    bound = client.with_node(node)
    graph = node_replies(await bound.inspect.ControllerRuntimeDependencies(Empty()), fallback_node=node)
    graph.check("error getting controller runtime dependencies")
    edges = edges_from(edge for _, message in graph for edge in message.edges)
    listed = node_replies(await bound.machine.ServiceList(Empty()), fallback_node=node)
    listed.check("error listing services")
    services = services_from(svc for _, message in listed for svc in message.services)
    kinds = sorted({(e.namespace, e.type) for e in edges} | {(WAIT_NAMESPACE, WAIT_TYPE)})

    async def listed_or_none(namespace: str, rtype: str) -> list[Any]:
        try:
            return list(await bound.list_resources(namespace, rtype))
        except RPCError:  # a type this role may not read (secrets): walked as if empty
            return []

    found = await asyncio.gather(*(listed_or_none(ns, t) for ns, t in kinds))
    resources: dict[str, list[ResourceRef]] = {}
    waits: list[Wait] = []
    for (_, rtype), items in zip(kinds, found, strict=True):
        resources.setdefault(rtype, []).extend(ref_from(r) for r in items)
        if rtype == WAIT_TYPE:
            waits = [wait_from(r) for r in items]
    return NodeView(node, edges, resources, waits, services, now or datetime.now(UTC))


# --- health stages --------------------------------------------------------------------------------


def stage_subjects(stage: str) -> list[tuple[str, str, str]]:
    """What to walk from when ``stage`` fails, in order: ``(kind, name, nodes)`` with kind ``service``
    or ``resource`` (name ``Type/id``) and nodes ``control planes`` or ``all``."""
    from ichor.client.health import ETCD_CHECKS, KUBERNETES_CHECKS, NODE_CHECKS

    if stage in ETCD_CHECKS:
        return [("service", "etcd", "control planes")]
    if stage == NODE_CHECKS[0]:
        return [("service", "apid", "all")]
    if stage in KUBERNETES_CHECKS:
        pods = [("resource", f"StaticPods.kubernetes.talos.dev/{pod}", "control planes")
                for pod in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")]  # fmt: skip
        return [("service", "kubelet", "all"), *pods]
    return []


def health_chain(stage: str, reason: str, below: Chain | None) -> Chain:
    """The chain of a failing stage: the stage, then (when one was found) the walk below it."""
    first = Hop(f'health stage "{stage}"', "fails", reason=reason)
    if below is None:
        return Chain("", "health", [first])
    hops = [first, *(dataclasses.replace(h, subject=f"{below.node}: {h.subject}") if n == 0 else h
                     for n, h in enumerate(below.hops))]  # fmt: skip
    return Chain(below.node, "health", hops, fix=below.fix)


async def first_failing_stage(
    client: Any, info: Any, *, attempt_timeout: float = 20.0
) -> tuple[str, str] | None:
    """Run each stage of ``talosctl health`` once, in order: the first that fails and why (None: all pass)."""
    import asyncio

    from ichor.client._errors import ClientError
    from ichor.client.health import CheckFailed, CheckSkipped, cluster_checks, plain_reason

    for check in cluster_checks(client, info):
        try:
            async with asyncio.timeout(attempt_timeout):
                await check.attempt()
        except CheckSkipped:
            continue
        except CheckFailed as exc:
            return check.name, str(exc)
        except ClientError as exc:
            return check.name, plain_reason(exc)
        except TimeoutError:
            return check.name, f"no answer within {attempt_timeout:g}s"
    return None
