"""Waiting conditions as resources: "I am waiting on X because Y, since T".

Ichor goes beyond Talos here: a controller that cannot make progress publishes a
``WaitStatuses.runtime.ichor.dev`` resource (alias ``waits``) so ``talosctl get waits`` explains
why something is not up yet. The resource id is the waiter's name (usually the controller's), it is
owned by the waiter, and it disappears when the wait is over.

This module only reads and writes wait resources; it never decides what to wait for.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from ichor.machined.cosi._errors import NotFoundError
from ichor.machined.cosi._resource import PrintColumn, Resource, ResourceType
from ichor.machined.cosi._state import State

__all__ = ["WAIT_STATUSES", "WaitStatusSpec", "WaitingFor", "clear_wait", "publish_wait"]


@dataclasses.dataclass(frozen=True)
class WaitStatusSpec:
    waiting_for: str
    reason: str
    since: datetime
    next_retry: datetime | None = dataclasses.field(default=None, metadata={"omitempty": True})


WAIT_STATUSES: ResourceType[WaitStatusSpec] = ResourceType(
    type="WaitStatuses.runtime.ichor.dev",
    default_namespace="runtime",
    spec_class=WaitStatusSpec,
    aliases=("waits",),
    print_columns=(
        PrintColumn("Waiting For", "{.waitingFor}"),
        PrintColumn("Reason", "{.reason}"),
        PrintColumn("Since", "{.since}"),
    ),
)


class WaitingFor(Exception):
    """Raised by a transform's ``map_inputs`` when it cannot produce outputs yet.

    The runner publishes the wait, keeps the existing outputs, and runs again when an input
    changes or, with ``retry_after`` (seconds), after that delay.
    """

    def __init__(self, waiting_for: str, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(f"waiting for {waiting_for}: {reason}")
        self.waiting_for = waiting_for
        self.reason = reason
        self.retry_after = retry_after


def publish_wait(
    state: State,
    id: str,
    *,
    owner: str,
    waiting_for: str,
    reason: str,
    now: datetime,
    next_retry: datetime | None = None,
) -> Resource[WaitStatusSpec]:
    """Create or refresh the wait ``id``; ``since`` is kept while ``waiting_for`` stays the same."""
    ns = WAIT_STATUSES.default_namespace
    try:
        current = state.get(ns, WAIT_STATUSES, id)
    except NotFoundError:
        spec = WaitStatusSpec(waiting_for=waiting_for, reason=reason, since=now, next_retry=next_retry)
        return state.create(WAIT_STATUSES.new(id, spec), owner=owner)
    since = current.spec.since if current.spec.waiting_for == waiting_for else now
    spec = WaitStatusSpec(waiting_for=waiting_for, reason=reason, since=since, next_retry=next_retry)
    if spec == current.spec:
        return current
    return state.update(current.with_spec(spec), owner=owner)


def clear_wait(state: State, id: str, *, owner: str) -> bool:
    """Remove the wait ``id``; False when there was none."""
    try:
        state.destroy(WAIT_STATUSES.default_namespace, WAIT_STATUSES, id, owner=owner)
    except NotFoundError:
        return False
    return True
