"""Upgrade, blessing, rollback and META on a node booted from its own disk, without a disk.

BOOT is a directory (grubenv and slot directories as the installer leaves them) and META a 1 MiB
file, so the whole path the API takes runs here: ``MachineContext.upgrade`` with Talos's refusals
and texts, the slot written and put on trial, the health wait that blesses it (or reboots past
its deadline), ``--stage`` through META 7/8, rollback, META writes, and the BootSlots/MetaKeys
resources the controllers publish.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from controller_helpers import run, running
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.images import ImageError, InstallerAssets, MirrorEndpoints
from ichor.machined.bootdisk import BootDisk, booted_slot
from ichor.machined.controllers.boot import BootSlotController, MetaKeyController
from ichor.machined.cosi import State, assert_no_resource, assert_resource
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import (
    BOOT_SLOTS,
    MACHINE_STATUS_ID,
    MACHINE_STATUSES,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    META_KEYS,
    SERVICES,
    MachineStage,
    MachineStatusSpec,
    MachineStatusStatus,
    MachineTypeSpec,
    ServiceSpec,
)
from ichor.machined.server._context import ETCD_SINGLE_MEMBER, MachineContext
from ichor.machined.server._etcd_upgrade import upgrade_refusal
from ichor.machined.upgrade import NodeUpgrades, StagedUpgrade, node_health
from ichor.machinery.bootloader import BootDir, Slot, Transition
from ichor.machinery.errors import KexecError, SlotError
from ichor.machinery.meta import Meta, MetaKey

CMDLINE = "talos.platform=metal console=ttyS0"


class RecordingBus(EventBus):
    def sequences(self) -> list[tuple[str, str]]:
        return [(e.payload.sequence, e.payload.error.message) for e in self.history()
                if isinstance(e.payload, machine_pb2.SequenceEvent)]  # fmt: skip


def _files(tmp: Path, name: str) -> tuple[Path, Path]:
    kernel, initramfs = tmp / f"{name}.vmlinuz", tmp / f"{name}.initramfs"
    kernel.write_bytes(b"kernel " + name.encode())
    initramfs.write_bytes(b"initramfs " + name.encode())
    return kernel, initramfs


@dataclass
class Machine:
    """An installed disk as directories: BOOT, META, and the installer's upgrade mode over them."""

    root: Path
    booted: Slot = Slot.A

    def __post_init__(self) -> None:
        self.boot = self.root / "boot"
        self.boot.mkdir()
        kernel, initramfs = _files(self.root, "v1")
        BootDir(self.boot).install_first("v1", kernel, initramfs, CMDLINE)
        self.meta = self.root / "meta.img"
        with self.meta.open("wb") as f:
            f.truncate(1 << 20)

    @contextlib.contextmanager
    def mount(self) -> Iterator[Path]:
        yield self.boot

    def upgrade_disk(self, disk: Path, *, version: str, kernel: Path, initramfs: Path, cmdline: str,
                     force: bool, printf: Callable[[str], None]) -> Transition:  # fmt: skip
        boot = BootDir(self.boot)
        transition = boot.upgrade(version, kernel, initramfs, {s: cmdline for s in Slot}, force=force)
        meta = Meta.open(self.meta, printer=printf)
        meta.set(MetaKey.Upgrade, transition.state.good.value)
        meta.flush()
        return transition

    def disk(self) -> BootDisk:
        return BootDisk("/dev/vda", booted=self.booted, boot=self.mount, meta_path=self.meta,
                        upgrade_disk=self.upgrade_disk)  # fmt: skip

    def meta_keys(self) -> dict[int, bytes]:
        return Meta.open(self.meta, printer=lambda _: None).items()


@dataclass
class Clock:
    now: float = 0.0
    slept: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _upgrades(machine: Machine, events: EventBus | None = None, **kwargs: Any) -> NodeUpgrades:
    lines: list[str] = []
    up = NodeUpgrades(machine.disk(), work_dir=machine.root / "work", say=lines.append,
                      events=events or RecordingBus(), **kwargs)  # fmt: skip
    up.lines = lines  # type: ignore[attr-defined]
    return up


def test_the_booted_slot_is_read_from_the_kernel_command_line() -> None:
    assert booted_slot("console=ttyS0 ichor.slot=B panic=10") is Slot.B
    assert booted_slot("console=ttyS0 ichor.slot=C") is None
    assert booted_slot("console=ttyS0") is None


def test_upgrade_bless_and_rollback_move_the_good_slot_and_meta_follows(tmp_path: Path) -> None:
    async def go() -> None:
        machine = Machine(tmp_path)
        up = _upgrades(machine)
        await up.start()
        kernel, initramfs = _files(tmp_path, "v2")
        assets = InstallerAssets("ghcr.io/siderolabs/installer:v2", "v2", "sha256:x", "http://r/v2", tmp_path)
        (tmp_path / "vmlinuz").write_bytes(kernel.read_bytes())
        (tmp_path / "initramfs.xz").write_bytes(initramfs.read_bytes())
        await up.install(assets, cmdline=CMDLINE, force=False, printf=lambda _: None)
        state = up.disk.slots.value
        assert (
            state is not None
            and state.trial is Slot.B
            and state.version(Slot.B) == "v2"
            and state.good is Slot.A
        )
        assert (machine.boot / "B" / "vmlinuz").read_bytes() == b"kernel v2"
        assert machine.meta_keys()[MetaKey.Upgrade] == b"A"  # Talos's previous-label tag
        with pytest.raises(SlotError) as refused:
            up.check_trial(force=False)
        assert str(refused.value) == (
            "upgrade refused: slot B (v2) is still on trial; wait for it to be marked good or run talosctl rollback"
        )
        up.check_trial(force=True)

        # The node reboots into B (GRUB's counting used a try) and B becomes good once healthy.
        machine.booted = Slot.B
        bus = RecordingBus()
        up = _upgrades(machine, bus)
        await up.start()
        assert bus.sequences() == [("trial", "")]
        assert "boot: slot B (v2) on trial, 3 tries left; last good v1 (slot A)" in up.lines  # type: ignore[attr-defined]
        await up.bless_when_healthy(lambda: None, reboot=lambda _: pytest.fail("no reboot"))
        assert BootDir(machine.boot).state().good is Slot.B
        assert MetaKey.Upgrade not in machine.meta_keys()  # DropUpgradeFallback
        assert bus.sequences() == [("trial", ""), ("bless", "")]

        await up.rollback("actor-1")
        state = BootDir(machine.boot).state()
        assert state.good is Slot.A and state.trial is None
        assert up.lines[-1] == "rolling back from v2 (slot B) to v1 (slot A)"  # type: ignore[attr-defined]

    run(go)


def test_rollback_to_an_empty_slot_is_talos_s_error(tmp_path: Path) -> None:
    async def go() -> None:
        up = _upgrades(Machine(tmp_path))
        await up.start()
        with pytest.raises(SlotError) as err:
            await up.rollback("a")
        assert str(err.value) == 'cannot rollback to "", label does not exist'

    run(go)


def test_a_trial_boot_is_blessed_only_once_healthy_and_rebooted_past_its_deadline(tmp_path: Path) -> None:
    async def go() -> None:
        machine = Machine(tmp_path)
        kernel, initramfs = _files(tmp_path, "v2")
        machine.upgrade_disk(Path("/dev/vda"), version="v2", kernel=kernel, initramfs=initramfs, cmdline=CMDLINE,
                             force=False, printf=lambda _: None)  # fmt: skip
        machine.booted = Slot.B
        clock, bus = Clock(), RecordingBus()
        up = _upgrades(machine, bus, monotonic=clock.monotonic, sleep=clock.sleep)
        await up.start()
        answers = iter(["etcd is not healthy", "etcd is not healthy", None])
        await up.bless_when_healthy(lambda: next(answers), reboot=lambda _: pytest.fail("no reboot"))
        assert clock.slept == [2.0, 2.0]
        # what the bless waits for is said once per change, with since when
        assert [line for line in up.lines if "waits" in line] == [  # type: ignore[attr-defined]
            "bless: slot B waits: etcd is not healthy (0 s into the trial)"
        ]
        assert BootDir(machine.boot).state().good is Slot.B
        assert ("bless", "") in bus.sequences()

        # Another upgrade, whose slot never becomes healthy: no bless, a reboot at the deadline.
        kernel3, initramfs3 = _files(tmp_path, "v3")
        machine.upgrade_disk(Path("/dev/vda"), version="v3", kernel=kernel3, initramfs=initramfs3, cmdline=CMDLINE,
                             force=False, printf=lambda _: None)  # fmt: skip
        machine.booted = Slot.A
        clock, bus = Clock(), RecordingBus()
        up = _upgrades(machine, bus, monotonic=clock.monotonic, sleep=clock.sleep)
        await up.start()
        reboots: list[str] = []
        await up.bless_when_healthy(lambda: "service apid is not healthy", reboot=reboots.append, deadline=60)
        assert (
            len(reboots) == 1
            and "did not become healthy within 60 s (service apid is not healthy)" in reboots[0]
        )
        state = BootDir(machine.boot).state()
        assert state.good is Slot.B and state.trial is Slot.A  # GRUB decides at the next boot
        assert bus.sequences()[-1][0] == "bless" and "did not become healthy" in bus.sequences()[-1][1]

    run(go)


def test_a_boot_after_a_failed_trial_says_so_and_sends_a_fallback_event(tmp_path: Path) -> None:
    async def go() -> None:
        machine = Machine(tmp_path)
        kernel, initramfs = _files(tmp_path, "v2")
        machine.upgrade_disk(Path("/dev/vda"), version="v2", kernel=kernel, initramfs=initramfs, cmdline=CMDLINE,
                             force=False, printf=lambda _: None)  # fmt: skip
        boot = BootDir(machine.boot)
        for _ in range(4):  # GRUB's counting: three tries on B, then back to A
            boot.boot()
        bus = RecordingBus()
        up = _upgrades(machine, bus)
        await up.start()
        assert (
            "fallback",
            "upgrade to v2 (slot B) failed: no healthy boot in its tries; booted the last good slot A",
        ) in bus.sequences()

    run(go)


def test_stage_records_the_upgrade_in_meta_and_the_next_boot_performs_it_once(tmp_path: Path) -> None:
    async def go() -> None:
        machine = Machine(tmp_path)
        fetched: list[tuple[str, dict[str, MirrorEndpoints]]] = []
        kernel, initramfs = _files(tmp_path, "v2")

        def fetch(image: str, mirrors: dict[str, MirrorEndpoints], work: Path, say: Any) -> InstallerAssets:
            fetched.append((image, mirrors))
            work.mkdir(parents=True, exist_ok=True)
            (work / "vmlinuz").write_bytes(kernel.read_bytes())
            (work / "initramfs.xz").write_bytes(initramfs.read_bytes())
            return InstallerAssets(image, "v2", "sha256:x", "http://r/v2", work)

        up = _upgrades(machine, fetch=fetch)
        await up.start()
        await up.stage(StagedUpgrade("ghcr.io/siderolabs/installer:v2", preserve=True, force=False))
        keys = machine.meta_keys()
        assert keys[MetaKey.StagedUpgradeImageRef] == b"ghcr.io/siderolabs/installer:v2"
        assert b'"Force": false' in keys[MetaKey.StagedUpgradeInstallOptions]
        mirrors = {"ghcr.io": MirrorEndpoints(("http://10.5.0.1:5000",))}
        assert await up.run_staged(mirrors, CMDLINE, lambda _: None)
        assert fetched == [("ghcr.io/siderolabs/installer:v2", mirrors)]
        assert BootDir(machine.boot).state().trial is Slot.B
        assert MetaKey.StagedUpgradeImageRef not in machine.meta_keys()
        assert not await up.run_staged(mirrors, CMDLINE, lambda _: None)  # done once only

    run(go)


def test_meta_write_and_delete_reach_the_partition_and_the_metakeys_resources(tmp_path: Path) -> None:
    async def go() -> None:
        machine = Machine(tmp_path)
        up = _upgrades(machine)
        async with running(
            MetaKeyController(up.disk.meta), BootSlotController(up.disk.slots, Slot.A)
        ) as state:
            await up.start()
            await up.meta_write(0x0C, b"hello")
            assert machine.meta_keys()[0x0C] == b"hello"
            await assert_resource(state, META_KEYS, "0x0c", lambda r: r.spec.value == "hello")
            await assert_resource(state, BOOT_SLOTS, "A",
                                  lambda r: (r.spec.version, r.spec.state, r.spec.booted) == ("v1", "good", True))  # fmt: skip
            await assert_resource(state, BOOT_SLOTS, "B", lambda r: r.spec.state == "empty")
            assert await up.meta_delete(0x0C)
            assert not await up.meta_delete(0x0C)
            await assert_no_resource(state, META_KEYS, "0x0c")

    run(go)


def _health_state(*, stage: MachineStage = MachineStage.RUNNING, etcd: bool | None = True) -> State:
    state = State()
    state.create(
        MACHINE_STATUSES.new(MACHINE_STATUS_ID, MachineStatusSpec(stage, MachineStatusStatus(ready=True)))
    )
    state.create(SERVICES.new("machined", ServiceSpec(running=True, healthy=True)))
    state.create(SERVICES.new("apid", ServiceSpec(running=True, healthy=True)))
    state.create(MACHINE_TYPES.new(MACHINE_TYPE_ID, MachineTypeSpec.CONTROLPLANE))
    if etcd is not None:
        state.create(SERVICES.new("etcd", ServiceSpec(running=True, healthy=etcd)))
    return state


def test_node_health_needs_running_ready_services_and_a_healthy_etcd_on_a_control_plane() -> None:
    assert node_health(_health_state()) is None
    assert node_health(_health_state(etcd=False)) == "etcd is not healthy"
    assert node_health(_health_state(etcd=None)) == "etcd is not healthy"
    assert (
        node_health(_health_state(stage=MachineStage.BOOTING)) == "machine is booting, not running and ready"
    )


# --- the API side: MachineContext ------------------------------------------------------------------


@dataclass
class Lifecycle:
    reboots: list[str] = field(default_factory=list)
    upgrades: list[tuple[str, Any]] = field(default_factory=list)

    def request_reboot(self, actor_id: str, mode: int = 0) -> None:
        self.reboots.append(actor_id)

    def request_upgrade(self, actor_id: str, work: Any, mode: int = 0, *, preserve: bool = True) -> None:
        self.upgrades.append((actor_id, work))

    def request_staged_upgrade(self, actor_id: str, mode: int = 0, *, preserve: bool = True) -> None:
        self.reboots.append(actor_id)


@dataclass
class Etcd:
    names: list[str]

    async def members(self, query_local: bool) -> list[Any]:
        return [type("M", (), {"id": n, "name": name})() for n, name in enumerate(self.names)]

    async def validate_for_upgrade(self, *, preserve: bool) -> None:
        members = await self.members(query_local=False)
        problem = await upgrade_refusal(members, preserve=preserve, probe=lambda _: asyncio.sleep(0))
        if problem is not None:
            raise GRPCError(Status.UNKNOWN, f"error validating etcd for upgrade: {problem}")


@dataclass
class Store:
    active: Any


def _context(
    tmp_path: Path, machine: Machine, up: NodeUpgrades, etcd_names: list[str]
) -> tuple[MachineContext, Lifecycle]:
    from ichor.machined.configstore import LoadedConfig
    from ichor.machinery.config import load_config

    loaded = LoadedConfig(
        load_config(
            "version: v1alpha1\nmachine:\n  type: controlplane\n  install:\n    disk: /dev/vda\n"
            "    extraKernelArgs: [ip=10.5.0.2::10.5.0.1:255.255.255.0::eth0:off]\n"
            "  registries:\n    mirrors:\n      ghcr.io:\n        endpoints: [http://10.5.0.1:5000]\n"
        ),
        "",
    )
    state = State()
    state.create(MACHINE_TYPES.new(MACHINE_TYPE_ID, MachineTypeSpec.CONTROLPLANE))
    lifecycle = Lifecycle()
    context = MachineContext(
        layout=Layout(tmp_path, "127.0.0.1", Platform.METAL), state=state, supervisor=None,  # type: ignore[arg-type]
        events=EventBus(), store=Store(loaded),  # type: ignore[arg-type]
        lifecycle=lifecycle, etcd=Etcd(etcd_names), clock=None, upgrades=up,  # type: ignore[arg-type]
    )  # fmt: skip
    return context, lifecycle


def test_upgrade_rpc_refusals_and_acceptance_as_talos_words_them(tmp_path: Path) -> None:
    async def go() -> None:
        machine = Machine(tmp_path)
        kernel, initramfs = _files(tmp_path, "v2")
        asked: list[tuple[str, dict[str, MirrorEndpoints]]] = []

        def fetch(image: str, mirrors: dict[str, MirrorEndpoints], work: Path, say: Any) -> InstallerAssets:
            asked.append((image, mirrors))
            if image.endswith(":missing"):
                raise ImageError("failed to pull ghcr.io/siderolabs/installer:missing: HTTP 404")
            work.mkdir(parents=True, exist_ok=True)
            (work / "vmlinuz").write_bytes(kernel.read_bytes())
            (work / "initramfs.xz").write_bytes(initramfs.read_bytes())
            return InstallerAssets(image, "v2", "sha256:x", "http://r/v2", work)

        up = _upgrades(machine, fetch=fetch)
        await up.start()
        context, lifecycle = _context(tmp_path, machine, up, ["cp-1"])
        request = machine_pb2.UpgradeRequest(image="ghcr.io/siderolabs/installer:missing", preserve=True)
        with pytest.raises(GRPCError) as err:
            await context.upgrade(request, "a0")
        assert err.value.status is Status.UNKNOWN
        assert err.value.message == ('error validating installer image "ghcr.io/siderolabs/installer:missing": '
                                     "failed to pull ghcr.io/siderolabs/installer:missing: HTTP 404")  # fmt: skip
        assert asked[0][1] == {"ghcr.io": MirrorEndpoints(("http://10.5.0.1:5000",))}

        request = machine_pb2.UpgradeRequest(image="ghcr.io/siderolabs/installer:v2")
        with pytest.raises(GRPCError) as err:
            await context.upgrade(request, "a1")
        assert err.value.message == f"error validating etcd for upgrade: {ETCD_SINGLE_MEMBER}"
        assert not lifecycle.upgrades

        request = machine_pb2.UpgradeRequest(image="ghcr.io/siderolabs/installer:v2", preserve=True)
        assert await context.upgrade(request, "a2") == "Upgrade request received"
        ((actor, work),) = lifecycle.upgrades
        assert actor == "a2"
        await work(lambda _: None)  # what the sequencer runs before it reboots
        state = BootDir(machine.boot).state()
        assert state.trial is Slot.B and state.version(Slot.B) == "v2"
        cfg = (machine.boot / "grub" / "grub.cfg").read_text()
        assert "linux /B/vmlinuz talos.platform=metal" in cfg and "ip=10.5.0.2::10.5.0.1" in cfg

        with pytest.raises(GRPCError) as err:  # a trial is pending
            await context.upgrade(request, "a3")
        assert err.value.status is Status.FAILED_PRECONDITION
        assert err.value.message.startswith("upgrade refused: slot B (v2) is still on trial")

        staged = machine_pb2.UpgradeRequest(image="ghcr.io/siderolabs/installer:v2", preserve=True, stage=True,
                                            force=True)  # fmt: skip
        assert await context.upgrade(staged, "a4") == "Upgrade request received"
        assert lifecycle.reboots == ["a4"] and len(lifecycle.upgrades) == 1
        assert machine.meta_keys()[MetaKey.StagedUpgradeImageRef] == b"ghcr.io/siderolabs/installer:v2"

    run(go)


def test_meta_rpcs_answer_with_talos_s_codes(tmp_path: Path) -> None:
    async def go() -> None:
        machine = Machine(tmp_path)
        up = _upgrades(machine)
        await up.start()
        context, lifecycle = _context(tmp_path, machine, up, ["cp-1", "cp-2"])
        with pytest.raises(GRPCError) as err:
            await context.meta_write(256, b"x")
        assert (err.value.status, err.value.message) == (Status.INVALID_ARGUMENT, "key must be a uint8")
        with pytest.raises(GRPCError) as err:
            await context.meta_write(0x0D, b"x" * (300 * 1024))
        assert (err.value.status, err.value.message) == (Status.RESOURCE_EXHAUSTED, "meta write failed")
        with pytest.raises(GRPCError) as err:
            await context.meta_delete(0x0D)
        assert (err.value.status, err.value.message) == (Status.NOT_FOUND, "meta key not found")
        with pytest.raises(GRPCError) as err:
            await context.rollback("r1")
        assert err.value.message == 'cannot rollback to "", label does not exist' and not lifecycle.reboots

    run(go)


def test_upgrade_work_runs_in_a_thread_and_the_loop_stays_free(tmp_path: Path) -> None:
    async def go() -> None:
        machine = Machine(tmp_path)
        up = _upgrades(machine)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(tick())
        await up.start()
        await up.meta_write(0x0E, b"v")
        task.cancel()
        assert ticks > 0

    run(go)


def test_loading_the_next_boot_for_kexec_counts_a_trial_try_only_once_loaded(tmp_path: Path) -> None:
    machine = Machine(tmp_path)
    disk = machine.disk()
    loaded: list[tuple[bytes, bytes, str]] = []

    def load(kernel: Path, initramfs: Path, cmdline: str) -> None:
        loaded.append((kernel.read_bytes(), initramfs.read_bytes(), cmdline))

    t = disk.load_next_boot(load)
    assert loaded == [(b"kernel v1", b"initramfs v1", f"{CMDLINE} ichor.slot=A")]
    assert t.message == "boot: slot A (v1), good"
    kernel, initramfs = _files(tmp_path, "v2")
    disk.upgrade(version="v2", kernel=kernel, initramfs=initramfs, cmdline=CMDLINE, force=False,
                 printf=lambda _: None)  # fmt: skip

    def refuse(kernel: Path, initramfs: Path, cmdline: str) -> None:
        raise KexecError("kexec_file_load: Operation not permitted")

    with pytest.raises(KexecError):
        disk.load_next_boot(refuse)
    assert disk.state().trial == Slot.B and disk.state().tries == 3  # not counted: GRUB will count
    t = disk.load_next_boot(load)
    assert loaded[-1] == (b"kernel v2", b"initramfs v2", f"{CMDLINE} ichor.slot=B")
    assert t.message == "boot: slot B (v2) on trial, 2 tries left"
    assert disk.state().tries == 2 and disk.slots.value is None  # read back; published on the loop
