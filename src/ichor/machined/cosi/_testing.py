"""The standard controller test: seed inputs, then wait until an output matches.

``assert_resource`` follows the resource through :meth:`State.watch` and returns as soon as the
predicate holds, so tests never sleep for a fixed time. For tests only; nothing in the node uses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar, overload

from ichor.machined.cosi._resource import Resource, ResourceType
from ichor.machined.cosi._state import EventType, State

__all__ = ["assert_no_resource", "assert_resource"]

S = TypeVar("S")


@overload
async def assert_resource(
    state: State,
    type: ResourceType[S],
    id: str,
    predicate: Callable[[Resource[S]], object] = ...,
    *,
    namespace: str | None = None,
    timeout: float = 5.0,
) -> Resource[S]: ...
@overload
async def assert_resource(
    state: State,
    type: str,
    id: str,
    predicate: Callable[[Resource[Any]], object] = ...,
    *,
    namespace: str | None = None,
    timeout: float = 5.0,
) -> Resource[Any]: ...
async def assert_resource(
    state: State,
    type: ResourceType[Any] | str,
    id: str,
    predicate: Callable[[Resource[Any]], object] = lambda _: True,
    *,
    namespace: str | None = None,
    timeout: float = 5.0,
) -> Resource[Any]:
    """Wait until resource ``id`` exists and ``predicate`` returns truthy (or stops raising
    ``AssertionError``); return it. On timeout (5 s: a controller pass can take over a second on a
    loaded 2-core machine; a passing test never waits it out), fail with what was last seen."""
    if isinstance(type, str):
        if namespace is None:
            raise ValueError("namespace is required when the type is given by name")
        ns, type_name = namespace, type
    else:
        ns, type_name = namespace or type.default_namespace, type.type
    last = "it does not exist"
    try:
        async with asyncio.timeout(timeout):
            while True:  # a new watch after a history overrun
                async for event in state.watch(ns, type_name, id):
                    if event.type is EventType.ERRORED:
                        break
                    if event.type is EventType.DESTROYED:
                        last = "it does not exist"
                        continue
                    try:
                        ok = predicate(event.resource)
                    except AssertionError as exc:
                        last = f"{event.resource.metadata}: {exc}"
                        continue
                    if ok or ok is None:
                        return event.resource
                    last = f"{event.resource.metadata} with spec {event.resource.spec!r}"
    except TimeoutError:
        pass
    raise AssertionError(f"{type_name}({ns}/{id}) did not match within {timeout}s: {last}")


async def assert_no_resource(
    state: State, type: ResourceType[Any], id: str, *, namespace: str | None = None, timeout: float = 5.0
) -> None:
    """Wait until resource ``id`` does not exist."""
    ns = namespace or type.default_namespace
    try:
        async with asyncio.timeout(timeout):
            async for event in state.watch(ns, type, id):
                if event.type is EventType.DESTROYED:
                    return
    except TimeoutError:
        pass
    raise AssertionError(f"{type.type}({ns}/{id}) still exists after {timeout}s")
