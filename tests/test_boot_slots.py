"""The A/B slot state machine: Talos's texts, boot counting, and the invariant that makes talos#10364 impossible."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ichor.machinery.bootloader import (
    BootState,
    Slot,
    SlotError,
    SlotStatus,
    bless,
    boot,
    fatal_error,
    installed,
    rollback,
    upgrade,
)


def _boot_until_settled(state: BootState) -> tuple[list[Slot], BootState]:
    """Boot repeatedly without ever becoming healthy (a broken machined or a hanging kernel)."""
    booted = []
    for _ in range(10):
        slot, t = boot(state)
        booted.append(slot)
        state = t.state
        if state.trial is None:
            break
    return booted, state


def test_talos_10364_cannot_happen() -> None:
    # install v1 (A) -> upgrade v2 (B), healthy -> upgrade v3 (A) whose machined cannot start
    state = installed("v1.8.2")
    state = upgrade(state, "v1.9.2").state
    slot, t = boot(state)
    assert slot == Slot.B
    state = bless(t.state, slot).state
    assert state.good == Slot.B and state.trial is None

    t = upgrade(state, "v1.9.3")
    assert t.state.trial == Slot.A  # the target is the slot that is not good, never the good one
    booted, state = _boot_until_settled(t.state)
    assert booted == [Slot.A, Slot.A, Slot.A, Slot.B]  # three counted tries, then the last good slot
    assert state.version(Slot.B) == "v1.9.2"  # v2, not v1
    assert state.failed == "A:v1.9.3:no healthy boot in its tries"
    rows = {r.slot: r.status for r in state.rows()}
    assert rows == {Slot.A: SlotStatus.FAILED, Slot.B: SlotStatus.GOOD}


def test_fatal_error_returns_to_last_good_never_flips() -> None:
    state = bless(boot(upgrade(installed("v1"), "v2").state)[1].state, Slot.B).state  # good B (v2)
    state = upgrade(state, "v3").state  # trial A
    slot, t = boot(state)
    assert slot == Slot.A
    t = fatal_error(t.state, slot, "machined: cannot start")
    assert "reverting failed upgrade v3 (slot A)" in t.message
    assert boot(t.state)[0] == Slot.B
    # a second fatal error on the good slot must not flip to A (Talos would)
    again = fatal_error(t.state, Slot.B, "still broken")
    assert again.state == t.state and boot(again.state)[0] == Slot.B


def test_upgrade_refused_while_trial_pending_unless_forced() -> None:
    state = upgrade(installed("v1.7.6"), "v1.7.7").state
    with pytest.raises(SlotError) as refused:
        upgrade(state, "v1.7.8")
    assert str(refused.value) == (
        "upgrade refused: slot B (v1.7.7) is still on trial; wait for it to be marked good or run talosctl rollback"
    )
    forced = upgrade(state, "v1.7.8", force=True).state
    assert (forced.trial, forced.version(Slot.B), forced.version(Slot.A)) == (Slot.B, "v1.7.8", "v1.7.6")


def test_rollback_as_talos() -> None:
    with pytest.raises(SlotError, match=r'^cannot rollback to "", label does not exist$'):
        rollback(installed("v1.7.6"), Slot.A)
    state = bless(upgrade(installed("v1.7.6"), "v1.7.7").state, Slot.B).state
    t = rollback(state, Slot.B)
    assert t.message == "rolling back from v1.7.7 (slot B) to v1.7.6 (slot A)"
    assert t.state.good == Slot.A and boot(t.state)[0] == Slot.A


def test_grubenv_keys_round_trip() -> None:
    state = upgrade(installed("v1.7.6"), "v1.7.7").state
    env = state.to_env()
    assert env == {
        "ichor_good": "A",
        "ichor_try": "B",
        "ichor_tries": "3",
        "ichor_ver_A": "v1.7.6",
        "ichor_ver_B": "v1.7.7",
        "ichor_failed": "",
    }
    assert BootState.from_env(env) == state
    assert BootState.from_env({}) == BootState()
    with pytest.raises(SlotError):
        BootState.from_env({"ichor_good": "C"})


@dataclass
class Machine:
    """The world the property drives: the saved state, the slot running now, and what we expect."""

    state: BootState
    running: Slot
    last_chosen: Slot  # last slot blessed or picked by rollback (or installed)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("upgrade"), st.booleans()),
        st.tuples(st.just("reboot"), st.just(False)),
        st.tuples(st.just("bless"), st.just(False)),
        st.tuples(st.just("fatal"), st.just(False)),
        st.tuples(st.just("rollback"), st.just(False)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_boots_trial_while_tries_remain_else_last_chosen(ops: list[tuple[str, bool]]) -> None:
    m = Machine(installed("v0"), Slot.A, Slot.A)
    counter = 0
    for op, force in ops:
        if op == "upgrade":
            counter += 1
            try:
                m.state = upgrade(m.state, f"v{counter}", force=force).state
            except SlotError:
                assert m.state.trial is not None and not force
                continue
            assert m.state.trial != m.last_chosen  # never writes the good slot
        elif op == "reboot":
            expect_trial = m.state.trial is not None and m.state.tries > 0
            slot, t = boot(m.state)
            assert slot == (m.state.trial if expect_trial else m.last_chosen)
            assert t.state.version(slot), "booted an empty slot"
            m.state, m.running = t.state, slot
        elif op == "bless":
            if m.running == m.state.trial:
                m.last_chosen = m.running
            m.state = bless(m.state, m.running).state
        elif op == "fatal":
            m.state = fatal_error(m.state, m.running, "boom").state
        else:
            try:
                m.state = rollback(m.state, m.running).state
            except SlotError:
                assert not m.state.version(m.running.other)
                continue
            m.last_chosen = m.running.other
        assert m.state.good == m.last_chosen
        assert m.state.trial is None or m.state.trial != m.state.good
    # and from wherever it stopped, booting without ever getting healthy ends on the last chosen slot
    booted, final = _boot_until_settled(m.state)
    assert booted[-1] == m.last_chosen and final.trial is None
