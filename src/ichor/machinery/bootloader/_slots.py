"""The A/B slot state machine with boot counting: pure functions, no disk, no clock.

Talos 1.7 flips the default slot on upgrade and flips it again on any fatal error; a revert without
its matching upgrade lands one version too far back (talos#10364). Here every transition names its
target: an upgrade writes the slot that is not the last good one and puts it on trial for a bounded
number of boots; a healthy boot blesses it; a fatal error or the last failed try returns to the last
good slot; a rollback goes to the other slot only when it holds a version. The state lives in the
grubenv (:func:`BootState.to_env`) and GRUB's script (``grubcfg``) performs :func:`boot` itself.

Invariant (tested as a property): the slot booted is the trial slot while tries remain, else the
last slot blessed or chosen by rollback.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ichor.machinery.errors import SlotError

__all__ = [
    "DEFAULT_TRIES",
    "BootState",
    "Slot",
    "SlotRow",
    "SlotStatus",
    "Transition",
    "bless",
    "boot",
    "fatal_error",
    "installed",
    "rollback",
    "upgrade",
]

DEFAULT_TRIES = 3
"""Boots a new slot gets before GRUB returns to the last good one."""


class Slot(enum.StrEnum):
    """A boot slot: a directory on BOOT (``/A``, ``/B``) and a GRUB menu entry."""

    A = "A"
    B = "B"

    @property
    def other(self) -> Slot:
        return Slot.B if self is Slot.A else Slot.A


class SlotStatus(enum.StrEnum):
    """A slot's state as the ``BootSlots`` resource shows it."""

    GOOD = "good"
    TRIAL = "trial"
    FAILED = "failed"
    EMPTY = "empty"
    INSTALLED = "installed"
    """Holds a version that is neither good, on trial nor failed (the previous good one)."""


@dataclass(frozen=True)
class BootState:
    """What the grubenv holds: ``ichor_good``, ``ichor_try``, ``ichor_tries``, versions, last failure."""

    good: Slot = Slot.A
    trial: Slot | None = None
    tries: int = 0
    versions: Mapping[Slot, str] = field(default_factory=dict)
    failed: str = ""
    """``<slot>:<version>:<reason>`` of the last trial that failed, "" if none."""

    def version(self, slot: Slot) -> str:
        return self.versions.get(slot, "")

    def with_version(self, slot: Slot, version: str) -> BootState:
        return replace(self, versions={**self.versions, slot: version})

    def to_env(self) -> dict[str, str]:
        """The grubenv keys (every key always present, so GRUB never sees a stale one)."""
        return {
            "ichor_good": self.good.value,
            "ichor_try": self.trial.value if self.trial else "",
            "ichor_tries": str(self.tries),
            "ichor_ver_A": self.version(Slot.A),
            "ichor_ver_B": self.version(Slot.B),
            "ichor_failed": self.failed,
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> BootState:
        """Read the grubenv keys; missing keys take the values of a fresh install on slot A."""
        try:
            good = Slot(env.get("ichor_good") or "A")
            trial = Slot(env["ichor_try"]) if env.get("ichor_try") else None
            tries = int(env.get("ichor_tries") or "0")
        except ValueError as e:
            raise SlotError(f"grubenv holds an unreadable slot state: {e}") from e
        versions = {s: env[f"ichor_ver_{s}"] for s in Slot if env.get(f"ichor_ver_{s}")}
        return cls(
            good=good, trial=trial, tries=max(tries, 0), versions=versions, failed=env.get("ichor_failed", "")
        )

    def rows(self) -> list[SlotRow]:
        """One row per slot for the ``BootSlots`` resource: SLOT, VERSION, STATE, TRIES."""
        failed_slot = self.failed.split(":", 1)[0] if self.failed else ""
        out = []
        for slot in Slot:
            if slot == self.trial:
                status, tries = SlotStatus.TRIAL, self.tries
            elif slot == self.good and self.version(slot):
                status, tries = SlotStatus.GOOD, 0
            elif not self.version(slot):
                status, tries = SlotStatus.EMPTY, 0
            elif failed_slot == slot and self.failed.split(":")[1:2] == [self.version(slot)]:
                status, tries = SlotStatus.FAILED, 0
            else:
                status, tries = SlotStatus.INSTALLED, 0
            out.append(SlotRow(slot, self.version(slot), status, tries))
        return out


@dataclass(frozen=True)
class SlotRow:
    slot: Slot
    version: str
    status: SlotStatus
    tries: int


@dataclass(frozen=True)
class Transition:
    """A new state and the console line that says what happened."""

    state: BootState
    message: str


def _label(state: BootState, slot: Slot) -> str:
    return f"{state.version(slot) or 'empty'} (slot {slot})"


def installed(version: str, slot: Slot = Slot.A) -> BootState:
    """The state a fresh install leaves: ``version`` in ``slot``, good, nothing on trial."""
    return BootState(good=slot, versions={slot: version})


def upgrade(state: BootState, version: str, *, force: bool = False, tries: int = DEFAULT_TRIES) -> Transition:
    """Put ``version`` on trial in the slot that is not the last good one.

    The caller writes the kernel and initramfs into ``transition.state.trial``'s directory first and
    only then saves the state. While a trial is pending a new upgrade is refused unless ``force``
    (then the trial slot is overwritten; the good slot never is).
    """
    if tries < 1:
        raise SlotError(f"an upgrade needs at least one try, not {tries}")
    if state.trial is not None and not force:
        raise SlotError(
            f"upgrade refused: slot {state.trial} ({state.version(state.trial)}) is still on trial; "
            "wait for it to be marked good or run talosctl rollback",
            hint="talosctl upgrade --force replaces the slot on trial",
        )
    target = state.good.other
    new = replace(state.with_version(target, version), trial=target, tries=tries)
    return Transition(
        new,
        f"upgrade: {version} written to slot {target}, on trial for {tries} boots; last good {_label(state, state.good)}",
    )


def boot(state: BootState) -> tuple[Slot, Transition]:
    """What GRUB's counting block does at every boot: which slot boots, and the state it saves.

    A trial with tries left boots the trial slot and uses one try; a trial with none left is
    recorded as failed and the last good slot boots.
    """
    if state.trial is None:
        return state.good, Transition(state, f"boot: slot {state.good} ({state.version(state.good)}), good")
    if state.tries > 0:
        new = replace(state, tries=state.tries - 1)
        return state.trial, Transition(
            new, f"boot: slot {state.trial} ({state.version(state.trial)}) on trial, {new.tries} tries left"
        )
    failed = f"{state.trial}:{state.version(state.trial)}:no healthy boot in its tries"
    new = replace(state, trial=None, tries=0, failed=failed)
    return state.good, Transition(
        new, f"boot: slot {state.trial} never became healthy; back to last good {_label(state, state.good)}"
    )


def bless(state: BootState, booted: Slot) -> Transition:
    """The booted system is healthy: a booted trial slot becomes the last good one."""
    if booted == state.trial:
        new = replace(state, good=booted, trial=None, tries=0, failed="")
        return Transition(new, f"bless: {_label(state, booted)} is good")
    return Transition(state, f"bless: slot {booted} ({state.version(booted)}) was already good")


def fatal_error(state: BootState, booted: Slot, reason: str) -> Transition:
    """machined failed fatally: a trial ends here and the next boot is the last good slot (never a flip)."""
    if booted == state.trial:
        failed = f"{booted}:{state.version(booted)}:{reason}"
        new = replace(state, trial=None, tries=0, failed=failed)
        return Transition(
            new,
            f"reverting failed upgrade {_label(state, booted)}: {reason}; next boot {_label(state, state.good)}",
        )
    return Transition(state, f"fatal error on slot {booted}: {reason}; it stays the boot slot")


def rollback(state: BootState, booted: Slot) -> Transition:
    """``talosctl rollback``: make the slot other than the booted one good, if it holds a version.

    Raises :class:`SlotError` with Talos's text when that slot is empty.
    """
    target = booted.other
    if not state.version(target):
        raise SlotError('cannot rollback to "", label does not exist')
    new = replace(state, good=target, trial=None, tries=0)
    return Transition(
        new,
        f"rolling back from {state.version(booted)} (slot {booted}) to {state.version(target)} (slot {target})",
    )
