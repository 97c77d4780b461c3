"""``talosctl etcd ...`` against a test double of the node API: tables, multi-node output, errors, snapshots."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode, targets

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.cli._etcd import humanize_bytes, parse_member_id
from ichor.machinery.errors import MachineryError

ADDRESS = "127.77.4.1"
pytestmark = pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    fake = FakeNode(tmp_path, ADDRESS)
    with fake.serving():
        yield fake


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != "fake-node")


def _fail(element: Any, node: str, code: Status, text: str) -> None:
    element.metadata.hostname = node
    element.metadata.error = f"rpc error: code = {code.name.title()} desc = {text}"
    element.metadata.status.code = code.value
    element.metadata.status.message = text


def _members_handler(stream: Stream[Any, Any]) -> Any:
    async def handle() -> None:
        request = await stream.recv_message()
        assert request is not None and request.query_local
        reply = machine_pb2.EtcdMemberListResponse()
        for n in targets(stream):
            element = reply.messages.add()
            if n == "bad":
                _fail(element, n, Status.UNAVAILABLE, "etcd is not running")
                continue
            element.metadata.hostname = n
            element.members.add(
                id=0x3A4F2B1C,
                hostname="cp-1",
                peer_urls=["https://10.5.0.2:2380"],
                client_urls=["https://10.5.0.2:2379"],
            )
            element.members.add(
                id=0xFFFFFFFFFFFFFFFF,
                hostname="cp-2",
                peer_urls=["https://10.5.0.3:2380", "https://[fd00::3]:2380"],
                client_urls=[],
                is_learner=True,
            )
        await stream.send_message(reply)

    return handle()


def test_members_table_hex_ids_and_node_column(node: FakeNode, talosctl: Any) -> None:
    node.handlers["EtcdMemberList"] = _members_handler
    r = talosctl(*node.args("10.5.0.2", "10.5.0.3"), "etcd", "members")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NODE", "ID", "HOSTNAME", "PEER", "URLS", "CLIENT", "URLS", "LEARNER"]
    assert lines[1].split() == [
        "10.5.0.2", "000000003a4f2b1c", "cp-1", "https://10.5.0.2:2380", "https://10.5.0.2:2379", "false"
    ]  # fmt: skip
    assert lines[2].split() == [
        "10.5.0.2", "ffffffffffffffff", "cp-2", "https://10.5.0.3:2380,https://[fd00::3]:2380", "true"
    ]  # fmt: skip
    assert [line.split()[0] for line in lines[3:]] == ["10.5.0.3", "10.5.0.3"]
    # Columns line up (Go tabwriter, padding 3).
    assert lines[0].index("ID") == lines[1].index("000000003a4f2b1c")


def test_members_one_node_fails_the_rest_print(node: FakeNode, talosctl: Any) -> None:
    node.handlers["EtcdMemberList"] = _members_handler
    r = talosctl(*node.args("10.5.0.2", "bad"), "etcd", "members")
    assert r.exit_code == 1  # the answering node's table is printed, and the failed node fails the command
    assert "bad: rpc error: code = Unavailable desc = etcd is not running" in r.stderr
    assert len(r.stdout.splitlines()) == 3

    r = talosctl(*node.args("bad"), "etcd", "members")
    assert r.exit_code == 1
    assert "error getting members" in r.stderr and "etcd is not running" in r.stderr


def test_nodes_are_required(node: FakeNode, talosctl: Any) -> None:
    r = talosctl(*node.args(), "etcd", "members")
    assert r.exit_code == 1
    assert "nodes are not set for the command" in r.stderr
    assert node.calls == []


def test_status_table(node: FakeNode, talosctl: Any) -> None:
    async def handle(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        reply = machine_pb2.EtcdStatusResponse()
        for i, n in enumerate(targets(stream)):
            element = reply.messages.add()
            element.metadata.hostname = n
            s = element.member_status
            s.member_id, s.leader = 0xA1 + i, 0xA1
            s.db_size, s.db_size_in_use = 2_015_264, 1_007_632
            s.raft_index, s.raft_term, s.raft_applied_index = 4193, 2, 4193
            s.protocol_version = "3.5.13"
            if i:
                s.errors.extend(["NOSPACE", "slow disk"])
        await stream.send_message(reply)

    node.handlers["EtcdStatus"] = handle
    r = talosctl(*node.args("10.5.0.2", "10.5.0.3"), "etcd", "status")
    assert r.exit_code == 0, r.stderr
    header, first, second = r.stdout.splitlines()
    assert header.split()[0:2] == ["NODE", "MEMBER"]
    assert "RAFT APPLIED INDEX" in header and header.rstrip().endswith("ERRORS")
    assert first.split() == [
        "10.5.0.2", "00000000000000a1", "2.0", "MB", "1.0", "MB", "(50.00%)", "00000000000000a1",
        "4193", "2", "4193", "false",
    ]  # fmt: skip
    assert second.endswith("NOSPACE, slow disk")


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 B"), (9, "9 B"), (10, "10 B"), (999, "999 B"), (1000, "1.0 kB"), (16384, "16 kB"),
     (2_015_264, "2.0 MB"), (9_950_000, "10 MB"), (123_456_789_012, "124 GB"), (123_400_000_000, "123 GB")],
)  # fmt: skip
def test_humanize_bytes_matches_go_humanize(size: int, text: str) -> None:
    assert humanize_bytes(size) == text


def test_alarms_list_and_disarm(node: FakeNode, talosctl: Any) -> None:
    def handler(response: Any) -> Any:
        async def handle(stream: Stream[Any, Any]) -> None:
            await stream.recv_message()
            reply = response()
            for n in targets(stream):
                element = reply.messages.add()
                element.metadata.hostname = n
                if n == "10.5.0.3":
                    element.member_alarms.add(member_id=0xBEEF, alarm=machine_pb2.EtcdMemberAlarm.NOSPACE)
            await stream.send_message(reply)

        return handle

    node.handlers["EtcdAlarmList"] = handler(machine_pb2.EtcdAlarmListResponse)
    node.handlers["EtcdAlarmDisarm"] = handler(machine_pb2.EtcdAlarmDisarmResponse)
    r = talosctl(*node.args("10.5.0.2", "10.5.0.3"), "etcd", "alarm", "list")
    assert r.exit_code == 0, r.stderr
    assert [line.split() for line in r.stdout.splitlines()] == [
        ["NODE", "MEMBER", "ALARM"],
        ["10.5.0.3", "000000000000beef", "NOSPACE"],
    ]
    r = talosctl(*node.args("10.5.0.2"), "etcd", "alarm", "disarm")
    assert r.exit_code == 0 and r.stdout == ""  # no alarms: no table at all
    assert node.calls == ["EtcdAlarmList", "EtcdAlarmDisarm"]


def test_remove_member_parses_hex_ids(node: FakeNode, talosctl: Any) -> None:
    seen: list[int] = []

    async def handle(stream: Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        seen.append(request.member_id)
        reply = machine_pb2.EtcdRemoveMemberByIDResponse()
        for n in targets(stream):
            element = reply.messages.add()
            if request.member_id == 0x1234:
                _fail(element, n, Status.NOT_FOUND, "etcdserver: member not found")
            else:
                element.metadata.hostname = n
        await stream.send_message(reply)

    node.handlers["EtcdRemoveMemberByID"] = handle
    r = talosctl(*node.args("10.5.0.2"), "etcd", "remove-member", "3a4f2b1c")
    assert r.exit_code == 0, r.stderr
    assert seen == [0x3A4F2B1C]
    r = talosctl(*node.args("10.5.0.2"), "etcd", "remove-member", "1234")
    assert r.exit_code == 1 and "member not found" in r.stderr


@pytest.mark.parametrize(
    ("arg", "reason"),
    [("cp-1", "invalid syntax"), ("0x12", "invalid syntax"), ("1" * 17, "value out of range")],
)
def test_remove_member_refuses_non_hex_ids_before_calling(
    node: FakeNode, talosctl: Any, arg: str, reason: str
) -> None:
    r = talosctl(*node.args("10.5.0.2"), "etcd", "remove-member", arg)
    assert r.exit_code == 1
    assert f'error parsing member ID: strconv.ParseUint: parsing "{arg}": {reason}' in r.stderr
    assert "hint: pass the member ID in hex" in r.stderr
    assert node.calls == []


def test_parse_member_id_round_trip() -> None:
    assert parse_member_id("ffffffffffffffff") == 2**64 - 1
    with pytest.raises(MachineryError):
        parse_member_id("")


@pytest.mark.parametrize("command", [["leave"], ["defrag"], ["snapshot", "db.snapshot"]])
def test_single_node_commands_refuse_several_nodes(
    node: FakeNode, talosctl: Any, command: list[str], tmp_path: Path
) -> None:
    r = talosctl(*node.args("10.5.0.2", "10.5.0.3"), "etcd", *command, cwd=tmp_path)
    assert r.exit_code == 1
    assert f"command 'etcd {command[0]}' is not supported with multiple nodes" in r.stderr
    assert node.calls == []
    assert not (tmp_path / "db.snapshot").exists() and not (tmp_path / "db.snapshot.part").exists()


def test_leave_defrag_forfeit_call_the_node(node: FakeNode, talosctl: Any) -> None:
    def ok(response: Any) -> Any:
        async def handle(stream: Stream[Any, Any]) -> None:
            await stream.recv_message()
            reply = response()
            for n in targets(stream):
                reply.messages.add().metadata.hostname = n
            await stream.send_message(reply)

        return handle

    node.handlers["EtcdLeaveCluster"] = ok(machine_pb2.EtcdLeaveClusterResponse)
    node.handlers["EtcdDefragment"] = ok(machine_pb2.EtcdDefragmentResponse)
    node.handlers["EtcdForfeitLeadership"] = ok(machine_pb2.EtcdForfeitLeadershipResponse)
    for command in ("leave", "defrag", "forfeit-leadership"):
        r = talosctl(*node.args("10.5.0.2"), "etcd", command)
        assert r.exit_code == 0, r.stderr
    assert node.calls == ["EtcdLeaveCluster", "EtcdDefragment", "EtcdForfeitLeadership"]


def test_rpc_error_status_is_reported(node: FakeNode, talosctl: Any) -> None:
    async def denied(stream: Stream[Any, Any]) -> None:
        raise GRPCError(Status.FAILED_PRECONDITION, "etcd is not running on this node")

    node.handlers["EtcdDefragment"] = denied
    r = talosctl(*node.args("10.5.0.2"), "etcd", "defrag")
    assert r.exit_code == 1
    assert "rpc error: code = FailedPrecondition desc = etcd is not running on this node" in r.stderr


# --------------------------------------------------------------------------- snapshot


def _snapshot_handler(payload: bytes, *, chunk: int = 7000, fail_after: int | None = None) -> Any:
    async def handle(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        for sent, start in enumerate(range(0, len(payload), chunk)):
            if fail_after is not None and sent >= fail_after:
                raise GRPCError(Status.UNAVAILABLE, "etcd went away")
            data = common_pb2.Data(bytes=payload[start : start + chunk])
            if targets(stream):
                data.metadata.hostname = targets(stream)[0]
            await stream.send_message(data)
            await asyncio.sleep(0)

    return handle


def test_snapshot_dropped_midway_leaves_no_file(node: FakeNode, talosctl: Any, tmp_path: Path) -> None:
    (tmp_path / "db.snapshot").write_bytes(b"previous snapshot")
    node.handlers["EtcdSnapshot"] = _snapshot_handler(os.urandom(512 * 40 + 32), chunk=1024, fail_after=5)
    r = talosctl(*node.args("10.5.0.2"), "etcd", "snapshot", "db.snapshot", cwd=tmp_path)
    assert r.exit_code == 1
    assert "etcd went away" in r.stderr
    assert (tmp_path / "db.snapshot").read_bytes() == b"previous snapshot"
    assert _files(tmp_path) == ["db.snapshot"]


def test_snapshot_without_checksum_trailer_is_refused(node: FakeNode, talosctl: Any, tmp_path: Path) -> None:
    node.handlers["EtcdSnapshot"] = _snapshot_handler(b"x" * 1000)
    r = talosctl(*node.args("10.5.0.2"), "etcd", "snapshot", "db.snapshot", cwd=tmp_path)
    assert r.exit_code == 1
    assert "error: sha256 checksum not found (size 1000)" in r.stderr
    assert _files(tmp_path) == []


def test_snapshot_in_band_node_error(node: FakeNode, talosctl: Any, tmp_path: Path) -> None:
    async def handle(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        data = common_pb2.Data()
        _fail(data, "10.5.0.2", Status.FAILED_PRECONDITION, "etcd is not running")
        await stream.send_message(data)

    node.handlers["EtcdSnapshot"] = handle
    r = talosctl(*node.args("10.5.0.2"), "etcd", "snapshot", "db.snapshot", cwd=tmp_path)
    assert r.exit_code == 1 and "etcd is not running" in r.stderr
    assert _files(tmp_path) == []


def test_snapshot_into_a_directory_or_unwritable_place(node: FakeNode, talosctl: Any, tmp_path: Path) -> None:
    r = talosctl(*node.args("10.5.0.2"), "etcd", "snapshot", str(tmp_path), cwd=tmp_path)
    assert r.exit_code == 1 and "is a directory" in r.stderr and "hint:" in r.stderr
    r = talosctl(*node.args("10.5.0.2"), "etcd", "snapshot", str(tmp_path / "missing" / "db"), cwd=tmp_path)
    assert r.exit_code == 1 and "error creating temporary file" in r.stderr
    assert node.calls == []
