"""``talosctl events``: Talos's columns (NODE ID EVENT ACTOR SOURCE MESSAGE), aligned under the header."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.server import Stream
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode, targets

from ichor.api.gen.machine import machine_pb2 as pb

pytestmark = pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    fake = FakeNode(tmp_path, "127.77.9.4")
    with fake.serving():
        yield fake


def _event(node: str, n: int, payload: Any, actor: str = "") -> pb.Event:
    event = pb.Event(id=f"cq{n:018d}", actor_id=actor)
    event.data.type_url = f"talos/runtime/{payload.DESCRIPTOR.full_name}"
    event.data.value = payload.SerializeToString()
    event.metadata.hostname = node
    return event


async def _events(stream: Stream[Any, Any]) -> None:
    await stream.recv_message()
    for node in targets(stream):
        await stream.send_message(pb.Event(id="hello", metadata={"hostname": node}))  # skipped
        await stream.send_message(
            _event(node, 1, pb.SequenceEvent(sequence="boot", action=pb.SequenceEvent.START))
        )
        await stream.send_message(_event(node, 2, pb.PhaseEvent(phase="etcd", action=pb.PhaseEvent.STOP)))
        await stream.send_message(
            _event(node, 3, pb.ServiceStateEvent(service="etcd", action=pb.ServiceStateEvent.RUNNING,
                                                 message="Health check successful"), actor="a1")
        )  # fmt: skip
        status = pb.MachineStatusEvent.MachineStatus(
            ready=False, unmet_conditions=[pb.MachineStatusEvent.MachineStatus.UnmetCondition(name="etcd")]
        )
        await stream.send_message(
            _event(node, 4, pb.MachineStatusEvent(stage=pb.MachineStatusEvent.RUNNING, status=status))
        )
        await stream.send_message(
            _event(node, 5, pb.AddressEvent(hostname="cp-1", addresses=["10.5.0.2", "fd00::2"]))
        )


def test_events_columns_line_up_with_the_header(node: FakeNode, talosctl: Any) -> None:
    node.handlers["Events"] = _events
    r = talosctl(*node.args("10.5.0.2", "10.5.0.10"), "events")
    assert r.exit_code == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert header.split() == ["NODE", "ID", "EVENT", "ACTOR", "SOURCE", "MESSAGE"]
    starts = [header.index(h) for h in ("ID", "EVENT", "ACTOR", "SOURCE", "MESSAGE")]
    assert len(rows) == 10
    for row in rows:
        # Every cell starts where its heading does (ACTOR may be empty: check around it).
        assert row[starts[0] - 3 : starts[0]] == "   " and row[starts[0]] != " "
        assert row[starts[1] :].startswith("talos/runtime/machine.")
        assert row[starts[3] - 1] == " " and row[starts[3]] != " "
    assert rows[0].split() == [
        "10.5.0.2",
        "cq000000000000000001",
        "talos/runtime/machine.SequenceEvent",
        "boot",
        "START",
    ]
    assert rows[1].split()[3:] == ["etcd", "STOP"]
    assert rows[2][starts[2] :].startswith("a1")
    assert rows[2][starts[3] :] == "etcd     RUNNING: Health check successful" or rows[2][
        starts[3] :
    ].startswith("etcd")
    assert rows[2].endswith("RUNNING: Health check successful")
    assert rows[3][starts[3] :].split(maxsplit=1) == ["RUNNING", "ready: false, unmet conditions: [etcd]"]
    assert rows[4].endswith("ADDRESSES: 10.5.0.2,fd00::2")
