"""The SDK's result types: what :class:`~ichor.client.Talos` methods return, one dataclass per answer.

Every result names the ``node`` it came from. They are built from the Talos API's protobuf replies
(``from_proto``) and keep nothing of the wire but what a caller needs; :class:`Resource` also keeps
its COSI message (``raw``) for tools that print it as Talos does.

Nothing here dials anything or prints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal, TypeVar

from ichor.client._errors import ClientError

T = TypeVar("T")
S = TypeVar("S")


def _time(ts: Any) -> datetime | None:
    """A protobuf Timestamp as an aware datetime; None when unset (zero)."""
    if ts is None or (not ts.seconds and not ts.nanos):
        return None
    moment: datetime = ts.ToDatetime(tzinfo=UTC)
    return moment


class NodeFailedError(ClientError):
    """One node answered a call with an error (in-band, in a one-to-many reply or a stream).

    ``node`` is the node, ``error`` its error text (``rpc error: code = ... desc = ...`` when it sent
    a gRPC status), ``code`` that status code (None when it sent only text). ``str()`` is
    ``<node>: <error>``, as talosctl prints it.
    """

    node: str

    def __init__(self, node: str, error: str, code: int | None = None, *, hint: str | None = None) -> None:
        super().__init__(f"{node}: {error}" if node else error, hint=hint)
        self.node = node
        self.error = error
        self.code = code

    @property
    def code_name(self) -> str | None:
        from ichor.client._errors import code_name

        return code_name(self.code) if self.code is not None else None


class NodesFailedError(ClientError):
    """Some nodes of a call failed (raised by :meth:`Results.raise_for_errors`); ``errors`` holds one
    :class:`NodeFailedError` per failed node."""

    def __init__(self, message: str, errors: list[NodeFailedError], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.errors = list(errors)


class Results(list[T]):
    """A list of per-node results plus the nodes that failed.

    A call over several nodes returns what the nodes that answered sent; the others are in
    ``errors`` (one :class:`NodeFailedError` each). When *every* node failed the call raises
    :class:`~ichor.client.AllNodesFailedError` instead of returning. ``raise_for_errors()`` turns
    a partial failure into an exception too.
    """

    def __init__(self, items: list[T] | None = None, errors: list[NodeFailedError] | None = None) -> None:
        super().__init__(items or [])
        self.errors: list[NodeFailedError] = list(errors or [])

    def raise_for_errors(self) -> Results[T]:
        """Raise :class:`NodesFailedError` if any node failed; otherwise return self."""
        if self.errors:
            from ichor.client._replies import errors_hint, format_errors

            raise NodesFailedError(
                format_errors(self.errors).rstrip("\n"), self.errors, hint=errors_hint(self.errors)
            )
        return self


@dataclass(frozen=True)
class Version:
    """A node's ``Version`` answer."""

    node: str
    tag: str
    """``v1.7.6``-style tag."""
    sha: str
    built: str
    go_version: str
    os: str
    arch: str
    platform: str = ""
    """The platform name (``metal``, ``container``...), empty when the node did not say."""
    platform_mode: str = ""
    rbac: bool = False
    """Whether the node enforces role-based access control."""

    @classmethod
    def from_proto(cls, node: str, message: Any) -> Version:
        v = message.version
        platform = message.platform if message.HasField("platform") else None
        return cls(
            node=node,
            tag=v.tag,
            sha=v.sha,
            built=v.built,
            go_version=v.go_version,
            os=v.os,
            arch=v.arch,
            platform=platform.name if platform is not None else "",
            platform_mode=platform.mode if platform is not None else "",
            rbac=bool(message.HasField("features") and message.features.rbac),
        )


@dataclass(frozen=True)
class ServiceEvent:
    """One state change of a service (oldest first in :attr:`Service.events`)."""

    state: str
    message: str
    time: datetime | None


@dataclass(frozen=True)
class ServiceHealth:
    unknown: bool
    healthy: bool
    last_message: str = ""
    last_change: datetime | None = None

    @property
    def text(self) -> str:
        """``OK``, ``Fail`` or ``?``, as ``talosctl service`` prints it."""
        return "?" if self.unknown else ("OK" if self.healthy else "Fail")


@dataclass(frozen=True)
class Service:
    """A service on a node (``talosctl service``)."""

    node: str
    id: str
    state: str
    """``Running``, ``Waiting``, ``Preparing``, ``Finished``, ``Failed``..."""
    health: ServiceHealth
    events: tuple[ServiceEvent, ...] = ()

    @property
    def healthy(self) -> bool:
        """Running, with a health check that passed (or no health check at all: Talos reports those healthy)."""
        return self.state == "Running" and self.health.healthy and not self.health.unknown

    @classmethod
    def from_proto(cls, node: str, info: Any) -> Service:
        h = info.health
        return cls(
            node=node,
            id=info.id,
            state=info.state,
            health=ServiceHealth(
                unknown=h.unknown,
                healthy=h.healthy,
                last_message=h.last_message,
                last_change=_time(h.last_change) if h.HasField("last_change") else None,
            ),
            events=tuple(
                ServiceEvent(state=e.state, message=e.msg, time=_time(e.ts) if e.HasField("ts") else None)
                for e in info.events.events
            ),
        )


@dataclass(frozen=True)
class ServiceAction:
    """A node's answer to ``service <id> start|stop|restart``."""

    node: str
    service: str
    action: Literal["start", "stop", "restart"]
    response: str
    """The node's words (``Service "kubelet" started``)."""


@dataclass(frozen=True)
class LifecycleAction:
    """A node's answer to reboot/shutdown/reset: the action was accepted."""

    node: str
    action: Literal["reboot", "shutdown", "reset"]
    actor_id: str
    """Follows the action in the node's event stream (``talosctl events --actor-id``)."""


@dataclass(frozen=True)
class LogLine:
    """One line of a service's log (without its newline)."""

    node: str
    text: str


ApplyMode = Literal["auto", "no-reboot", "reboot", "staged", "try"]
APPLY_MODES: dict[str, int] = {"reboot": 0, "auto": 1, "no-reboot": 2, "staged": 3, "try": 4}
"""``apply_config`` modes (talosctl's ``--mode`` words) and their ``ApplyConfigurationRequest.Mode``."""
_MODE_NAMES = {number: name for name, number in APPLY_MODES.items()}


@dataclass(frozen=True)
class ApplyResult:
    """A node's answer to ``apply_config``."""

    node: str
    mode: str
    """The mode the node used (``auto`` resolves to a concrete one), as talosctl's words."""
    mode_details: str
    """What happened, in the node's words (``Applied configuration without a reboot``...)."""
    warnings: tuple[str, ...] = ()

    @classmethod
    def from_proto(cls, node: str, message: Any) -> ApplyResult:
        return cls(
            node=node,
            mode=_MODE_NAMES.get(message.mode, str(message.mode)),
            mode_details=message.mode_details,
            warnings=tuple(message.warnings),
        )


@dataclass(frozen=True)
class EtcdMember:
    """A member of the etcd cluster, as one node sees it."""

    node: str
    id: int
    hostname: str
    peer_urls: tuple[str, ...]
    client_urls: tuple[str, ...]
    is_learner: bool

    @property
    def id_hex(self) -> str:
        """The id as talosctl prints it (16 hex digits)."""
        return f"{self.id:016x}"

    @classmethod
    def from_proto(cls, node: str, member: Any) -> EtcdMember:
        return cls(
            node=node,
            id=member.id,
            hostname=member.hostname,
            peer_urls=tuple(member.peer_urls),
            client_urls=tuple(member.client_urls),
            is_learner=member.is_learner,
        )


@dataclass(frozen=True)
class Resource(Generic[S]):
    """A COSI resource read from a node: its metadata, its spec as plain data (``spec``, Talos's YAML
    shape) and as Talos's typed protobuf message (``proto``, when the type has one).

    ``Resource[MachineStatusSpec]`` is what ``talos.get(MachineStatusSpec)`` returns; ``talos.get("...")``
    by name gives ``Resource[Any]``.
    """

    node: str
    namespace: str
    type: str
    id: str
    version: str
    owner: str
    phase: str
    created: datetime | None
    updated: datetime | None
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: tuple[str, ...]
    yaml_spec: str
    proto_spec: bytes
    raw: Any = field(repr=False, compare=False)
    """The ``cosi.resource.Resource`` message as received."""

    @property
    def spec(self) -> Any:
        """The spec as plain data (dicts, lists, strings, numbers), parsed from its YAML; the YAML
        text itself when it is not YAML."""
        from ichor.machinery.errors import MachineryError
        from ichor.machinery.yamlio import load_documents, to_plain

        try:
            docs = load_documents(self.yaml_spec or "{}", source=f"{self.type} {self.id}")
        except MachineryError:
            return self.yaml_spec
        return to_plain(docs[0]) if docs else {}

    @property
    def proto(self) -> S | None:
        """The spec as Talos's typed message (``talos.resource.definitions.*``), decoded from
        ``proto_spec``; None when the type has no message or the node sent none."""
        if not self.proto_spec:
            return None
        cls = spec_message_class(self.type)
        if cls is None:
            return None
        message = cls()
        message.ParseFromString(self.proto_spec)
        typed: S = message
        return typed

    @classmethod
    def from_proto(cls, node: str, resource: Any) -> Resource[Any]:
        m = resource.metadata
        return Resource(
            node=node,
            namespace=m.namespace,
            type=m.type,
            id=m.id,
            version=m.version,
            owner=m.owner,
            phase=m.phase,
            created=_time(m.created) if m.HasField("created") else None,
            updated=_time(m.updated) if m.HasField("updated") else None,
            labels=dict(m.labels),
            annotations=dict(m.annotations),
            finalizers=tuple(m.finalizers),
            yaml_spec=resource.spec.yaml_spec,
            proto_spec=bytes(resource.spec.proto_spec),
            raw=resource,
        )


def spec_message_class(type_name: str) -> Any:
    """Talos's protobuf class for the spec of ``type_name`` (``MachineStatuses.runtime.talos.dev``), or None."""
    from ichor.machined.resources._protoenc import SPEC_MESSAGES, message_class

    full_name = SPEC_MESSAGES.get(type_name)
    return message_class(full_name) if full_name else None


def resource_type_of(message_class: type[Any]) -> str:
    """The resource type whose spec is ``message_class`` (``MachineStatusSpec`` -> ``MachineStatuses.runtime.talos.dev``)."""
    from ichor.machined.resources._protoenc import SPEC_MESSAGES

    full_name = message_class.DESCRIPTOR.full_name
    found = [t for t, name in SPEC_MESSAGES.items() if name == full_name]
    if len(found) != 1:
        from ichor.client._errors import ClientError as _ClientError

        raise _ClientError(
            f"{full_name} is the spec of {'no' if not found else 'several'} resource type(s)"
            + (f": {', '.join(found)}" if found else ""),
            hint="pass the resource type by name instead, e.g. talos.get('MachineStatuses.runtime.talos.dev')",
        )
    return found[0]


EventKind = Literal["created", "updated", "destroyed", "bootstrapped"]


@dataclass(frozen=True)
class ResourceEvent(Generic[S]):
    """One event of :meth:`Talos.watch`: a resource ``created``/``updated``/``destroyed``, or
    ``bootstrapped`` (the initial contents have all been sent; ``resource`` is None then)."""

    node: str
    kind: EventKind
    resource: Resource[S] | None


StageStatus = Literal["waiting", "ok", "skip", "info"]
_STAGE = re.compile(r"^waiting for (?P<stage>.+?): (?P<rest>.*)$", re.DOTALL)
_ELAPSED = re.compile(r"^(?P<reason>.*) \((?P<elapsed>(?:\d+m)?\d+s)\)$", re.DOTALL)


@dataclass(frozen=True)
class StageResult:
    """One step of a health check: ``stage`` (``etcd to be healthy``) is ``waiting`` (with the
    ``reason``), ``ok`` or ``skip``; ``info`` is any other line the node sent. ``str()`` is the line
    ``talosctl health`` prints (``waiting for etcd to be healthy: OK``)."""

    stage: str
    status: StageStatus
    reason: str = ""
    elapsed: str = ""
    """How long the checks had been running (``1m5s``) when a ``waiting`` result was made."""
    line: str = ""

    def __str__(self) -> str:
        if self.line or not self.stage:
            return self.line or self.reason
        rest = {"ok": "OK", "skip": "SKIP"}.get(self.status) or (
            f"{self.reason} ({self.elapsed})" if self.elapsed else self.reason
        )
        return f"waiting for {self.stage}: {rest}"

    @property
    def passed(self) -> bool:
        return self.status in ("ok", "skip")

    @classmethod
    def from_line(cls, line: str) -> StageResult:
        """Parse a progress line (``waiting for <stage>: <OK|SKIP|reason (elapsed)>``), such as a
        node's ``HealthCheck`` stream sends."""
        found = _STAGE.match(line)
        if found is None:
            return cls("", "info", reason=line, line=line)
        stage, rest = found["stage"], found["rest"]
        if rest == "OK":
            return cls(stage, "ok", line=line)
        if rest == "SKIP":
            return cls(stage, "skip", line=line)
        timed = _ELAPSED.match(rest)
        if timed is not None:
            return cls(stage, "waiting", reason=timed["reason"], elapsed=timed["elapsed"], line=line)
        return cls(stage, "waiting", reason=rest, line=line)


@dataclass(frozen=True)
class ContextInfo:
    """A talosconfig context, without its credentials."""

    name: str
    endpoints: tuple[str, ...]
    nodes: tuple[str, ...]
    current: bool
    roles: tuple[str, ...] = ()
    """The roles its client certificate carries (``os:admin``...)."""
