"""Facts that live outside the state and that controllers turn into resources.

Talos's controllers read a few things that are not resources: the sequencer's stage, the service
supervisor's view of each service. A :class:`Source` holds such a value; a controller that reads
one listens to it for the time of its run (``with source.listen(ctx.wake)``), so a new value wakes
it like an input change does. Only the owner of the fact writes the source; only a controller
turns it into resources.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["Source"]

T = TypeVar("T")


class Source(Generic[T]):
    """One value and the controllers listening for changes of it."""

    def __init__(self, name: str, value: T) -> None:
        self.name = name
        self._value = value
        self._listeners: list[Callable[[], None]] = []

    @property
    def value(self) -> T:
        return self._value

    def set(self, value: T) -> None:
        self._value = value
        for listener in list(self._listeners):
            listener()

    @contextlib.contextmanager
    def listen(self, wake: Callable[[], None]) -> Iterator[None]:
        self._listeners.append(wake)
        try:
            yield
        finally:
            self._listeners.remove(wake)
