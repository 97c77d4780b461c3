"""``talosctl reset`` says what the node is like afterwards, from what it wipes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.server import Stream
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode, targets

from ichor.api.gen.machine import machine_pb2

pytestmark = pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)
NODE = "10.5.0.3"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    fake = FakeNode(tmp_path, "127.77.9.3")

    async def reset(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        reply = machine_pb2.ResetResponse()
        for n in targets(stream):
            reply.messages.add(actor_id="a1").metadata.hostname = n
        await stream.send_message(reply)

    fake.handlers["Reset"] = reset
    with fake.serving():
        yield fake


@pytest.mark.parametrize(
    ("labels", "keeps"),
    [([], False), (["--system-labels-to-wipe=STATE"], False), (["--system-labels-to-wipe=EPHEMERAL,STATE"], False),
     (["--system-labels-to-wipe=EPHEMERAL"], True), (["--system-labels-to-wipe=META", "--system-labels-to-wipe=EPHEMERAL"], True)],
)  # fmt: skip
def test_reset_says_whether_the_node_keeps_its_config(
    node: FakeNode, talosctl: Any, labels: list[str], keeps: bool
) -> None:
    r = talosctl(*node.args(NODE), "reset", "--reboot", "--wait=false", *labels)
    assert r.exit_code == 0, r.stderr
    assert f"{NODE}: reset requested (actor a1)" in r.stdout
    if keeps:
        assert (
            "STATE kept: the node keeps its machine config and boots configured after the reboot" in r.stderr
        )
        assert "maintenance mode" not in r.stderr
    else:
        assert (
            "the node loses its machine config and boots into maintenance mode after the reboot" in r.stderr
        )
        assert "talosctl apply-config --insecure" in r.stderr


def test_reset_without_reboot_says_when_it_is_started_again(node: FakeNode, talosctl: Any) -> None:
    r = talosctl(*node.args(NODE), "reset", "--wait=false", "--system-labels-to-wipe=EPHEMERAL")
    assert r.exit_code == 0, r.stderr
    assert "boots configured when it is started again" in r.stderr
