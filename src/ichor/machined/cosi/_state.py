"""The in-memory resource state: one collection per (namespace, type), with watches.

Writes are synchronous and atomic with respect to the event loop (there is no ``await`` inside a
write), so readers never see half a change. Every write appends an :class:`Event` to the
collection's bounded history (1024 by default). Watches are async iterators that read that history
at their own pace: a watcher that falls more than the history behind gets one ``errored`` event and
stops, never a silent gap.

Only call this from the event loop thread. The state knows nothing of controllers or of types'
print columns; ownership is enforced by comparing the writer's name to ``metadata.owner``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar, overload

from ichor.machined.cosi._errors import (
    AlreadyExistsError,
    ConflictError,
    NotFoundError,
    OwnerConflictError,
    PendingFinalizersError,
    PhaseConflictError,
)
from ichor.machined.cosi._resource import Clock, Metadata, Phase, Resource, ResourceType, utc_now

__all__ = [
    "DEFAULT_HISTORY",
    "Event",
    "EventType",
    "LabelOp",
    "LabelTerm",
    "State",
    "Watch",
    "label_equal",
    "label_exists",
    "label_not_exists",
]

S = TypeVar("S")

DEFAULT_HISTORY = 1024

TypeRef = str | ResourceType[Any]


def _type_name(type: TypeRef) -> str:
    return type if isinstance(type, str) else type.type


class EventType(enum.StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    DESTROYED = "destroyed"
    BOOTSTRAPPED = "bootstrapped"
    """All existing resources of a kind watch have been sent; live changes follow."""
    ERRORED = "errored"
    """The watch cannot continue (it fell behind the history); ``error`` says why. Last event."""


@dataclasses.dataclass(frozen=True)
class Event:
    type: EventType
    resource: Resource[Any]
    """The resource after the change; for ``destroyed`` the last state; a tombstone for markers."""
    old: Resource[Any] | None = None
    error: str | None = None


class LabelOp(enum.StrEnum):
    EQUAL = "equal"
    EXISTS = "exists"
    NOT_EXISTS = "not-exists"


@dataclasses.dataclass(frozen=True)
class LabelTerm:
    key: str
    op: LabelOp = LabelOp.EXISTS
    value: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op is LabelOp.EXISTS:
            return self.key in labels
        if self.op is LabelOp.NOT_EXISTS:
            return self.key not in labels
        return labels.get(self.key) == self.value


def label_equal(key: str, value: str) -> LabelTerm:
    return LabelTerm(key, LabelOp.EQUAL, value)


def label_exists(key: str) -> LabelTerm:
    return LabelTerm(key, LabelOp.EXISTS)


def label_not_exists(key: str) -> LabelTerm:
    return LabelTerm(key, LabelOp.NOT_EXISTS)


def _labels_match(terms: Sequence[LabelTerm], labels: Mapping[str, str]) -> bool:
    return all(term.matches(labels) for term in terms)


class _Collection:
    """Resources of one (namespace, type) and the ring buffer of their recent events."""

    def __init__(self, namespace: str, type: str, capacity: int) -> None:
        self.namespace = namespace
        self.type = type
        self.capacity = capacity
        self.items: dict[str, Resource[Any]] = {}
        self.buffer: list[Event | None] = [None] * capacity
        self.write_pos = 0
        self._wakeup: asyncio.Event | None = None

    def publish(self, event: Event) -> None:
        self.buffer[self.write_pos % self.capacity] = event
        self.write_pos += 1
        if self._wakeup is not None:
            self._wakeup.set()
            self._wakeup = None

    async def changed(self) -> None:
        """Return after the next :meth:`publish`."""
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        await self._wakeup.wait()


class Watch:
    """Async iterator of :class:`Event`; obtained from :meth:`State.watch` / :meth:`State.watch_kind`.

    It holds no resources besides its read position, so dropping it is the way to stop watching.
    """

    def __init__(
        self,
        collection: _Collection,
        initial: Iterable[Event],
        *,
        id: str | None,
        labels: Sequence[LabelTerm],
    ) -> None:
        self._collection = collection
        self._pos = collection.write_pos
        self._pending = deque(initial)
        self._id = id
        self._labels = tuple(labels)
        self._done = False

    def __aiter__(self) -> Watch:
        return self

    def _wanted(self, event: Event) -> bool:
        if self._id is not None:
            return event.resource.id == self._id
        if not self._labels:
            return True
        if _labels_match(self._labels, event.resource.metadata.labels):
            return True
        return event.old is not None and _labels_match(self._labels, event.old.metadata.labels)

    async def __anext__(self) -> Event:
        if self._pending:
            return self._pending.popleft()
        coll = self._collection
        while not self._done:
            while self._pos == coll.write_pos:
                await coll.changed()
            if coll.write_pos - self._pos > coll.capacity:
                self._done = True
                return Event(
                    EventType.ERRORED,
                    Resource.tombstone(coll.namespace, coll.type, self._id or ""),
                    error=(
                        f'buffer overrun: namespace "{coll.namespace}" type "{coll.type}", '
                        f"write pos {coll.write_pos}, pos {self._pos}, capacity {coll.capacity}"
                    ),
                )
            event = coll.buffer[self._pos % coll.capacity]
            self._pos += 1
            if event is not None and self._wanted(event):
                return event
        raise StopAsyncIteration


class State:
    """In-memory resources of every namespace, with COSI's write rules and watches."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        history: int = DEFAULT_HISTORY,
        history_of: Mapping[str, int] | None = None,
    ) -> None:
        """``history_of`` overrides ``history`` per type name: a type whose specs are large (a
        machine config can hold hundreds of MB of objects) keeps few events, or its history alone
        would keep 1024 old specs alive."""
        self._history_of = dict(history_of or {})
        if min([history, *self._history_of.values()]) < 1:
            raise ValueError("history must be at least 1")
        self._clock = clock or utc_now
        self._history = history
        self._collections: dict[tuple[str, str], _Collection] = {}

    def _collection(self, namespace: str, type: str) -> _Collection:
        key = (namespace, type)
        coll = self._collections.get(key)
        if coll is None:
            capacity = self._history_of.get(type, self._history)
            coll = self._collections[key] = _Collection(namespace, type, capacity)
        return coll

    def _current(self, namespace: str, type: TypeRef, id: str) -> tuple[_Collection, Resource[Any]]:
        coll = self._collection(namespace, _type_name(type))
        try:
            return coll, coll.items[id]
        except KeyError:
            missing = Metadata(namespace=namespace, type=coll.type, id=id)
            raise NotFoundError(f"resource {missing} doesn't exist") from None

    @staticmethod
    def _check_owner(current: Resource[Any], owner: str) -> None:
        if current.metadata.owner != owner:
            raise OwnerConflictError(
                f'resource {current.metadata} is owned by "{current.metadata.owner}"',
                hint="only the owning controller may change it; user-created resources have no owner",
            )

    def _replace(
        self, coll: _Collection, current: Resource[Any], new: Resource[Any], **changes: Any
    ) -> Resource[Any]:
        meta = dataclasses.replace(
            new.metadata,
            version=current.metadata.version + 1,
            updated=self._clock(),
            created=current.metadata.created,
            **changes,
        )
        stored = dataclasses.replace(new, metadata=meta)
        coll.items[meta.id] = stored
        coll.publish(Event(EventType.UPDATED, stored, old=current))
        return stored

    # -- reads -------------------------------------------------------------------------------

    @overload
    def get(self, namespace: str, type: ResourceType[S], id: str) -> Resource[S]: ...
    @overload
    def get(self, namespace: str, type: str, id: str) -> Resource[Any]: ...
    def get(self, namespace: str, type: TypeRef, id: str) -> Resource[Any]:
        """The resource; :class:`NotFoundError` if it does not exist."""
        return self._current(namespace, type, id)[1]

    def spec_of(self, type: ResourceType[S], id: str) -> S | None:
        """The spec of ``type``/``id`` in the type's default namespace, None if there is none
        (for readers outside controllers: services, the API, the sequencer)."""
        try:
            return self.get(type.default_namespace, type, id).spec
        except NotFoundError:
            return None

    @overload
    def list(
        self, namespace: str, type: ResourceType[S], *, labels: Sequence[LabelTerm] = ()
    ) -> list[Resource[S]]: ...
    @overload
    def list(self, namespace: str, type: str, *, labels: Sequence[LabelTerm] = ()) -> list[Resource[Any]]: ...
    def list(self, namespace: str, type: TypeRef, *, labels: Sequence[LabelTerm] = ()) -> list[Resource[Any]]:
        """Resources of a kind sorted by id, filtered by every label term (AND)."""
        coll = self._collection(namespace, _type_name(type))
        return [r for _, r in sorted(coll.items.items()) if _labels_match(labels, r.metadata.labels)]

    # -- writes ------------------------------------------------------------------------------

    def create(self, resource: Resource[S], *, owner: str = "") -> Resource[S]:
        """Store a new resource at version 1 owned by ``owner``; returns the stored copy."""
        meta = resource.metadata
        coll = self._collection(meta.namespace, meta.type)
        if meta.id in coll.items:
            existing = coll.items[meta.id].metadata
            raise AlreadyExistsError(f"resource {existing} already exists")
        now = self._clock()
        stored = dataclasses.replace(
            resource,
            metadata=dataclasses.replace(
                meta, version=1, owner=owner, phase=Phase.RUNNING, created=now, updated=now, finalizers=()
            ),
        )
        coll.items[meta.id] = stored
        coll.publish(Event(EventType.CREATED, stored))
        return stored

    def update(
        self,
        resource: Resource[S],
        *,
        owner: str = "",
        expected_version: int | None = None,
        expected_phase: Phase | None = None,
    ) -> Resource[S]:
        """Replace spec, labels and annotations; version +1.

        Owner, phase, finalizers and ``created`` are kept from the stored resource: they change
        only through their own calls (teardown, finalizers). ``expected_version`` turns a
        read-modify-write into a compare-and-swap.
        """
        meta = resource.metadata
        coll, current = self._current(meta.namespace, meta.type, meta.id)
        self._check_owner(current, owner)
        cur = current.metadata
        if expected_version is not None and cur.version != expected_version:
            raise ConflictError(
                f'resource {cur} update conflict: expected version "{expected_version}", '
                f'actual version "{cur.version}"',
                hint="read the resource again and retry the change",
            )
        if expected_phase is not None and cur.phase != expected_phase:
            raise PhaseConflictError(f"resource {cur} is not in phase {expected_phase}")
        stored = self._replace(
            coll, current, resource, owner=cur.owner, phase=cur.phase, finalizers=cur.finalizers
        )
        return stored

    def teardown(self, namespace: str, type: TypeRef, id: str, *, owner: str = "") -> bool:
        """Move the resource to ``tearingDown``; True when nothing holds it (it may be destroyed)."""
        coll, current = self._current(namespace, type, id)
        self._check_owner(current, owner)
        if current.metadata.phase is not Phase.TEARING_DOWN:
            current = self._replace(coll, current, current, phase=Phase.TEARING_DOWN)
        return not current.metadata.finalizers

    def destroy(self, namespace: str, type: TypeRef, id: str, *, owner: str = "") -> None:
        """Remove the resource; refused while finalizers are attached."""
        coll, current = self._current(namespace, type, id)
        self._check_owner(current, owner)
        if current.metadata.finalizers:
            names = " ".join(current.metadata.finalizers)
            raise PendingFinalizersError(
                f"resource {current.metadata} has pending finalizers [{names}]",
                hint="the controllers named by the finalizers must release the resource first",
            )
        del coll.items[id]
        coll.publish(Event(EventType.DESTROYED, current))

    def add_finalizer(self, namespace: str, type: TypeRef, id: str, *finalizers: str) -> Resource[Any]:
        """Attach finalizers (any writer may); refused once the resource is tearing down."""
        coll, current = self._current(namespace, type, id)
        have = current.metadata.finalizers
        missing = tuple(f for f in dict.fromkeys(finalizers) if f not in have)
        if not missing:
            return current
        if current.metadata.phase is not Phase.RUNNING:
            raise PhaseConflictError(f"resource {current.metadata} is not in phase {Phase.RUNNING}")
        return self._replace(coll, current, current, finalizers=have + missing)

    def remove_finalizer(self, namespace: str, type: TypeRef, id: str, *finalizers: str) -> Resource[Any]:
        """Detach finalizers; absent ones are ignored."""
        coll, current = self._current(namespace, type, id)
        have = current.metadata.finalizers
        keep = tuple(f for f in have if f not in finalizers)
        if keep == have:
            return current
        return self._replace(coll, current, current, finalizers=keep)

    # -- watches -----------------------------------------------------------------------------

    def watch(self, namespace: str, type: TypeRef, id: str) -> Watch:
        """Changes of one resource: first its current state (``created``, or ``destroyed`` with a
        tombstone if it does not exist), then one event per change."""
        coll = self._collection(namespace, _type_name(type))
        current = coll.items.get(id)
        first = (
            Event(EventType.CREATED, current)
            if current is not None
            else Event(EventType.DESTROYED, Resource.tombstone(namespace, coll.type, id))
        )
        return Watch(coll, [first], id=id, labels=())

    def watch_kind(
        self, namespace: str, type: TypeRef, *, bootstrap: bool = True, labels: Sequence[LabelTerm] = ()
    ) -> Watch:
        """Changes of every resource of a kind.

        With ``bootstrap``: every existing (matching) resource as ``created`` sorted by id, then a
        ``bootstrapped`` marker, then live changes. A live change is delivered when the resource
        matches ``labels`` before or after it.
        """
        coll = self._collection(namespace, _type_name(type))
        initial: list[Event] = []
        if bootstrap:
            initial = [Event(EventType.CREATED, r) for r in self.list(namespace, coll.type, labels=labels)]
            initial.append(Event(EventType.BOOTSTRAPPED, Resource.tombstone(namespace, coll.type, "")))
        return Watch(coll, initial, id=None, labels=labels)
