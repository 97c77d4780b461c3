"""Controllers: declared inputs and outputs, the context they run in, and the transform runner.

A controller reads its declared inputs and writes its declared outputs through a
:class:`ControllerContext`; the context enforces both declarations and writes as the controller's
owner name. Most controllers are a :class:`TransformController`: a function from inputs to
``{id: spec}`` whose results the generic runner writes, tearing down every output it owns that the
pass did not produce (output tracking).

This module must not schedule tasks: waking, restarting and backoff belong to the runtime.
"""

from __future__ import annotations

import abc
import asyncio
import builtins
import contextlib
import dataclasses
import enum
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, overload

from ichor.machined.cosi._errors import (
    InputNotDeclaredError,
    NotFoundError,
    OutputNotDeclaredError,
    PhaseConflictError,
)
from ichor.machined.cosi._log import ControllerLogger, RuntimeLog
from ichor.machined.cosi._resource import Clock, Phase, Resource, ResourceType
from ichor.machined.cosi._state import LabelTerm, State
from ichor.machined.cosi._waits import WAIT_STATUSES, WaitingFor, clear_wait, publish_wait

__all__ = [
    "Controller",
    "ControllerContext",
    "Input",
    "InputKind",
    "Output",
    "OutputKind",
    "SkipReconcile",
    "Sleep",
    "TransformController",
    "missing_input_name",
]

S = TypeVar("S")

Sleep = Callable[[float], Awaitable[None]]
"""``asyncio.sleep`` or a test double."""


class InputKind(enum.StrEnum):
    WEAK = "weak"
    """Wake on changes; the input may vanish at any time."""
    STRONG = "strong"
    """Wake on changes; the controller puts finalizers on what it uses so it cannot vanish under it."""


class OutputKind(enum.StrEnum):
    EXCLUSIVE = "exclusive"
    """Only this controller writes this type."""
    SHARED = "shared"
    """Several controllers write this type, each its own ids."""


@dataclasses.dataclass(frozen=True)
class Input:
    type: ResourceType[Any]
    namespace: str | None = None
    """Defaults to the type's default namespace."""
    id: str | None = None
    """Watch one resource only."""
    kind: InputKind = InputKind.WEAK

    @property
    def ns(self) -> str:
        return self.namespace or self.type.default_namespace


@dataclasses.dataclass(frozen=True)
class Output:
    type: ResourceType[Any]
    kind: OutputKind = OutputKind.EXCLUSIVE
    namespace: str | None = None
    """Where the controller writes it; defaults to the type's default namespace."""

    @property
    def ns(self) -> str:
        return self.namespace or self.type.default_namespace


class SkipReconcile(Exception):
    """Raised by ``map_inputs`` to keep the current outputs untouched this pass."""


class Controller(abc.ABC):
    """Name it after what it produces (``EtcdSpecController``); declare every input and output."""

    name: str
    inputs: Sequence[Input] = ()
    outputs: Sequence[Output] = ()
    reads: str = ""
    """Facts from outside the state it reads (a Source, the kernel), for the documented graph."""
    writes: str = ""
    """What outside the state it changes (the kernel), for the documented graph."""

    @abc.abstractmethod
    async def run(self, ctx: ControllerContext) -> None:
        """Loop forever: ``await ctx.changed()``, then reconcile. Raising restarts with backoff."""


class ControllerContext:
    """What a running controller may do to the state; created by the runtime for every (re)start."""

    def __init__(
        self,
        controller: Controller,
        state: State,
        wakeup: asyncio.Event,
        *,
        clock: Clock,
        sleep: Sleep,
        on_pass_done: Callable[[], None] = lambda: None,
        logger: ControllerLogger | None = None,
    ) -> None:
        self.name = controller.name
        self.logger = logger or ControllerLogger(RuntimeLog(clock=clock), controller.name)
        """Lines in the controller runtime's log naming this controller (``talosctl logs controller-runtime``)."""
        self._controller = controller
        self._state = state
        self._wakeup = wakeup
        self._clock = clock
        self._sleep = sleep
        self._on_pass_done = on_pass_done
        self._passes = 0
        self._output_types = {o.type.type for o in controller.outputs} | {WAIT_STATUSES.type}

    @property
    def state(self) -> State:
        """Read-only use in tests and diagnostics; controllers go through the checked methods."""
        return self._state

    def now(self) -> datetime:
        return self._clock()

    def wake(self) -> None:
        """Make the next :meth:`changed` return: for controllers that also read a :class:`Source`."""
        self._wakeup.set()

    # -- waking ------------------------------------------------------------------------------

    async def changed(self, *, timeout: float | None = None) -> None:
        """Return when an input (or a torn-down output's finalizers) changed since the last return.

        Bursts of changes coalesce into one wake-up. The first call returns at once, so a
        controller always makes an initial pass. ``timeout`` (seconds, through the runtime's
        sleep) wakes anyway, for retries.
        """
        if self._passes:
            self._on_pass_done()
        self._passes += 1
        if timeout is None:
            await self._wakeup.wait()
        elif not self._wakeup.is_set():
            waiter = asyncio.ensure_future(self._wakeup.wait())
            sleeper = asyncio.ensure_future(self._sleep(timeout))
            try:
                await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (waiter, sleeper):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        self._wakeup.clear()

    async def until_changed(self) -> None:
        """Return when an input changed since :meth:`changed` last returned, without taking the
        change: the next :meth:`changed` returns at once. For racing long work against the inputs
        (cancel the work when this returns first)."""
        await self._wakeup.wait()

    # -- declarations ------------------------------------------------------------------------

    def _check_read(self, namespace: str, type: str, id: str | None) -> None:
        if type in self._output_types:
            return
        for inp in self._controller.inputs:
            if inp.type.type == type and inp.ns == namespace and (inp.id is None or inp.id == id):
                return
        what = f"{type}({namespace}/{id})" if id is not None else f"{type} in namespace {namespace!r}"
        raise InputNotDeclaredError(
            f'controller "{self.name}" read {what}, which is not among its inputs',
            hint="add an Input(...) for it to the controller's inputs",
        )

    def _check_write(self, type: str) -> None:
        if type not in self._output_types:
            raise OutputNotDeclaredError(
                f'controller "{self.name}" is not allowed to write resource type "{type}": '
                "it is not declared as an output",
                hint="add Output(<type>) to the controller's outputs",
            )

    # -- reads -------------------------------------------------------------------------------

    def get(self, type: ResourceType[S], id: str, *, namespace: str | None = None) -> Resource[S]:
        ns = namespace or type.default_namespace
        self._check_read(ns, type.type, id)
        return self._state.get(ns, type, id)

    def get_or_none(
        self, type: ResourceType[S], id: str, *, namespace: str | None = None
    ) -> Resource[S] | None:
        try:
            return self.get(type, id, namespace=namespace)
        except NotFoundError:
            return None

    def list(
        self, type: ResourceType[S], *, namespace: str | None = None, labels: Sequence[LabelTerm] = ()
    ) -> list[Resource[S]]:
        ns = namespace or type.default_namespace
        self._check_read(ns, type.type, None)
        return self._state.list(ns, type, labels=labels)

    # -- writes ------------------------------------------------------------------------------

    @overload
    def modify(
        self,
        type: ResourceType[S],
        id: str,
        spec: S,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Resource[S]: ...
    @overload
    def modify(
        self,
        type: ResourceType[S],
        id: str,
        spec: Callable[[S | None], S],
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Resource[S]: ...
    def modify(
        self,
        type: ResourceType[S],
        id: str,
        spec: S | Callable[[S | None], S],
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Resource[S]:
        """Create or update an owned output so it has ``spec`` (or ``spec(old_spec)``).

        Writing the same spec and labels again is a no-op (no version bump, no wake-ups). An
        output that is tearing down is re-created once its finalizers are gone; until then this
        raises :class:`PhaseConflictError`.
        """
        self._check_write(type.type)
        ns = namespace or type.default_namespace
        try:
            current: Resource[S] | None = self._state.get(ns, type, id)
        except NotFoundError:
            current = None
        if current is not None and current.metadata.phase is Phase.TEARING_DOWN:
            if current.metadata.finalizers:
                raise PhaseConflictError(f"resource {current.metadata} is not in phase {Phase.RUNNING}")
            self._state.destroy(ns, type, id, owner=self.name)
            current = None
        new_spec: S
        if callable(spec) and not isinstance(spec, type.spec_class):
            new_spec = spec(current.spec if current is not None else None)
        else:
            new_spec = spec
        if current is None:
            return self._state.create(type.new(id, new_spec, namespace=ns, labels=labels), owner=self.name)
        new = current.with_spec(new_spec)
        if labels is not None:
            new = new.with_labels(labels)
        if new.spec == current.spec and dict(new.metadata.labels) == dict(current.metadata.labels):
            return current
        return self._state.update(new, owner=self.name, expected_phase=Phase.RUNNING)

    def teardown(self, type: ResourceType[Any], id: str, *, namespace: str | None = None) -> bool:
        self._check_write(type.type)
        return self._state.teardown(namespace or type.default_namespace, type, id, owner=self.name)

    def destroy(self, type: ResourceType[Any], id: str, *, namespace: str | None = None) -> None:
        self._check_write(type.type)
        self._state.destroy(namespace or type.default_namespace, type, id, owner=self.name)

    def clean_up_outputs(
        self, type: ResourceType[Any], touched: set[str], *, namespace: str | None = None
    ) -> builtins.list[str]:
        """Tear down (and destroy when free) every output of ``type`` this controller owns that is
        not in ``touched``; returns the ids still held by finalizers."""
        self._check_write(type.type)
        ns = namespace or type.default_namespace
        held: builtins.list[str] = []
        for res in self._state.list(ns, type):
            if res.metadata.owner != self.name or res.id in touched:
                continue
            if self._state.teardown(ns, type, res.id, owner=self.name):
                self._state.destroy(ns, type, res.id, owner=self.name)
            else:
                held.append(res.id)
        return held

    def add_finalizer(self, type: ResourceType[Any], id: str, *, namespace: str | None = None) -> None:
        """Hold an input so it cannot be destroyed while this controller uses it."""
        ns = namespace or type.default_namespace
        self._check_read(ns, type.type, id)
        self._state.add_finalizer(ns, type, id, self.name)

    def remove_finalizer(self, type: ResourceType[Any], id: str, *, namespace: str | None = None) -> None:
        ns = namespace or type.default_namespace
        self._check_read(ns, type.type, id)
        self._state.remove_finalizer(ns, type, id, self.name)

    # -- waits -------------------------------------------------------------------------------

    def waiting(
        self,
        waiting_for: str,
        reason: str,
        *,
        retry_after: float | None = None,
        id: str | None = None,
        since: datetime | None = None,
    ) -> None:
        """Publish "waiting for X because Y" (``get waits``), under this controller's name or ``id``."""
        now = self._clock()
        next_retry = now + timedelta(seconds=retry_after) if retry_after is not None else None
        publish_wait(
            self._state,
            id or self.name,
            owner=self.name,
            waiting_for=waiting_for,
            reason=reason,
            now=since or now,
            next_retry=next_retry,
        )

    def clear_waiting(self, id: str | None = None) -> None:
        clear_wait(self._state, id or self.name, owner=self.name)

    def waiting_on(self, waiting_for: str, problems: Sequence[str], *, retry_after: float) -> float | None:
        """The end of a pass that retries what failed: with ``problems``, wait for ``waiting_for``
        (the problems joined as the reason) and return ``retry_after``, the timeout for the next
        :meth:`changed`; without, clear this controller's wait and return None."""
        if not problems:
            self.clear_waiting()
            return None
        self.waiting(waiting_for, "; ".join(problems), retry_after=retry_after)
        return retry_after


def missing_input_name(rtype: str, id: str) -> str:
    """How a wait names a missing input: ``NodeIPs/kubelet`` (the type's plural, then the id)."""
    return f"{rtype.split('.', 1)[0]}/{id}"


@dataclasses.dataclass(frozen=True)
class Partial(Generic[S]):
    """What a transform's ``map_inputs`` returns when it can make some outputs now and waits for the
    rest: ``outputs`` are written as a full result would be (the others torn down), and ``waiting``
    is published as a raised :class:`WaitingFor` would be, with its retry."""

    outputs: Mapping[str, S]
    waiting: WaitingFor


MapResult = Mapping[str, S] | Partial[S]
MapInputs = Callable[[ControllerContext], MapResult[S] | Awaitable[MapResult[S]]]


class TransformController(Controller, Generic[S]):
    """Inputs in, ``{id: spec}`` out: the generic runner behind most controllers.

    Every pass calls ``map_inputs(ctx)`` (plain or async). Each returned id is created or updated
    as an output owned by this controller (unchanged specs are not rewritten); every owned output
    the pass did not return is torn down and destroyed. ``map_inputs`` may raise
    :class:`SkipReconcile` (keep outputs as they are) or :class:`WaitingFor` (same, and publish
    the wait), or return a :class:`Partial` (write what it has, and publish the wait).
    """

    def __init__(
        self,
        name: str,
        *,
        inputs: Sequence[Input],
        output: ResourceType[S],
        map_inputs: MapInputs[S],
        output_namespace: str | None = None,
        output_kind: OutputKind = OutputKind.EXCLUSIVE,
    ) -> None:
        self.name = name
        self.inputs = tuple(inputs)
        self.output = output
        self.output_namespace = output_namespace or output.default_namespace
        self.outputs = (Output(output, output_kind, self.output_namespace),)
        self._map_inputs = map_inputs

    async def run(self, ctx: ControllerContext) -> None:
        retry_after: float | None = None
        while True:
            await ctx.changed(timeout=retry_after)
            retry_after = None
            try:
                result = self._map_inputs(ctx)
                if inspect.isawaitable(result):
                    result = await result
            except SkipReconcile:
                self._wait_for_missing_input(ctx)
                continue
            except WaitingFor as wait:
                ctx.waiting(wait.waiting_for, wait.reason, retry_after=wait.retry_after)
                retry_after = wait.retry_after
                continue
            if isinstance(result, Partial):
                partial = result.waiting
                ctx.waiting(partial.waiting_for, partial.reason, retry_after=partial.retry_after)
                retry_after = partial.retry_after
                result = result.outputs
            else:
                ctx.clear_waiting()
            self._write(ctx, result)

    def _wait_for_missing_input(self, ctx: ControllerContext) -> None:
        """A skipped pass with a named input missing waits on it (``<Type>/<id>``), so ``talosctl get
        waits`` and ``talosctl why`` say what the controller lacks and since when; a skip for any
        other reason keeps the wait it had."""
        names = {missing_input_name(i.type.type, i.id) for i in self.inputs if i.id is not None}
        for inp in self.inputs:
            if inp.id is not None and ctx.get_or_none(inp.type, inp.id, namespace=inp.ns) is None:
                name = missing_input_name(inp.type.type, inp.id)
                ctx.waiting(name, f"{name} does not exist yet")
                return
        current = ctx.state.spec_of(WAIT_STATUSES, self.name)
        if current is not None and current.waiting_for in names:
            ctx.clear_waiting()

    def _write(self, ctx: ControllerContext, result: Mapping[str, S]) -> None:
        touched: set[str] = set()
        for id, spec in result.items():
            touched.add(id)
            # Held by another controller's finalizer: retried when the finalizer goes, since
            # the runtime wakes owners of torn-down outputs.
            with contextlib.suppress(PhaseConflictError):
                ctx.modify(self.output, id, spec, namespace=self.output_namespace)
        ctx.clean_up_outputs(self.output, touched, namespace=self.output_namespace)
