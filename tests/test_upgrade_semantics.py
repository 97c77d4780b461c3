"""Upgrade semantics on control planes as Talos 1.7.6 (issue 23 §1): the rules before an upgrade
(``ValidateForUpgrade``) with Talos's texts, the upgrade mutex's TryLock over an in-memory etcd
stand-in (the real etcd runs in ``test_e2e_upgrade_etcd.py``), what ``--force`` and a worker skip,
and what an upgrade without ``--preserve`` does in the sequencer: leave etcd, stop the services,
wipe EPHEMERAL, reboot; a node that cannot leave keeps its member and EPHEMERAL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.etcd import KV, EtcdUnavailableError, Member, RangeResult
from ichor.machined.cosi import Source, State
from ichor.machined.events import EventBus
from ichor.machined.platform import EXIT_REBOOT, Layout, Platform
from ichor.machined.resources import MACHINE_TYPE_ID, MACHINE_TYPES, MachineStage, MachineTypeSpec
from ichor.machined.sequencer import RESET_KEEPS, NodeParts, Sequencer
from ichor.machined.server._context import MachineContext
from ichor.machined.server._etcd_upgrade import (
    ETCD_SINGLE_MEMBER,
    MUTEX_LOCKED,
    UPGRADE_MUTEX_PREFIX,
    UpgradeMutexError,
    upgrade_mutex,
    upgrade_refusal,
)


def _member(member_id: int, name: str) -> Member:
    url = (f"https://10.5.0.{member_id}:2379",) if name else ()
    return Member(member_id, name, (f"https://10.5.0.{member_id}:2380",), url, False)


def _refusal(members: list[Member], *, preserve: bool, unhealthy: dict[int, str] | None = None) -> tuple[str | None, list[int]]:  # fmt: skip
    probed: list[int] = []

    async def probe(member: Member) -> str | None:
        probed.append(member.id)
        return (unhealthy or {}).get(member.id)

    return asyncio.run(upgrade_refusal(members, preserve=preserve, probe=probe)), probed


# --- the rules --------------------------------------------------------------------------------------


def test_a_single_member_is_refused_without_preserve_and_probed_with_it() -> None:
    assert _refusal([_member(1, "cp-1")], preserve=False) == (ETCD_SINGLE_MEMBER, [])
    assert ETCD_SINGLE_MEMBER == ("only 1 etcd member found; assuming this is not an HA setup and refusing to "
                                  "upgrade; if this is a single-node cluster, use --preserve to upgrade")  # fmt: skip
    assert _refusal([_member(1, "cp-1")], preserve=True) == (None, [1])
    problem, _ = _refusal([_member(1, "cp-1")], preserve=True, unhealthy={1: "context deadline exceeded"})
    assert problem == ("etcd member 0000000000000001 is not healthy; all members must be healthy to perform an "
                       "upgrade: context deadline exceeded")  # fmt: skip


@pytest.mark.parametrize("preserve", [False, True])
def test_two_members_are_refused_with_or_without_preserve(preserve: bool) -> None:
    problem, probed = _refusal([_member(1, "cp-1"), _member(2, "cp-2")], preserve=preserve)
    assert problem == "etcd member count(2) is insufficient to maintain quorum if upgrade commences"
    assert probed == []


def test_members_are_checked_in_order_and_the_first_refusal_names_its_member_by_hex_id() -> None:
    members = [_member(0x8E8F3A1B2C3D4E5F, "cp-1"), _member(0x2A, ""), _member(3, "cp-3")]
    problem, probed = _refusal(members, preserve=False, unhealthy={3: "down"})
    assert problem == ("etcd member 000000000000002a is not started, all members must be running to perform an "
                       "upgrade")  # fmt: skip
    assert probed == [0x8E8F3A1B2C3D4E5F]  # nothing after the refusal is asked

    members = [_member(1, "cp-1"), _member(0xABC, "cp-2"), _member(3, "")]
    problem, probed = _refusal(members, preserve=False, unhealthy={0xABC: "etcdserver: request timed out"})
    assert problem == ("etcd member 0000000000000abc is not healthy; all members must be healthy to perform an "
                       "upgrade: etcdserver: request timed out")  # fmt: skip
    assert probed == [1, 0xABC]

    assert _refusal([_member(1, "a"), _member(2, "b"), _member(3, "c")], preserve=False) == (None, [1, 2, 3])


# --- the mutex (TryLock) over an in-memory stand-in of etcd's calls --------------------------------------


@dataclass
class _Store:
    """etcd's KV with leases and revisions, as much as the mutex uses."""

    revision: int = 0
    keys: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> (create revision, lease)
    leases: set[int] = field(default_factory=set)
    fail_grant: bool = False

    async def lease_grant(self, ttl: int, *, timeout: float | None = None) -> int:
        if self.fail_grant:
            raise EtcdUnavailableError("etcd unavailable: no leader")
        lease = 0x7A00 + len(self.leases) + self.revision
        self.leases.add(lease)
        return lease

    async def lease_keepalive(self, lease: int, *, timeout: float | None = None) -> int:
        return 60

    async def lease_revoke(self, lease: int, *, timeout: float | None = None) -> None:
        self.leases.discard(lease)
        self.keys = {k: v for k, v in self.keys.items() if v[1] != lease}

    async def create(self, key: str | bytes, value: str | bytes, *, lease: int = 0, timeout: float | None = None) -> int | None:  # fmt: skip
        if str(key) in self.keys:
            return None
        self.revision += 1
        self.keys[str(key)] = (self.revision, lease)
        return self.revision

    async def get(self, key: str | bytes, *, prefix: bool = False) -> RangeResult:
        found = [KV(k.encode(), b"", rev, rev, 1, lease) for k, (rev, lease) in self.keys.items()
                 if k.startswith(str(key))]  # fmt: skip
        return RangeResult(found, self.revision, len(found))

    async def wait_deleted(self, key: str | bytes, *, after: int, timeout: float | None = None) -> int:
        raise AssertionError("TryLock never waits")


def test_the_mutex_is_tried_not_waited_for_and_released_when_the_checks_end() -> None:
    async def main() -> None:
        store = _Store()
        async with upgrade_mutex(store) as key:
            assert key.startswith(f"{UPGRADE_MUTEX_PREFIX}/") and list(store.keys) == [key]
            with pytest.raises(UpgradeMutexError) as err:
                async with upgrade_mutex(store):
                    raise AssertionError("a second holder got in")
            assert str(err.value) == f"error trying to lock etcd upgrade mutex: {MUTEX_LOCKED}"
            assert list(store.keys) == [key]  # the loser's key went with its lease
        assert store.keys == {} and store.leases == set()
        async with upgrade_mutex(store):  # free again
            pass
        with pytest.raises(RuntimeError):  # released on the way out of a failing check too
            async with upgrade_mutex(store):
                raise RuntimeError("check failed")
        assert store.keys == {}
        store.fail_grant = True
        with pytest.raises(UpgradeMutexError) as err:
            async with upgrade_mutex(store):
                pass
        assert str(err.value) == "error establishing etcd concurrency session: etcd unavailable: no leader"

    asyncio.run(main())


# --- the Upgrade RPC: who is checked -------------------------------------------------------------------


@dataclass
class _Lifecycle:
    upgrades: list[tuple[str, bool]] = field(default_factory=list)
    staged: list[tuple[str, bool]] = field(default_factory=list)

    def request_upgrade(self, actor_id: str, work: Any, mode: int = 0, *, preserve: bool = True) -> None:
        self.upgrades.append((actor_id, preserve))

    def request_staged_upgrade(self, actor_id: str, mode: int = 0, *, preserve: bool = True) -> None:
        self.staged.append((actor_id, preserve))


class _Etcd:
    def __init__(self) -> None:
        self.validated: list[bool] = []

    async def validate_for_upgrade(self, *, preserve: bool) -> None:
        self.validated.append(preserve)
        raise GRPCError(Status.UNKNOWN, f"error validating etcd for upgrade: {ETCD_SINGLE_MEMBER}")


class _Upgrades:
    def check_trial(self, *, force: bool) -> None:
        pass

    async def fetch(self, image: str, mirrors: Any) -> Any:
        return object()

    async def stage(self, staged: Any) -> None:
        pass


def _context(tmp_path: Path, machine_type: MachineTypeSpec) -> tuple[MachineContext, _Lifecycle, _Etcd, list[str]]:  # fmt: skip
    from ichor.machined.configstore import LoadedConfig
    from ichor.machinery.config import load_config

    loaded = LoadedConfig(load_config(f"version: v1alpha1\nmachine:\n  type: {machine_type.value}\n"), "")
    state = State()
    state.create(MACHINE_TYPES.new(MACHINE_TYPE_ID, machine_type))
    lifecycle, etcd, said = _Lifecycle(), _Etcd(), []
    context = MachineContext(
        layout=Layout(tmp_path, "127.0.0.1", Platform.METAL), state=state, supervisor=None,  # type: ignore[arg-type]
        events=EventBus(), store=type("Store", (), {"active": loaded})(),  # type: ignore[arg-type]
        lifecycle=lifecycle, etcd=etcd, clock=None, upgrades=_Upgrades(), say=said.append,  # type: ignore[arg-type]
    )  # fmt: skip
    return context, lifecycle, etcd, said


def test_a_control_plane_is_checked_unless_forced_and_a_worker_never(tmp_path: Path) -> None:
    async def main() -> None:
        image = "ghcr.io/siderolabs/installer:v2"
        context, lifecycle, etcd, said = _context(tmp_path, MachineTypeSpec.CONTROLPLANE)
        with pytest.raises(GRPCError) as err:
            await context.upgrade(machine_pb2.UpgradeRequest(image=image), "a1")
        assert err.value.message == f"error validating etcd for upgrade: {ETCD_SINGLE_MEMBER}"
        assert etcd.validated == [False] and lifecycle.upgrades == []
        # --force: no etcd client, no mutex, no checks; without --preserve the node leaves etcd
        await context.upgrade(machine_pb2.UpgradeRequest(image=image, force=True), "a2")
        assert etcd.validated == [False] and lifecycle.upgrades == [("a2", False)]
        assert (
            said[-1]
            == "upgrade without --preserve: this node leaves etcd, then EPHEMERAL is wiped before the reboot"
        )
        await context.upgrade(
            machine_pb2.UpgradeRequest(image=image, force=True, preserve=True, stage=True), "a3"
        )
        assert lifecycle.staged == [("a3", True)]

        context, lifecycle, etcd, said = _context(tmp_path, MachineTypeSpec.WORKER)
        await context.upgrade(machine_pb2.UpgradeRequest(image=image, stage=True), "w1")
        assert etcd.validated == [] and lifecycle.staged == [("w1", False)]
        assert said[-1] == "upgrade without --preserve: EPHEMERAL is wiped before the reboot"

    asyncio.run(main())


# --- the sequence ------------------------------------------------------------------------------------


class _Supervisor:
    def __init__(self) -> None:
        self.stopped: list[tuple[str, ...]] = []
        self.loaded = ["apid", "etcd", "machined"]

    def list(self) -> list[Any]:
        return [type("Info", (), {"id": service})() for service in self.loaded]

    async def stop_all(self, *, keep: Any = ()) -> None:
        self.stopped.append(tuple(keep))


def _sequencer(tmp_path: Path, leave: Callable[[], str | None]) -> tuple[Sequencer, Layout, list[str], EventBus, _Supervisor, list[str]]:  # fmt: skip
    layout = Layout(tmp_path / "root", "127.0.0.1")
    layout.ensure()
    for path in ("/var/lib/etcd/member/snap/db", "/var/lib/containerd/x", "/var/log/console.log",
                 "/system/state/config.yaml"):  # fmt: skip
        layout.path(path).parent.mkdir(parents=True, exist_ok=True)
        layout.path(path).write_text("data")
    said: list[str] = []
    asked: list[str] = []

    async def leave_etcd() -> str | None:
        asked.append("leave")
        return leave()

    bus, supervisor = EventBus(), _Supervisor()
    parts = NodeParts(
        layout=layout, state=State(), events=bus, store=type("Store", (), {})(),  # type: ignore[arg-type]
        supervisor=supervisor, stage=Source("stage", MachineStage.RUNNING), say=said.append,  # type: ignore[arg-type]
        clock=lambda: datetime.now(UTC), services=lambda loaded: [], maintenance=None,  # type: ignore[arg-type]
        leave_etcd=None, leave_etcd_for_upgrade=leave_etcd,  # type: ignore[arg-type]
    )  # fmt: skip
    return Sequencer(parts), layout, said, bus, supervisor, asked


def _phases(bus: EventBus) -> list[str]:
    return [e.payload.phase for e in bus.history()
            if isinstance(e.payload, machine_pb2.PhaseEvent) and e.payload.action == machine_pb2.PhaseEvent.STOP]  # fmt: skip


def _run(sequencer: Sequencer, request: Callable[[], None]) -> int:
    async def main() -> int:
        sequencer._stop = asyncio.get_running_loop().create_future()
        request()
        return await asyncio.wait_for(sequencer._stop, 5)

    return asyncio.run(main())


async def _written(printf: Callable[[str], None]) -> None:
    printf("v2 written to slot B, on trial for 3 boots")


def test_without_preserve_the_node_leaves_etcd_and_ephemeral_is_wiped_before_the_reboot(
    tmp_path: Path,
) -> None:
    sequencer, layout, said, bus, supervisor, asked = _sequencer(tmp_path, lambda: None)
    assert _run(sequencer, lambda: sequencer.request_upgrade("a1", _written, preserve=False)) == EXIT_REBOOT
    assert asked == ["leave"] and supervisor.stopped == [RESET_KEEPS]
    assert _phases(bus) == ["upgrade", "leave", "stopServices", "wipeEphemeral"]
    assert not layout.path("/var/lib/etcd").exists() and not layout.path("/var/lib/containerd").exists()
    assert layout.path("/var/log/console.log").exists()  # as a serial console, it survives
    assert layout.path("/system/state/config.yaml").read_text() == "data"  # STATE is kept
    assert said[-1] == "upgrade written: rebooting into the new slot"


def test_a_worker_without_preserve_has_no_leave_phase_and_ephemeral_is_wiped(tmp_path: Path) -> None:
    sequencer, layout, _said, bus, supervisor, asked = _sequencer(tmp_path, lambda: None)
    supervisor.loaded = ["apid", "kubelet", "machined"]
    assert _run(sequencer, lambda: sequencer.request_upgrade("w1", _written, preserve=False)) == EXIT_REBOOT
    assert asked == [] and _phases(bus) == ["upgrade", "stopServices", "wipeEphemeral"]
    assert not layout.path("/var/lib/containerd").exists()


def test_with_preserve_nothing_is_left_or_wiped(tmp_path: Path) -> None:
    sequencer, layout, _said, bus, supervisor, asked = _sequencer(tmp_path, lambda: None)
    assert _run(sequencer, lambda: sequencer.request_upgrade("a1", _written)) == EXIT_REBOOT
    assert asked == [] and supervisor.stopped == [] and _phases(bus) == ["upgrade"]
    assert layout.path("/var/lib/etcd/member/snap/db").read_text() == "data"


def test_a_node_that_cannot_leave_etcd_keeps_its_member_and_ephemeral(tmp_path: Path) -> None:
    sequencer, layout, said, bus, supervisor, asked = _sequencer(
        tmp_path, lambda: "this is the only voting etcd member"
    )
    assert _run(sequencer, lambda: sequencer.request_upgrade("a1", _written, preserve=False)) == EXIT_REBOOT
    assert asked == ["leave"] and supervisor.stopped == [] and _phases(bus) == ["upgrade", "leave"]
    assert layout.path("/var/lib/etcd/member/snap/db").read_text() == "data"
    assert ("upgrade: could not leave etcd: this is the only voting etcd member; this node keeps its etcd member "
            "and EPHEMERAL, as with --preserve") in said  # fmt: skip


def test_a_failed_slot_write_leaves_etcd_alone(tmp_path: Path) -> None:
    sequencer, layout, said, _bus, supervisor, asked = _sequencer(tmp_path, lambda: None)

    async def fails(printf: Callable[[str], None]) -> None:
        raise OSError("no space left on BOOT")

    async def main() -> bool:
        sequencer._stop = asyncio.get_running_loop().create_future()
        sequencer.request_upgrade("a1", fails, preserve=False)
        await asyncio.sleep(0.5)
        return sequencer._stop.done()

    assert asyncio.run(main()) is False
    assert asked == [] and supervisor.stopped == []
    assert layout.path("/var/lib/etcd/member/snap/db").exists()
    assert said[-1] == "upgrade failed: no space left on BOOT; the node stays on the slot it booted"


@pytest.mark.parametrize("preserve", [False, True])
def test_a_staged_upgrade_leaves_etcd_before_its_reboot_without_preserve(
    tmp_path: Path, preserve: bool
) -> None:
    sequencer, layout, _said, bus, supervisor, asked = _sequencer(tmp_path, lambda: None)
    assert _run(sequencer, lambda: sequencer.request_staged_upgrade("s1", preserve=preserve)) == EXIT_REBOOT
    assert asked == ([] if preserve else ["leave"]) and supervisor.stopped == []
    sequences = [
        e.payload.sequence for e in bus.history() if isinstance(e.payload, machine_pb2.SequenceEvent)
    ]
    assert sequences == ["stageUpgrade", "reboot"]
    assert layout.path("/var/lib/containerd/x").exists()  # EPHEMERAL goes at the boot that performs it


@pytest.mark.parametrize("preserve", [False, True])
def test_the_boot_that_performs_a_staged_upgrade_wipes_ephemeral_without_preserve(tmp_path: Path, preserve: bool) -> None:  # fmt: skip
    sequencer, layout, said, _bus, supervisor, _asked = _sequencer(tmp_path, lambda: None)

    @dataclass
    class Staged:
        preserve: bool

    async def acquire() -> object:
        return object()

    async def staged(loaded: object, printf: Callable[[str], None]) -> Staged:
        return Staged(preserve)

    sequencer.parts.store.acquire = acquire  # type: ignore[attr-defined]
    sequencer.parts.staged_upgrade = staged  # type: ignore[assignment]
    assert asyncio.run(asyncio.wait_for(sequencer.run(), 5)) == EXIT_REBOOT
    assert layout.path("/var/lib/containerd/x").exists() is preserve
    assert supervisor.stopped == ([] if preserve else [RESET_KEEPS])
    assert layout.path("/system/state/config.yaml").exists()
    assert said[-1] == "staged upgrade written: rebooting into it"
