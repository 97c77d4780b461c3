"""``talosctl reset``'s Talos 1.7 flags: ``--wipe-mode``, ``--user-disks-to-wipe`` and
``--system-labels-to-wipe`` (repeated or comma-separated) become the ``ResetRequest`` Talos's
``buildResetRequest`` makes; a bad mode and ``--wait`` with ``--insecure`` are refused as Talos does;
the node's refusal is shown as Talos's client words it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode, targets

from ichor.api.gen.machine import machine_pb2

pytestmark = pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)
NODE = "10.5.0.4"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[FakeNode, list[machine_pb2.ResetRequest]]]:
    fake = FakeNode(tmp_path, "127.77.9.4")
    seen: list[machine_pb2.ResetRequest] = []

    async def reset(stream: Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        assert request is not None
        seen.append(request)
        if request.mode == machine_pb2.ResetRequest.SYSTEM_DISK and request.user_disks_to_wipe:
            raise GRPCError(
                Status.UNKNOWN,
                "reset failed: invalid input, wipe mode SYSTEM_DISK doesn't support UserDisksToWipe parameter",
            )
        reply = machine_pb2.ResetResponse()
        for n in targets(stream):
            reply.messages.add(actor_id="a2").metadata.hostname = n
        await stream.send_message(reply)

    fake.handlers["Reset"] = reset
    with fake.serving():
        yield fake, seen


def test_the_flags_make_talos_request(node: tuple[FakeNode, list[Any]], talosctl: Any) -> None:
    fake, seen = node
    r = talosctl(*fake.args(NODE), "reset", "--wait=false", "--graceful=false", "--wipe-mode", "user-disks",
                 "--user-disks-to-wipe", "/dev/vdb,/dev/vdc", "--user-disks-to-wipe", "/dev/vdd")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert seen[-1] == machine_pb2.ResetRequest(
        graceful=False,
        mode=machine_pb2.ResetRequest.USER_DISKS,
        user_disks_to_wipe=["/dev/vdb", "/dev/vdc", "/dev/vdd"],
    )
    r = talosctl(
        *fake.args(NODE), "reset", "--wait=false", "--reboot", "--system-labels-to-wipe", "STATE,EPHEMERAL"
    )
    assert r.exit_code == 0, r.stderr
    assert [(p.label, p.wipe) for p in seen[-1].system_partitions_to_wipe] == [
        ("STATE", True),
        ("EPHEMERAL", True),
    ]
    assert seen[-1].graceful and seen[-1].reboot and seen[-1].mode == machine_pb2.ResetRequest.ALL


def test_refusals(node: tuple[FakeNode, list[Any]], talosctl: Any) -> None:
    fake, seen = node
    r = talosctl(*fake.args(NODE), "reset", "--wipe-mode", "disks")
    assert r.exit_code != 0
    assert (
        'invalid argument "disks" for "--wipe-mode" flag: possible options are: all, system-disk, user-disks'
        in (r.stderr)
    )
    r = talosctl(*fake.args(NODE), "reset", "--insecure")
    assert r.exit_code != 0 and "cannot use --wait and --insecure together" in r.stderr
    assert seen == []
    r = talosctl(
        *fake.args(NODE),
        "reset",
        "--wait=false",
        "--wipe-mode",
        "system-disk",
        "--user-disks-to-wipe",
        "/dev/vdb",
    )
    assert r.exit_code != 0
    assert "wipe mode SYSTEM_DISK doesn't support UserDisksToWipe parameter" in r.stderr, r.stderr
