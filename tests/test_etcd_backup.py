"""Scheduled etcd backups (Ichor's own ``EtcdBackupConfig``): the cron parser, the document's
validation, the backup files (names, retention, compression, a full disk), and the controllers on a
manual clock with an in-memory etcd double: schedule, retention, a failed snapshot that keeps the
older ones and says why, and a leadership change mid-schedule that never gives two snapshots.
"""

from __future__ import annotations

import asyncio
import errno
import gzip
import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from controller_helpers import config as v1alpha1_config
from controller_helpers import run
from hypothesis import given, settings
from hypothesis import strategies as st

from ichor import etcd as etcdlib
from ichor.machined.controllers import config as config_controllers
from ichor.machined.controllers import etcd_backup
from ichor.machined.cosi import Registry, Runtime, State, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ETCD_BACKUP_CONFIGS,
    ETCD_BACKUP_STATUSES,
    ETCD_SPECS,
    MACHINE_CONFIGS,
    SERVICES,
    EtcdBackupStatusSpec,
    EtcdSpecSpec,
    MachineConfigSpec,
    ServiceSpec,
    register_node_types,
)
from ichor.machinery.config import load_config, validate
from ichor.machinery.cron import parse_cron
from ichor.machinery.errors import ConfigDecodeError, CronError

T0 = datetime(2026, 1, 1, 11, 59, tzinfo=UTC)


# --------------------------------------------------------------------------- cron


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        ("0 */12 * * *", "2026-01-01T11:59:00", "2026-01-01T12:00:00"),
        ("0 */12 * * *", "2026-01-01T12:00:00", "2026-01-02T00:00:00"),  # strictly after
        ("30 2 * * mon-fri", "2026-01-02T03:00:00", "2026-01-05T02:30:00"),  # Fri -> Mon
        ("0 0 13 * fri", "2026-11-26T20:07:00", "2026-11-27T00:00:00"),  # dom OR dow (Vixie)
        ("0 0 29 2 *", "2026-03-01T00:00:00", "2028-02-29T00:00:00"),
        ("15,45 * * jan,jul 7", "2026-01-03T23:50:00", "2026-01-04T00:15:00"),  # 7 is Sunday
        ("@daily", "2026-05-05T10:00:00", "2026-05-06T00:00:00"),
        ("@every 10s", "2026-01-01T00:00:03", "2026-01-01T00:00:10"),  # aligned to the epoch
        ("@every 1h30m", "1970-01-01T01:40:00", "1970-01-01T03:00:00"),
    ],
)
def test_next_run(schedule: str, after: str, expected: str) -> None:
    assert parse_cron(schedule).next_after(at(after)) == at(expected)


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("", "empty schedule"),
        ("* * * *", "expected 5 fields, found 4"),
        ("60 * * * *", "minute field: 60 is out of range 0-59"),
        ("* 24 * * *", "hour field: 24 is out of range 0-23"),
        ("* * 0 * *", "day of month field: 0 is out of range 1-31"),
        ("* * * foo *", "month field: 'foo' is not a number"),
        ("*/0 * * * *", "minute field: step '0' is not a positive number"),
        ("9-3 * * * *", "minute field: range '9-3' runs backwards"),
        ("0 0 30 2 *", "never runs"),
        ("@sometimes", "unknown descriptor"),
        ("@every 10", "@every:"),
        ("@every 500ms", "shorter than one second"),
    ],
)
def test_bad_schedules_say_what_is_wrong(schedule: str, message: str) -> None:
    with pytest.raises(CronError, match=message) as err:
        parse_cron(schedule)
    assert err.value.hint and "five fields" in err.value.hint


@settings(max_examples=60, deadline=None)
@given(
    minute=st.sampled_from(["*", "0", "*/15", "5,35", "10-20/5"]),
    hour=st.sampled_from(["*", "*/12", "3", "1-5"]),
    dom=st.sampled_from(["*", "1", "15", "28"]),
    dow=st.sampled_from(["*", "0", "mon-fri", "6"]),
    when=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)),
)
def test_next_run_is_the_first_matching_minute_after(
    minute: str, hour: str, dom: str, dow: str, when: datetime
) -> None:
    schedule = parse_cron(f"{minute} {hour} {dom} * {dow}")
    found = schedule.next_after(when)
    assert found > when and found.second == 0 and found.microsecond == 0
    assert found.minute in schedule.minutes and found.hour in schedule.hours and schedule._day_matches(found)
    # nothing in between: asking from one minute before finds the same run
    assert schedule.next_after(found - timedelta(minutes=1)) == found


# --------------------------------------------------------------------------- the document

DOC = "apiVersion: v1alpha1\nkind: EtcdBackupConfig\n"


def test_document_defaults_are_k3s_like() -> None:
    model = load_config(DOC).documents[0].model
    assert (model.schedule, model.retention, model.path, model.compress) == (  # type: ignore[attr-defined]
        "0 */12 * * *", 5, "/var/lib/etcd-backups", False,
    )  # fmt: skip
    assert validate(load_config(DOC), "metal").errors == []


def test_document_unknown_keys_and_wrong_types_are_refused_with_their_path() -> None:
    with pytest.raises(ConfigDecodeError) as err:
        load_config(DOC + "schedul: '@daily'\nretention: five\ncompress: 'yes'\n")
    text = str(err.value)
    assert "EtcdBackupConfig" in text and "schedul (line 3)" in text
    assert 'retention (line 4): expected an integer, got "five"' in text
    assert "compress (line 5): expected a boolean" in text
    assert err.value.hint and "schedul -> schedule?" in err.value.hint


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            "schedule: '0 25 * * *'\n",
            'EtcdBackupConfig/: schedule: invalid cron schedule "0 25 * * *": hour field',
        ),
        ("retention: 0\n", "EtcdBackupConfig/: retention: retention must be at least 1"),
        ("path: var/backups\n", 'EtcdBackupConfig/: path: path "var/backups" must be absolute'),
        ("path: /var/../etc\n", 'EtcdBackupConfig/: path: path "/var/../etc" must be a clean absolute path'),
        ("path: /etc/backups\n", 'EtcdBackupConfig/: path: path "/etc/backups" must be under /var/'),
        ("path: /var/lib/etcd/snap\n", "must not be inside etcd's data directory /var/lib/etcd"),
    ],
)
def test_document_bad_values_are_refused_with_their_path(body: str, error: str) -> None:
    errors = validate(load_config(DOC + body), "metal").errors
    assert len(errors) == 1 and error in errors[0], errors


# --------------------------------------------------------------------------- an etcd double


class FakeCluster:
    """An in-memory etcd for the backup: who leads, one compare-and-swap key space, snapshots."""

    def __init__(self) -> None:
        self.leader = 1
        self.revision = 100
        self.kv: dict[bytes, etcdlib.KV] = {}
        self.disk_full = False
        self.saved: list[tuple[int, Path]] = []  # (member id, path) of every snapshot saved
        self.after_claim: Callable[[int], None] = lambda member: None

    def member(self, member_id: int, *, before_status: asyncio.Event | None = None) -> FakeMember:
        return FakeMember(self, member_id, before_status)


class FakeMember:
    def __init__(self, cluster: FakeCluster, member_id: int, before_status: asyncio.Event | None) -> None:
        self.cluster, self.id, self.before_status = cluster, member_id, before_status

    def factory(self) -> AbstractAsyncContextManager[etcd_backup.BackupStore]:
        @asynccontextmanager
        async def opened() -> AsyncIterator[etcd_backup.BackupStore]:
            yield self

        return opened()

    async def status(self, endpoint: str | None = None, *, timeout: float | None = None) -> etcdlib.Status:
        if self.before_status is not None:
            await self.before_status.wait()
        return etcdlib.Status("", self.id, self.cluster.leader, "3.5.13", 0, 0, 0, 0, 0, (), False)

    async def get(self, key: str | bytes, *, timeout: float | None = None) -> etcdlib.RangeResult:
        raw = key.encode() if isinstance(key, str) else key
        found = [self.cluster.kv[raw]] if raw in self.cluster.kv else []
        return etcdlib.RangeResult(found, self.cluster.revision, len(found))

    async def put_if_unchanged(
        self, key: str | bytes, value: str | bytes, *, mod_revision: int, timeout: float | None = None
    ) -> bool:
        raw = key.encode() if isinstance(key, str) else key
        current = self.cluster.kv.get(raw)
        if (current.mod_revision if current else 0) != mod_revision:
            return False
        self.cluster.revision += 1
        data = value.encode() if isinstance(value, str) else value
        self.cluster.kv[raw] = etcdlib.KV(raw, data, self.cluster.revision, self.cluster.revision, 1)
        self.cluster.after_claim(self.id)
        return True

    async def snapshot(self, *, endpoint: str | None = None, timeout: float = 300.0) -> AsyncIterator[bytes]:
        yield b""  # pragma: no cover - the double saves through fake_save


async def fake_save(store: etcd_backup.BackupStore, path: Path) -> etcdlib.SnapshotInfo:
    """What save_snapshot does, minus etcdutl: write a snapshot with its SHA-256 trailer, verify it."""
    assert isinstance(store, FakeMember)
    cluster = store.cluster
    if cluster.disk_full:
        with path.open("wb") as f:
            f.write(b"\0" * 512)  # part of it got written before the disk filled up
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    db = cluster.revision.to_bytes(8, "big") * 128  # 1024 bytes: two bbolt pages
    path.write_bytes(db + hashlib.sha256(db).digest())
    assert etcdlib.verify_snapshot(path)
    cluster.saved.append((store.id, path))
    return etcdlib.SnapshotInfo(hash=1, revision=cluster.revision, total_keys=1, total_size=len(db))


# --------------------------------------------------------------------------- files


def test_take_backup_names_verifies_and_keeps_the_newest(tmp_path: Path) -> None:
    cluster = FakeCluster()
    member = cluster.member(1)
    stranger = tmp_path / "notes.txt"
    stranger.parent.mkdir(parents=True, exist_ok=True)
    stranger.write_text("not a backup")

    async def main() -> None:
        for hour in range(4):
            cluster.revision += 10
            backup, info, deleted = await etcdlib.take_backup(
                lambda p: fake_save(member, p), tmp_path, node="cp-1", taken=T0 + timedelta(hours=hour),
                compress=False, keep=2,
            )  # fmt: skip
            assert backup.name == f"etcd-snapshot-cp-1-20260101T{11 + hour:02d}5900Z-r{info.revision}.db"
            assert [d.revision for d in deleted] == ([] if hour < 2 else [info.revision - 20])

    run(main)
    held = etcdlib.list_backups(tmp_path)
    assert [b.revision for b in held] == [140, 130]  # newest first
    assert stranger.read_text() == "not a backup"  # never touched
    assert not list(tmp_path.glob(".incoming-*"))


def test_compressed_backup_reads_back_as_the_snapshot(tmp_path: Path) -> None:
    cluster = FakeCluster()
    member = cluster.member(1)

    async def main() -> etcdlib.BackupFile:
        backup, _, _ = await etcdlib.take_backup(
            lambda p: fake_save(member, p), tmp_path, node="cp-1", taken=T0, compress=True, keep=5
        )
        return backup

    backup = asyncio.run(main())
    assert backup.name.endswith(".db.gz") and backup.compressed
    raw = gzip.decompress(backup.path.read_bytes())
    assert len(raw) % 512 == 32 and hashlib.sha256(raw[:-32]).digest() == raw[-32:]
    assert [b.path for b in etcdlib.list_backups(tmp_path)] == [backup.path]


def test_full_disk_keeps_every_older_backup(tmp_path: Path) -> None:
    cluster = FakeCluster()
    member = cluster.member(1)

    async def main() -> None:
        for hour in range(2):
            await etcdlib.take_backup(
                lambda p: fake_save(member, p), tmp_path, node="cp-1", taken=T0 + timedelta(hours=hour),
                compress=False, keep=2,
            )  # fmt: skip
        cluster.disk_full = True
        with pytest.raises(OSError, match="No space left"):
            await etcdlib.take_backup(
                lambda p: fake_save(member, p), tmp_path, node="cp-1", taken=T0 + timedelta(hours=2),
                compress=False, keep=1,
            )  # fmt: skip

    run(main)
    held = etcdlib.list_backups(tmp_path)
    assert len(held) == 2, held  # retention 1 never ran: the new snapshot failed
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(b.name for b in held)  # no partial file


# --------------------------------------------------------------------------- the controllers


class ManualClock:
    """The runtime's clock and sleep: time moves only when the test says so, and only once the
    controllers are asleep (a sleep is relative to the time it starts at)."""

    def __init__(self, start: datetime) -> None:
        self.now = start
        self.sleeping = 0
        self._moved = asyncio.Condition()

    def __call__(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        target = self.now + timedelta(seconds=seconds)
        async with self._moved:
            self.sleeping += 1
            try:
                await self._moved.wait_for(lambda: self.now >= target)
            finally:
                self.sleeping -= 1

    async def advance_to(self, when: datetime, *, sleepers: int = 1) -> None:
        async with asyncio.timeout(3):
            while self.sleeping < sleepers:
                await asyncio.sleep(0.001)
        async with self._moved:
            self.now = when
            self._moved.notify_all()


def backup_doc(extra: str = "") -> str:
    return v1alpha1_config() + "---\n" + DOC + extra


@asynccontextmanager
async def node(
    tmp_path: Path, clock: ManualClock, store: etcd_backup.BackupStoreFactory, *, name: str, text: str
) -> AsyncIterator[State]:
    """One control plane's state with the backup controllers running on ``clock``; etcd healthy."""
    state = State()
    registry = Registry()
    register_node_types(registry)
    runtime = Runtime(state, registry=registry, clock=clock, sleep=clock.sleep)
    layout = Layout(tmp_path / name, "127.5.0.9")
    for controller in (
        config_controllers.machine_type_controller(),
        etcd_backup.etcd_backup_config_controller(),
        etcd_backup.BackupController(layout, store, save=fake_save),
    ):
        runtime.register(controller)
    state.create(MACHINE_CONFIGS.new("v1alpha1", MachineConfigSpec(text)))
    state.create(SERVICES.new("etcd", ServiceSpec(running=True, healthy=True)))
    state.create(ETCD_SPECS.new("etcd", EtcdSpecSpec(name=name)))
    task = asyncio.create_task(runtime.run())
    try:
        yield state
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def backups_dir(tmp_path: Path, name: str) -> Path:
    return tmp_path / name / "var/lib/etcd-backups"


async def status_where(state: State, check: Callable[[EtcdBackupStatusSpec], object]) -> EtcdBackupStatusSpec:
    found = await assert_resource(state, ETCD_BACKUP_STATUSES, "etcd", lambda r: check(r.spec), timeout=3)
    return found.spec


def test_snapshots_on_schedule_with_retention(tmp_path: Path) -> None:
    cluster = FakeCluster()

    async def main() -> None:
        clock = ManualClock(T0)
        text = backup_doc("retention: 2\n")
        async with node(tmp_path, clock, cluster.member(1).factory, name="cp-1", text=text) as state:
            config = await assert_resource(state, ETCD_BACKUP_CONFIGS, "etcd")
            assert (config.spec.schedule, config.spec.retention) == ("0 */12 * * *", 2)
            first = await status_where(state, lambda s: s.next_run is not None)
            assert (
                first.next_run == at("2026-01-01T12:00:00") and first.last_success is None and first.held == 0
            )
            await clock.advance_to(at("2026-01-01T11:59:59"))  # not yet
            await asyncio.sleep(0.05)
            assert not cluster.saved
            taken: list[int] = []
            for i, slot in enumerate(["2026-01-01T12:00:00", "2026-01-02T00:00:00", "2026-01-02T12:00:00"]):
                cluster.revision += 5
                await clock.advance_to(at(slot) + timedelta(seconds=1))
                done = await status_where(state, lambda s, t=slot: s.last_run == at(t))
                assert done.last_success == at(slot) + timedelta(seconds=1), done
                assert done.held == min(i + 1, 2) and done.last_failure is None
                assert done.next_run == at(slot) + timedelta(hours=12)
                assert done.last_snapshot == f"/var/lib/etcd-backups/{done.snapshots[0].name}"
                taken.append(done.snapshots[0].revision)
            assert [s.revision for s in done.snapshots] == taken[:0:-1]  # the oldest went
            on_disk = sorted(p.name for p in backups_dir(tmp_path, "cp-1").iterdir())
            assert on_disk == sorted(s.name for s in done.snapshots)

    run(main, timeout=10)


def test_failed_snapshot_keeps_the_older_ones_and_says_why(tmp_path: Path) -> None:
    cluster = FakeCluster()

    async def main() -> None:
        clock = ManualClock(T0)
        text = backup_doc("schedule: '@hourly'\nretention: 1\n")
        async with node(tmp_path, clock, cluster.member(1).factory, name="cp-1", text=text) as state:
            await clock.advance_to(at("2026-01-01T12:00:00"))
            good = await status_where(state, lambda s: s.last_success is not None)
            cluster.disk_full = True
            await clock.advance_to(at("2026-01-01T13:00:00"))
            failed = await status_where(state, lambda s: s.last_failure is not None)
            assert "No space left on device" in failed.last_failure_reason
            assert failed.last_failure_reason.startswith("snapshot failed: writing the snapshot")
            assert failed.last_run_result.startswith("failed:")
            assert failed.last_success == good.last_success and failed.snapshots == good.snapshots
            assert failed.next_run == at("2026-01-01T14:00:00")
            assert [p.name for p in backups_dir(tmp_path, "cp-1").iterdir()] == [good.snapshots[0].name]
            cluster.disk_full = False  # space again: the next slot works and retention 1 applies
            await clock.advance_to(at("2026-01-01T14:00:00"))
            back = await status_where(state, lambda s: s.last_success == at("2026-01-01T14:00:00"))
            assert back.held == 1 and back.snapshots[0].taken == at("2026-01-01T14:00:00")
            assert back.last_failure == failed.last_failure  # the last failure stays visible

    run(main, timeout=10)


def test_leader_change_mid_schedule_never_takes_two_snapshots(tmp_path: Path) -> None:
    cluster = FakeCluster()

    async def main() -> None:
        clock = ManualClock(T0)
        text = backup_doc("schedule: '@hourly'\n")
        a_claimed = asyncio.Event()

        def move_leadership(member: int) -> None:
            if member == 1:
                cluster.leader = 2  # cp-a claimed the slot, then lost the leadership
                a_claimed.set()

        cluster.after_claim = move_leadership
        member_b = cluster.member(2, before_status=a_claimed)  # cp-b looks only after that
        async with (
            node(tmp_path, clock, cluster.member(1).factory, name="cp-a", text=text) as a,
            node(tmp_path, clock, member_b.factory, name="cp-b", text=text) as b,
        ):
            await status_where(a, lambda s: s.next_run is not None)
            await status_where(b, lambda s: s.next_run is not None)
            await clock.advance_to(at("2026-01-01T12:00:00"), sleepers=2)
            took = await status_where(a, lambda s: s.last_run == at("2026-01-01T12:00:00"))
            skipped = await status_where(b, lambda s: s.last_run == at("2026-01-01T12:00:00"))
            assert took.last_run_result.startswith("snapshot taken"), took
            assert skipped.last_run_result == "skipped: cp-a took this slot", skipped
            assert skipped.last_success is None and skipped.last_failure is None
            # the next slot belongs to the new leader, cp-b, and to nobody else
            await clock.advance_to(at("2026-01-01T13:00:00"), sleepers=2)
            await status_where(b, lambda s: s.last_success is not None)
            other = await status_where(a, lambda s: s.last_run == at("2026-01-01T13:00:00"))
            assert other.last_run_result == "skipped: this member is not the etcd leader"
        assert [member for member, _ in cluster.saved] == [1, 2]
        assert (
            cluster.kv[etcd_backup.SLOT_KEY.encode()].value
            == f"{int(at('2026-01-01T13:00:00').timestamp())} cp-b".encode()
        )

    run(main, timeout=10)


def test_claim_slot_is_once_per_slot_and_never_backwards() -> None:
    cluster = FakeCluster()
    a, b = cluster.member(1), cluster.member(2)

    async def main() -> None:
        assert await etcd_backup.claim_slot(a, at("2026-01-01T12:00:00"), "cp-a") == (True, "cp-a")
        assert await etcd_backup.claim_slot(b, at("2026-01-01T12:00:00"), "cp-b") == (False, "cp-a")
        assert await etcd_backup.claim_slot(b, at("2026-01-01T11:00:00"), "cp-b") == (False, "cp-a")
        assert await etcd_backup.claim_slot(b, at("2026-01-01T13:00:00"), "cp-b") == (True, "cp-b")

    run(main)


def test_workers_and_configs_without_the_document_take_no_backups(tmp_path: Path) -> None:
    async def main() -> None:
        clock = ManualClock(T0)
        cluster = FakeCluster()
        async with node(
            tmp_path,
            clock,
            cluster.member(1).factory,
            name="w",
            text=v1alpha1_config(type="worker") + "---\n" + DOC,
        ) as state:
            await asyncio.sleep(0.1)
            assert (
                state.list("etcd", ETCD_BACKUP_CONFIGS) == []
                and state.list("etcd", ETCD_BACKUP_STATUSES) == []
            )
        async with node(
            tmp_path, clock, cluster.member(1).factory, name="cp", text=v1alpha1_config()
        ) as state:
            await asyncio.sleep(0.1)
            assert state.list("etcd", ETCD_BACKUP_CONFIGS) == []

    run(main)


# --------------------------------------------------------------------------- bootstrap --recover-from


def test_recover_from_takes_a_compressed_backup_as_its_snapshot(tmp_path: Path) -> None:
    import contextlib

    from ichor.cli._bootstrap import _decompressed
    from ichor.machinery.errors import MachineryError

    db = b"\1" * 1024
    snapshot = db + hashlib.sha256(db).digest()
    plain = tmp_path / "plain.db"
    plain.write_bytes(snapshot)
    packed = tmp_path / "backup.db.gz"
    packed.write_bytes(gzip.compress(snapshot))
    cut = tmp_path / "cut.db.gz"
    cut.write_bytes(packed.read_bytes()[:-20])
    with contextlib.ExitStack() as stack:
        assert _decompressed(plain, stack) == plain  # a plain snapshot goes as it is
        inflated = _decompressed(packed, stack)
        assert inflated != packed and inflated.read_bytes() == snapshot
        assert etcdlib.verify_snapshot(inflated)
        with pytest.raises(MachineryError, match="error decompressing snapshot"):
            _decompressed(cut, stack)
    assert not inflated.exists()  # the temporary copy goes with the command
