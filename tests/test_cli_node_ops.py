"""``talosctl usage``, ``upgrade``, ``rollback``, ``meta`` and ``time``: Talos's flags, tables and error
texts, against machined's real MachineService handlers served over mutual TLS (the etcd CLI harness)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from grpclib.const import Status
from grpclib.server import Stream
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode
from test_cli_node_errors import BAD, GOOD, fail

from ichor.api.gen.machine import machine_pb2
from ichor.api.gen.timeapi import time_pb2
from ichor.cli._node_ops import go_time
from ichor.machined.platform import Layout
from ichor.machined.server._machine import MachineService

ADDRESS = "127.77.9.3"
pytestmark = pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)


class _Node:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[FakeNode, Layout]]:
    layout = Layout(root=tmp_path / "root", address=ADDRESS)
    layout.ensure()
    service = MachineService(_Node(layout), roles_of=lambda stream: ("os:admin",))  # type: ignore[arg-type]
    fake = FakeNode(tmp_path, ADDRESS)
    for name in ("DiskUsage", "Upgrade", "Rollback", "MetaWrite", "MetaDelete"):
        fake.handlers[name] = getattr(service, name)
    with fake.serving():
        yield fake, layout


def test_usage_prints_talos_table(node: tuple[FakeNode, Layout], talosctl: Any) -> None:
    fake, layout = node
    root = layout.path("/var/lib/data")
    (root / "sub").mkdir(parents=True)
    (root / "sub/big").write_bytes(b"x" * 2_000_000)
    (root / "small").write_bytes(b"x" * 10)
    r = talosctl(*fake.args(), "usage", "/var/lib/data")
    assert r.exit_code == 0, r.stderr
    header, line = r.stdout.splitlines()
    assert header.split() == ["SIZE", "NAME"] and line.split()[1] == "."
    assert int(line.split()[0]) >= 2_000_010
    assert fake.calls == ["DiskUsage"]
    r = talosctl(*fake.args(), "du", "-a", "-H", "-d", "1", "/var/lib/data")
    assert r.exit_code == 0, r.stderr
    names = [row.split()[-1] for row in r.stdout.splitlines()[1:]]
    assert names == ["small", "sub", "."]
    assert "2.0 MB" in r.stdout and "10 B" in r.stdout
    r = talosctl(*fake.args(), "usage", "/nope")
    assert r.exit_code == 1 and "lstat /nope: no such file or directory" in r.stderr


@pytest.mark.parametrize(
    ("args", "prefix"),
    [
        (["rollback"], "error executing rollback: "),
        (["upgrade", "--wait=false"], "error performing upgrade: "),
        (["meta", "write", "0x0a", "value"], ""),
        (["meta", "delete", "10"], ""),
    ],
)
def test_container_mode_refusals_reach_the_user(
    node: tuple[FakeNode, Layout], talosctl: Any, args: list[str], prefix: str
) -> None:
    fake, _ = node
    r = talosctl(*fake.args(), *args)
    assert r.exit_code == 1
    assert "rpc error: code = FailedPrecondition desc = method is not supported in container mode" in r.stderr
    assert r.stderr.startswith(f"error: {prefix}")


def test_upgrade_and_meta_flags_as_talos(node: tuple[FakeNode, Layout], talosctl: Any) -> None:
    fake, _ = node
    r = talosctl(*fake.args(), "upgrade", "--insecure")
    assert r.exit_code == 1 and "cannot use --wait and --insecure together" in r.stderr
    r = talosctl(*fake.args(), "upgrade", "-m", "sideways", "--wait=false")
    assert r.exit_code == 1 and "invalid reboot mode: sideways" in r.stderr
    r = talosctl(*fake.args(), "meta", "write", "256", "x")
    assert r.exit_code == 1 and 'strconv.ParseUint: parsing "256": value out of range' in r.stderr
    r = talosctl(*fake.args(), "meta", "delete", "+1")
    assert r.exit_code == 1 and 'strconv.ParseUint: parsing "+1": invalid syntax' in r.stderr
    assert fake.calls == []
    sent: list[Any] = []

    async def upgrade(stream: Stream[Any, Any]) -> None:
        sent.append(await stream.recv_message())
        reply = machine_pb2.UpgradeResponse()
        element = reply.messages.add(ack="Upgrade request received", actor_id="a")
        element.metadata.hostname = GOOD
        fail(
            reply.messages.add(), BAD, Status.FAILED_PRECONDITION, "method is not supported in container mode"
        )
        await stream.send_message(reply)

    fake.handlers["Upgrade"] = upgrade
    r = talosctl(
        *fake.args(GOOD, BAD), "upgrade", "--wait=false", "-i", "img:v1", "-p", "-s", "-f", "-m", "powercycle"
    )
    (request,) = sent
    assert (request.image, request.preserve, request.stage, request.force, request.reboot_mode) == (
        "img:v1",
        True,
        True,
        True,
        1,
    )
    assert r.stdout.splitlines()[0].split() == ["NODE", "ACK", "STARTED"]
    assert r.stdout.splitlines()[1].startswith(f"{GOOD}   Upgrade request received   ")
    assert r.exit_code == 1 and f"error: {BAD}: rpc error: code = FailedPrecondition" in r.stderr


def test_time_table_and_warning(tmp_path: Path, talosctl: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``time`` over a double whose Time/TimeCheck are plain handlers (the harness serves no
    TimeService, so its machine service stands in under the same method names)."""
    from ichor.api.gen.timeapi import time_grpc

    answers: list[str] = []

    async def handler(stream: Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        server = getattr(request, "server", "") or "10.5.0.1"
        answers.append(server)
        reply = time_pb2.TimeResponse()
        good = reply.messages.add(server=server)
        good.metadata.hostname = GOOD
        good.localtime.FromDatetime(datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC))
        good.remotetime.FromDatetime(datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC))
        fail(reply.messages.add(), BAD, Status.UNKNOWN, 'error querying NTP server "10.5.0.1": i/o timeout')
        await stream.send_message(reply)

    fake = FakeNode(tmp_path, "127.77.9.4")
    service = type(
        "T",
        (time_grpc.TimeServiceBase,),
        {"Time": lambda self, s: handler(s), "TimeCheck": lambda self, s: handler(s)},
    )()
    # The harness builds its service list inside serving(); add the time service to grpclib's Server.
    import test_cli_etcd_harness as harness

    real_server = harness.Server
    monkeypatch.setattr(harness, "Server", lambda services: real_server([*services, service]))
    with fake.serving():
        r = talosctl(*fake.args(GOOD, BAD), "time")
        r2 = talosctl(*fake.args(GOOD), "time", "--check", "127.0.0.1:1234")
    assert answers == ["10.5.0.1", "127.0.0.1:1234"]
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NODE", "NTP-SERVER", "NODE-TIME", "NTP-SERVER-TIME"]
    assert (
        lines[1] == f"{GOOD}   10.5.0.1     2026-01-02 03:04:05.12 +0000 UTC   2026-01-02 03:04:06 +0000 UTC"
    )
    assert r.stderr.startswith(
        "WARNING: 1 error occurred:\n\t* bad: rpc error: code = Unknown desc = error querying NTP"
    )
    assert r.exit_code == 0  # Talos's client warns and exits 0 when some node answered
    assert r2.exit_code == 0 and "127.0.0.1:1234" in r2.stdout


def test_go_time_format() -> None:
    assert go_time(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02 03:04:05 +0000 UTC"
    assert go_time(datetime(2026, 1, 2, 3, 4, 5, 500, tzinfo=UTC)) == "2026-01-02 03:04:05.0005 +0000 UTC"
