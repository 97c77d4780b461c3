"""The COSI resource API (``cosi.resource.State``): what ``talosctl get`` talks to.

Serves Get, List and Watch over a :class:`~ichor.machined.cosi.State` exactly as COSI runtime
v0.4.1's gRPC server does behind Talos's access policy (API spec §4):

* every resource goes out with metadata (version as a decimal string, ``undefined`` for
  tombstones; phase ``running``/``tearingDown``; timestamps; labels, annotations, finalizers) and a
  present spec whose ``yaml_spec`` is never empty and whose ``proto_spec`` is Talos's typed encoding
  for every type Talos has (``resources._protoenc``: Talos's Go clients decode that form);
* Watch sends an empty ``WatchResponse`` once the watch is set up, then the current state
  (``CREATED`` events sorted by id and ``BOOTSTRAPPED`` for a kind watch with bootstrap contents;
  ``CREATED`` or a ``DESTROYED`` tombstone for one resource), then live events;
* reads are refused as Talos refuses them: no read role -> ``not authorized``; type without a
  resource definition -> ``resource type "<type>" is not supported``; sensitive type without
  ``os:admin`` -> ``not authorized``; unknown namespace -> ``namespace "<ns>" is not supported``,
  all ``PERMISSION_DENIED``; every write is ``PERMISSION_DENIED`` (``not authorized`` for
  non-admins, ``write access is not allowed`` for admins).

The caller's roles come from an injected ``roles_of(stream)``: machined derives them from apid's
``talos-role`` metadata, the maintenance server grants ``os:reader``. Rejecting ``nodes`` metadata
on COSI calls is apid's job, not this service's. This module never writes to the state.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol, runtime_checkable

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ichor.api.gen.v1alpha1 import meta_pb2, resource_pb2, state_grpc, state_pb2
from ichor.machined.cosi import (
    META_NAMESPACE,
    NAMESPACES,
    Event,
    EventType,
    NamespaceSpec,
    NotFoundError,
    Resource,
    ResourceDefinitionSpec,
    State,
    UnknownTypeError,
    published_definition,
    spec_to_yaml,
)
from ichor.machined.resources._protoenc import SpecEncodingError, encode_spec
from ichor.machined.server._errors import cosi_errors, not_authorized

__all__ = [
    "ADMIN_ROLE",
    "READ_ROLES",
    "TALOS_ROLE_METADATA",
    "ProtoSpec",
    "RawYAMLSpec",
    "RolesOf",
    "StateService",
    "fixed_roles",
    "resource_to_proto",
    "roles_from_metadata",
]

ADMIN_ROLE = "os:admin"
READ_ROLES = frozenset({"os:admin", "os:operator", "os:reader"})
"""Roles machined lets call COSI Get/List/Watch (Talos's ``rules`` for ``/cosi.resource.State/*``)."""
TALOS_ROLE_METADATA = "talos-role"
"""Metadata key in which apid passes the caller's roles to machined, one value per role."""

RolesOf = Callable[[Stream[Any, Any]], Collection[str]]
"""Returns the roles of the caller of a stream (e.g. ``{"os:reader"}``)."""

log = logging.getLogger(__name__)

_WRITE_REFUSED = "write access is not allowed"

_WIRE_EVENT_TYPES = {
    EventType.CREATED: state_pb2.CREATED,
    EventType.UPDATED: state_pb2.UPDATED,
    EventType.DESTROYED: state_pb2.DESTROYED,
    EventType.BOOTSTRAPPED: state_pb2.BOOTSTRAPPED,
    EventType.ERRORED: state_pb2.ERRORED,
}

# Event types a client that sends api_version 0 does not know (COSI drops them for it).
_API_V1_EVENTS = frozenset({EventType.BOOTSTRAPPED, EventType.ERRORED})


@runtime_checkable
class RawYAMLSpec(Protocol):
    """A spec whose ``yaml_spec`` is given verbatim (e.g. the machine config text)."""

    def raw_yaml(self) -> str: ...


@runtime_checkable
class ProtoSpec(Protocol):
    """A spec that knows Talos's typed protobuf encoding of itself (``proto_spec``)."""

    def proto_spec(self) -> bytes: ...


def roles_from_metadata(stream: Stream[Any, Any]) -> frozenset[str]:
    """The roles apid put in ``talos-role`` metadata; trust this only on machined's own socket."""
    metadata = stream.metadata
    if metadata is None:
        return frozenset()
    return frozenset(str(value) for value in metadata.getall(TALOS_ROLE_METADATA, []))


def fixed_roles(*roles: str) -> RolesOf:
    """Every caller gets ``roles`` (the maintenance server: ``fixed_roles("os:reader")``)."""
    granted = frozenset(roles)

    def roles_of(stream: Stream[Any, Any]) -> frozenset[str]:
        return granted

    return roles_of


# --------------------------------------------------------------------------- encoding


def _proto_spec(type_name: str, spec: Any) -> bytes:
    if isinstance(spec, ResourceDefinitionSpec):
        encoded = meta_pb2.ResourceDefinitionSpec(
            resource_type=spec.type,
            display_type=spec.display_type,
            default_namespace=spec.default_namespace,
            aliases=spec.aliases,
            all_aliases=spec.all_aliases,
            print_columns=[
                meta_pb2.ResourceDefinitionSpec.PrintColumn(name=col.name, json_path=col.json_path)
                for col in spec.print_columns
            ],
            sensitivity=(
                meta_pb2.ResourceDefinitionSpec.SENSITIVE
                if spec.sensitive
                else meta_pb2.ResourceDefinitionSpec.NON_SENSITIVE
            ),
        ).SerializeToString()
        return bytes(encoded)
    if isinstance(spec, NamespaceSpec):
        return bytes(meta_pb2.NamespaceSpec(description=spec.description).SerializeToString())
    if isinstance(spec, ProtoSpec):
        return spec.proto_spec()
    try:
        encoded = encode_spec(type_name, spec)
    except SpecEncodingError as exc:  # a spec that drifted from Talos's type: serve YAML, say why
        log.warning("no typed spec for %s: %s", type_name, exc)
        return b""
    return encoded if encoded is not None else b""


class _SpecCache:
    """The ``yaml_spec`` and ``proto_spec`` of recently served specs, by identity.

    Rendering a spec is most of what a ``Get`` costs a node, and the same spec object is served
    again and again (a resource changes version far less often than it is read). Only frozen
    dataclass specs are kept, each with a reference to itself, so an entry's ``id`` cannot be
    reused by another object while it is cached; at most ``size`` entries.
    """

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._entries: OrderedDict[int, tuple[Any, str, bytes]] = OrderedDict()

    def encoded(self, type_name: str, spec: Any) -> tuple[str, bytes]:
        key = id(spec)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is spec:
            self._entries.move_to_end(key)
            return entry[1], entry[2]
        text = spec.raw_yaml() if isinstance(spec, RawYAMLSpec) else spec_to_yaml(spec)
        proto = _proto_spec(type_name, spec)
        params = getattr(type(spec), "__dataclass_params__", None)
        if params is not None and params.frozen:
            self._entries[key] = (spec, text, proto)
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return text, proto


_spec_cache = _SpecCache()


def resource_to_proto(resource: Resource[Any]) -> resource_pb2.Resource:
    """A resource as COSI puts it on the wire; tombstones carry metadata and an empty spec."""
    meta = resource.metadata
    out = resource_pb2.Resource(
        metadata=resource_pb2.Metadata(
            namespace=meta.namespace,
            type=meta.type,
            id=meta.id,
            version=meta.version_string,
            owner=meta.owner,
            phase=str(meta.phase),
            finalizers=list(meta.finalizers),
            labels=dict(meta.labels),
            annotations=dict(meta.annotations),
        ),
    )
    out.metadata.created.FromDatetime(meta.created)
    out.metadata.updated.FromDatetime(meta.updated)
    out.spec.SetInParent()
    if not resource.is_tombstone:
        out.spec.yaml_spec, out.spec.proto_spec = _spec_cache.encoded(meta.type, resource.spec)
    return out


def _event_to_proto(event: Event) -> state_pb2.Event:
    out = state_pb2.Event(event_type=_WIRE_EVENT_TYPES[event.type])
    if event.type is EventType.ERRORED:
        # COSI's errored event carries no resource, only the reason.
        out.error = event.error or "watch failed"
        return out
    out.resource.CopyFrom(resource_to_proto(event.resource))
    if event.old is not None:
        out.old.CopyFrom(resource_to_proto(event.old))
    return out


# --------------------------------------------------------------------------- queries


def _term_matches(term: resource_pb2.LabelTerm, labels: dict[str, str]) -> bool:
    op = term.op
    present = term.key in labels
    value = labels.get(term.key, "")
    wanted = list(term.value)
    if op == resource_pb2.LabelTerm.EXISTS:
        result = present
    elif op == resource_pb2.LabelTerm.NOT_EXISTS:
        result = not present
    elif op == resource_pb2.LabelTerm.EQUAL:
        result = present and bool(wanted) and value == wanted[0]
    elif op == resource_pb2.LabelTerm.IN:
        result = present and value in wanted
    elif op in (resource_pb2.LabelTerm.LT, resource_pb2.LabelTerm.LTE):
        if not present or not wanted:
            result = False
        else:
            result = value < wanted[0] if op == resource_pb2.LabelTerm.LT else value <= wanted[0]
    else:  # LT_NUMERIC, LTE_NUMERIC
        try:
            have, limit = int(value), int(wanted[0])
        except (ValueError, IndexError):
            result = False
        else:
            result = have < limit if op == resource_pb2.LabelTerm.LT_NUMERIC else have <= limit
    return result != term.invert


class _Query:
    """Label queries (any of them; each an AND of terms) and an id regexp, as COSI filters."""

    def __init__(self, label_queries: Sequence[resource_pb2.LabelQuery], id_query: str | None) -> None:
        self._label_queries = list(label_queries)
        try:
            self._id_re = re.compile(id_query) if id_query else None
        except re.error as exc:
            raise GRPCError(Status.INVALID_ARGUMENT, f"invalid id query {id_query!r}: {exc}") from None

    def matches(self, resource: Resource[Any]) -> bool:
        if self._id_re is not None and not self._id_re.search(resource.id):
            return False
        if not self._label_queries:
            return True
        labels = dict(resource.metadata.labels)
        return any(all(_term_matches(t, labels) for t in q.terms) for q in self._label_queries)

    def wants(self, event: Event) -> bool:
        if event.type in _API_V1_EVENTS:
            return True
        if self.matches(event.resource):
            return True
        # A resource that stops matching must still be seen to change, or the client keeps it.
        return event.old is not None and self.matches(event.old)


def _id_query(options: state_pb2.ListOptions | state_pb2.WatchOptions) -> str | None:
    return options.id_query.regexp if options.HasField("id_query") else None


# --------------------------------------------------------------------------- the service


class StateService(state_grpc.StateBase):
    """Read-only ``cosi.resource.State`` over ``state``; resource definitions come from the state."""

    def __init__(self, state: State, *, roles_of: RolesOf) -> None:
        self._state = state
        self._roles_of = roles_of

    def _authorize_read(self, stream: Stream[Any, Any], namespace: str, type: str) -> None:
        roles = set(self._roles_of(stream))
        if not roles & READ_ROLES:
            raise not_authorized()
        try:
            definition = published_definition(self._state, type)
        except UnknownTypeError as exc:  # an access refusal in COSI's API, not a lookup miss
            raise GRPCError(Status.PERMISSION_DENIED, str(exc)) from None
        if definition.sensitive and ADMIN_ROLE not in roles:
            raise not_authorized()
        try:
            self._state.get(META_NAMESPACE, NAMESPACES, namespace)
        except NotFoundError:
            raise GRPCError(Status.PERMISSION_DENIED, f'namespace "{namespace}" is not supported') from None

    def _refuse_write(self, stream: Stream[Any, Any]) -> GRPCError:
        if ADMIN_ROLE not in set(self._roles_of(stream)):
            return not_authorized()
        return GRPCError(Status.PERMISSION_DENIED, _WRITE_REFUSED)

    async def Get(self, stream: Stream[state_pb2.GetRequest, state_pb2.GetResponse]) -> None:
        request = await stream.recv_message()
        assert request is not None  # grpclib always delivers the request of a unary call
        self._authorize_read(stream, request.namespace, request.type)
        with cosi_errors():
            resource = self._state.get(request.namespace, request.type, request.id)
        await stream.send_message(state_pb2.GetResponse(resource=resource_to_proto(resource)))

    async def List(self, stream: Stream[state_pb2.ListRequest, state_pb2.ListResponse]) -> None:
        request = await stream.recv_message()
        assert request is not None
        self._authorize_read(stream, request.namespace, request.type)
        query = _Query(request.options.label_query, _id_query(request.options))
        with cosi_errors():
            items = self._state.list(request.namespace, request.type)
        for resource in items:
            if query.matches(resource):
                await stream.send_message(state_pb2.ListResponse(resource=resource_to_proto(resource)))

    async def Watch(self, stream: Stream[state_pb2.WatchRequest, state_pb2.WatchResponse]) -> None:
        request = await stream.recv_message()
        assert request is not None
        options = request.options
        self._authorize_read(stream, request.namespace, request.type)
        if options.tail_events > 0:
            raise GRPCError(Status.UNIMPLEMENTED, "tail events are not implemented")
        if request.HasField("id"):
            if options.bootstrap_contents:
                raise GRPCError(
                    Status.UNIMPLEMENTED, "bootstrap contents is not implemented for resource watch"
                )
            if len(options.label_query) > 0:
                raise GRPCError(Status.UNIMPLEMENTED, "label query is not implemented for resource watch")
            query = _Query((), None)
            watch = self._state.watch(request.namespace, request.type, request.id)
            initial = 1
        else:
            query = _Query(options.label_query, _id_query(options))
            bootstrap = options.bootstrap_contents
            watch = self._state.watch_kind(request.namespace, request.type, bootstrap=bootstrap)
            # The state queues the current contents (+ the bootstrapped marker) ahead of live events.
            initial = len(self._state.list(request.namespace, request.type)) + 1 if bootstrap else 0

        # "Watch ready": the client blocks until this empty message arrives.
        await stream.send_message(state_pb2.WatchResponse())

        pending: list[state_pb2.Event] = []
        seen = 0
        async for event in watch:
            seen += 1
            if query.wants(event) and (request.api_version >= 1 or event.type not in _API_V1_EVENTS):
                pending.append(_event_to_proto(event))
            # Aggregated watches get the initial contents as one batch; everything else goes
            # out one event per message.
            if pending and (not options.aggregated or seen >= initial):
                await stream.send_message(state_pb2.WatchResponse(event=pending))
                pending = []
            if event.type is EventType.ERRORED:
                return

    async def Create(self, stream: Stream[state_pb2.CreateRequest, state_pb2.CreateResponse]) -> None:
        await stream.recv_message()
        raise self._refuse_write(stream)

    async def Update(self, stream: Stream[state_pb2.UpdateRequest, state_pb2.UpdateResponse]) -> None:
        await stream.recv_message()
        raise self._refuse_write(stream)

    async def Destroy(self, stream: Stream[state_pb2.DestroyRequest, state_pb2.DestroyResponse]) -> None:
        await stream.recv_message()
        raise self._refuse_write(stream)
