"""SNTP: the query's bytes, answers checked (garbage refused cleanly), and time.SyncController's status."""

from __future__ import annotations

import asyncio
import ipaddress
import struct

import pytest
from controller_helpers import apply, run, running
from hypothesis import given, settings
from hypothesis import strategies as st

from ichor.machined import sntp
from ichor.machined.controllers import network, timesync
from ichor.machined.controllers.timesync import TimeSyncController
from ichor.machined.cosi import WAIT_STATUSES, assert_resource
from ichor.machined.resources import NODE_ADDRESS_CURRENT_ID, NODE_ADDRESSES, TIME_STATUSES, NodeAddressSpec

NOW = 1_750_000_000.25
SERVERS = (
    "version: v1alpha1\nmachine:\n  type: worker\n  time:\n    servers: [10.9.0.1, 10.9.0.2]\ncluster: {}\n"
)


def _answer(sent: bytes, *, server_ahead: float = 2.5, first: int = (4 << 3) | 4, stratum: int = 2,
            ref: bytes = b"GPS\0", origin: int | None = None) -> bytes:  # fmt: skip
    transmit = struct.unpack_from("!Q", sent, 40)[0]
    t = sntp._to_ntp(NOW + server_ahead + 0.01)
    return struct.pack(
        "!BBbbII4sQQQQ", first, stratum, 6, -20, 0, 0, ref, t, transmit if origin is None else origin, t, t
    )


def test_the_query_is_48_bytes_of_an_ntp4_client_carrying_our_time() -> None:
    sent = sntp.request(NOW)
    assert len(sent) == 48 and sent[0] == 0x23
    assert sntp._from_ntp(struct.unpack_from("!Q", sent, 40)[0]) == pytest.approx(NOW, abs=1e-6)


def test_a_server_answer_gives_offset_and_delay() -> None:
    sent = sntp.request(NOW)
    sample = sntp.parse_response(_answer(sent), sent, NOW + 0.02)
    assert sample.stratum == 2
    assert sample.offset == pytest.approx(2.5, abs=1e-6)
    assert sample.delay == pytest.approx(0.02, abs=1e-6)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda s: _answer(s)[:47], "at least 48"),
        (lambda s: _answer(s, first=(4 << 3) | 3), "mode 3"),
        (lambda s: _answer(s, first=(0 << 3) | 4), "version 0"),
        (lambda s: _answer(s, stratum=0, ref=b"RATE"), "kiss-of-death from the server \\(RATE\\)"),
        (lambda s: _answer(s, first=(3 << 6) | (4 << 3) | 4), "not synchronised"),
        (lambda s: _answer(s, stratum=16), "not synchronised"),
        (lambda s: _answer(s, origin=12345), "not for our query"),
        (lambda s: _answer(s)[:32] + b"\0" * 16, "carries no time"),
    ],
)
def test_bad_answers_are_refused_saying_why(answer, message) -> None:  # type: ignore[no-untyped-def]
    sent = sntp.request(NOW)
    with pytest.raises(sntp.SNTPError, match=message):
        sntp.parse_response(answer(sent), sent, NOW)


@settings(max_examples=300)
@given(st.binary(max_size=120))
def test_garbage_answers_are_refused_cleanly(data: bytes) -> None:
    sent = sntp.request(NOW)
    try:
        sample = sntp.parse_response(data, sent, NOW)
    except sntp.SNTPError:
        return
    assert sample.delay >= 0


def test_sync_controller_is_synced_after_an_answer_and_says_why_while_none_comes() -> None:
    answers: dict[str, sntp.Sample | Exception] = {
        "10.9.0.1": TimeoutError(),
        "10.9.0.2": sntp.SNTPError("kiss"),
    }
    asked: list[str] = []

    async def query(server: str) -> sntp.Sample:
        asked.append(server)
        answer = answers[server]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def main() -> None:
        async with running(*network.time_server_controllers(), TimeSyncController(query)) as state:
            apply(state, SERVERS)
            await assert_resource(state, WAIT_STATUSES, "time.SyncController",
                                  lambda r: "10.9.0.1: TimeoutError; 10.9.0.2: kiss" in str(r.spec))  # fmt: skip
            await assert_resource(
                state, TIME_STATUSES, "node", lambda r: not r.spec.synced and not r.spec.sync_disabled
            )
            answers["10.9.0.2"] = sntp.Sample(offset=0.5, delay=0.001, stratum=8)
            apply(state, SERVERS.replace("10.9.0.1, 10.9.0.2", "10.9.0.2, 10.9.0.1"))
            await assert_resource(
                state, TIME_STATUSES, "node", lambda r: r.spec.synced and not r.spec.sync_disabled
            )
            assert asked[-1] == "10.9.0.2"  # the first server answered: the second is not asked
            apply(state, SERVERS.replace("    servers:", "    disabled: true\n    servers:"))
            await assert_resource(
                state, TIME_STATUSES, "node", lambda r: r.spec.synced and r.spec.sync_disabled
            )

    run(main)


def test_sync_controller_asks_again_as_soon_as_the_node_gets_an_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # At boot the first round runs before the DHCP lease: the servers are unreachable. The lease must
    # not wait for the retry timer (here an hour, so only the address change can bring the answer).
    monkeypatch.setattr(timesync, "RETRY_INTERVAL", 3600.0)
    reachable = False

    async def query(server: str) -> sntp.Sample:
        if not reachable:
            raise OSError(101, "Network is unreachable")
        return sntp.Sample(offset=0.0, delay=0.001, stratum=8)

    async def main() -> None:
        nonlocal reachable
        async with running(*network.time_server_controllers(), TimeSyncController(query)) as state:
            apply(state, SERVERS)
            await assert_resource(state, WAIT_STATUSES, "time.SyncController",
                                  lambda r: "Network is unreachable" in str(r.spec))  # fmt: skip
            reachable = True
            leased = NodeAddressSpec((ipaddress.ip_interface("10.9.0.7/24"),))
            state.create(NODE_ADDRESSES.new(NODE_ADDRESS_CURRENT_ID, leased))
            await assert_resource(state, TIME_STATUSES, "node", lambda r: r.spec.synced)

    run(main)


def test_a_config_that_disables_time_sync_ends_a_round_under_way() -> None:
    """A VM's first round asked servers by name before DNS answered and hung ~18 s; the config,
    active meanwhile with ``machine.time.disabled``, had to wait for it (and etcd with it)."""
    hung = asyncio.Event()

    async def query(server: str) -> sntp.Sample:
        hung.set()
        await asyncio.Event().wait()  # never answers: only a cancelled round ends
        raise AssertionError("unreachable")

    async def main() -> None:
        async with running(*network.time_server_controllers(), TimeSyncController(query)) as state:
            apply(state, SERVERS)
            await asyncio.wait_for(hung.wait(), 5)
            apply(state, SERVERS.replace("    servers:", "    disabled: true\n    servers:"))
            await assert_resource(
                state, TIME_STATUSES, "node", lambda r: r.spec.synced and r.spec.sync_disabled
            )

    run(main, timeout=10)
