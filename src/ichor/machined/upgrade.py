"""Upgrade, rollback, META and boot blessing on a node that boots from its own disk (a :class:`BootDisk`).

:class:`NodeUpgrades` is the node's side of ``talosctl upgrade``/``rollback``/``meta`` and of the
boot-time trial (os-design §4.4), on the event loop, with the blocking disk work in threads:

* **upgrade**: refused while a slot is on trial unless ``force``; the installer image fetched
  through the node's registry mirrors with ``machine.registries.config``'s credentials and TLS
  settings, as Talos (:func:`ichor.images.fetch_installer`: the image is checked
  to be an Ichor installer and its boot files' digests); then, as the sequencer's ``upgrade``
  sequence, the installer's upgrade mode writes the slot that is not good and puts it on trial for
  :data:`~ichor.machinery.bootloader.DEFAULT_TRIES` boots; then the node reboots;
* **stage** (``--stage``): META ``StagedUpgradeImageRef`` (7) and ``StagedUpgradeInstallOptions``
  (8, JSON) as Talos writes them; the next boot performs the upgrade before the services start
  (:meth:`NodeUpgrades.run_staged`) and reboots into the trial slot;
* **bless**: on a boot of the slot on trial, :meth:`NodeUpgrades.bless_when_healthy` waits until
  :func:`node_health` finds the machine running and ready, machined and apid up and, on a control
  plane, etcd healthy; then the slot becomes the last good one. Past the deadline it reboots and
  leaves the choice to GRUB's counting: the trial slot while tries remain, else the last good slot;
* **rollback**, **META** writes and deletes.

Every transition is a console line and an event (``SequenceEvent`` ``upgrade``, ``trial`` (a boot
of the slot on trial), ``bless``, ``rollback``, ``fallback``: Ichor's names, Talos has no events
for these). Nothing here asks which
platform the node runs on: a node without a boot disk has no :class:`NodeUpgrades` at all.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.images import InstallerAssets, MirrorEndpoints, Registries, fetch_installer
from ichor.machined.bootdisk import BootDisk
from ichor.machined.cosi import State
from ichor.machined.events import EventBus
from ichor.machined.resources import (
    MACHINE_STATUS_ID,
    MACHINE_STATUSES,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    SERVICES,
    MachineStage,
)
from ichor.machinery.bootloader import BootState, Transition
from ichor.machinery.config import Config
from ichor.machinery.errors import SlotError
from ichor.machinery.meta import MetaKey

__all__ = ["BLESS_DEADLINE", "NodeUpgrades", "StagedUpgrade", "node_health", "upgrade_inputs"]

BLESS_DEADLINE = 15 * 60.0
"""Seconds a trial boot has to become healthy before the node reboots (GRUB's counting decides)."""
HEALTH_INTERVAL = 2.0

Fetch = Callable[..., InstallerAssets]


def node_health(state: State) -> str | None:
    """Why the node is not healthy enough to bless its slot, None when it is."""
    status = state.spec_of(MACHINE_STATUSES, MACHINE_STATUS_ID)
    if status is None or status.stage is not MachineStage.RUNNING or not status.status.ready:
        return f"machine is {status.stage if status is not None else 'starting'}, not running and ready"
    for service, need_healthy in (("machined", False), ("apid", True)):
        spec = state.spec_of(SERVICES, service)
        if spec is None or not spec.running or (need_healthy and not spec.healthy):
            return f"service {service} is not {'healthy' if need_healthy else 'running'}"
    machine_type = state.spec_of(MACHINE_TYPES, MACHINE_TYPE_ID)
    if machine_type is not None and machine_type.is_control_plane:
        etcd = state.spec_of(SERVICES, "etcd")
        if etcd is None or not etcd.running or not etcd.healthy:
            return "etcd is not healthy"
    return None


def upgrade_inputs(config: Config) -> tuple[Registries, str]:
    """What an upgrade takes from the machine config: the registry mirrors with
    ``machine.registries.config`` (credentials and TLS per endpoint host) and the new slot's kernel
    command line (``machine.install.extraKernelArgs`` applied to Talos's defaults, as at install).
    ``machine.install.extensions`` is refused (InstallError naming the key): nothing is pulled."""
    from ichor.images import Registries, access_from_config, mirrors_from_config
    from ichor.machinery.installdisk import refuse_install_extensions
    from ichor.machinery.kernelargs import installer_cmdline

    machine = config.machine
    registries = machine.registries if machine is not None else None
    install = machine.install if machine is not None else None
    if install is not None:
        refuse_install_extensions((e.image for e in install.extensions or []), step="upgrade")
    extra = [str(a) for a in (install.extra_kernel_args or [])] if install is not None else []
    found = Registries(
        mirrors_from_config(registries.mirrors if registries is not None else None),
        access_from_config(registries.config if registries is not None else None),
    )
    return found, str(installer_cmdline(extra_args=extra))


@dataclass(frozen=True)
class StagedUpgrade:
    """An upgrade staged with ``--stage``: META 7 (the image) and 8 (the options, JSON)."""

    image: str
    preserve: bool
    force: bool

    def options_json(self) -> str:
        # Talos 1.7's install.Options as it marshals them (Force = a re-partitioning upgrade, i.e. not
        # --preserve), plus Ichor's ReplaceTrial for `upgrade --force` over a slot on trial.
        return json.dumps({"Pull": False, "Force": not self.preserve, "Upgrade": True, "Zero": False,
                           "ReplaceTrial": self.force})  # fmt: skip

    @classmethod
    def from_meta(cls, image: bytes, options: bytes | None) -> StagedUpgrade:
        try:
            parsed = json.loads(options) if options else {}
        except ValueError:
            parsed = {}
        parsed = parsed if isinstance(parsed, dict) else {}
        return cls(
            image.decode(errors="replace"), not parsed.get("Force", False), bool(parsed.get("ReplaceTrial"))
        )


class NodeUpgrades:
    """See the module docstring; one per node with a boot disk."""

    def __init__(
        self,
        disk: BootDisk,
        *,
        work_dir: Path,
        say: Callable[[str], None],
        events: EventBus,
        fetch: Fetch = fetch_installer,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.disk = disk
        self.work_dir = work_dir
        self.say = say
        self.events = events
        self._fetch = fetch
        self._monotonic = monotonic
        self._sleep = sleep

    async def _thread(self, work: Callable[[], Any]) -> Any:
        try:
            return await asyncio.to_thread(work)
        finally:
            self.disk.publish()

    def _event(self, sequence: str, actor_id: str = "", *, error: str | None = None) -> None:
        event = machine_pb2.SequenceEvent(sequence=sequence, action=machine_pb2.SequenceEvent.STOP)
        if error is not None:
            event.error.CopyFrom(common_pb2.Error(code=common_pb2.FATAL, message=error))
        self.events.publish(event, actor_id=actor_id)

    # --- boot --------------------------------------------------------------------------------------

    async def start(self) -> BootState:
        """Read the slots and META at boot and say which slot booted and how it stands."""
        state: BootState = await self._thread(self.disk.refresh)
        booted = self.disk.booted
        if booted is None:
            self.say(
                "boot slots: the kernel command line names no slot (ichor.slot=); upgrades cannot be blessed"
            )
        elif state.trial == booted:
            self.say(f"boot: slot {booted} ({state.version(booted)}) on trial, {state.tries} tries left; "
                     f"last good {state.version(state.good)} (slot {state.good})")  # fmt: skip
            self._event("trial")
        else:
            self.say(f"boot: slot {booted} ({state.version(booted)}), good")
        if state.failed and booted == state.good:
            slot, _, rest = state.failed.partition(":")
            version, _, reason = rest.partition(":")
            line = f"upgrade to {version} (slot {slot}) failed: {reason}; booted the last good slot {booted}"
            self.say(line)
            self._event("fallback", error=line)
        return state

    # --- upgrade -----------------------------------------------------------------------------------

    def check_trial(self, *, force: bool) -> None:
        """SlotError when a slot is on trial and ``force`` is not given."""
        state = self.disk.state()
        if state.trial is not None and not force:
            raise SlotError(
                f"upgrade refused: slot {state.trial} ({state.version(state.trial)}) is still on trial; "
                "wait for it to be marked good or run talosctl rollback",
                hint="talosctl upgrade --force replaces the slot on trial",
            )

    async def fetch(self, image: str, mirrors: Mapping[str, MirrorEndpoints]) -> InstallerAssets:
        """Fetch and check the installer image's boot files (ImageError says why not)."""
        work = self.work_dir / "installer"
        loop = asyncio.get_running_loop()

        def say(line: str) -> None:  # called from the worker thread
            loop.call_soon_threadsafe(self.say, line)

        return await asyncio.to_thread(lambda: self._fetch(image, mirrors, work, say=say))

    async def install(
        self, assets: InstallerAssets, *, cmdline: str, force: bool, printf: Callable[[str], None]
    ) -> Transition:
        """The installer's upgrade mode with ``assets`` (the new slot on trial)."""
        transition: Transition = await self._thread(lambda: self.disk.upgrade(
            version=assets.version, kernel=assets.kernel, initramfs=assets.initramfs, cmdline=cmdline,
            force=force, printf=printf,
        ))  # fmt: skip
        self.say(transition.message)
        return transition

    async def stage(self, staged: StagedUpgrade) -> None:
        await self._thread(lambda: self.disk.meta_write(MetaKey.StagedUpgradeImageRef, staged.image.encode()))
        await self._thread(
            lambda: self.disk.meta_write(MetaKey.StagedUpgradeInstallOptions, staged.options_json().encode())
        )
        self.say(f"upgrade to {staged.image} staged: it runs at the next boot")

    async def staged(self) -> StagedUpgrade | None:
        image = await self._thread(lambda: self.disk.meta_get(MetaKey.StagedUpgradeImageRef))
        if not image:
            return None
        options = await self._thread(lambda: self.disk.meta_get(MetaKey.StagedUpgradeInstallOptions))
        return StagedUpgrade.from_meta(image, options)

    def _forget_staged(self) -> None:
        for key in (MetaKey.StagedUpgradeImageRef, MetaKey.StagedUpgradeInstallOptions):
            self.disk.meta_delete(key)

    async def run_staged(
        self,
        mirrors: Mapping[str, MirrorEndpoints],
        cmdline: str,
        printf: Callable[[str], None],
        *,
        refused: str | None = None,
    ) -> StagedUpgrade | None:
        """Perform an upgrade staged in META (then forget it); the upgrade when the slot was written
        (without ``preserve`` the caller wipes EPHEMERAL before the reboot), else None.
        ``refused``: why the config forbids it now (it fails with that reason, and is forgotten)."""
        staged = await self.staged()
        if staged is None:
            return None
        # Forget it first: a staged upgrade that fails must not be retried at every boot.
        await self._thread(self._forget_staged)
        self.say(f"performing the staged upgrade to {staged.image}")
        try:
            if refused is not None:
                raise SlotError(refused)
            assets = await self.fetch(staged.image, mirrors)
            await self.install(assets, cmdline=cmdline, force=staged.force, printf=printf)
        except Exception as err:
            line = f"staged upgrade to {staged.image} failed: {err}; booting the installed system"
            self.say(line)
            self._event("upgrade", error=line)
            return None
        return staged

    # --- bless, rollback ---------------------------------------------------------------------------

    async def bless_when_healthy(
        self,
        health: Callable[[], str | None],
        reboot: Callable[[str], None],
        *,
        deadline: float = BLESS_DEADLINE,
    ) -> None:
        """On a trial boot: bless the slot once ``health()`` says None, or reboot after ``deadline``."""
        if not self.disk.on_trial():
            return
        booted = self.disk.booted
        started = self._monotonic()
        reason = health()
        said: str | None = None
        while reason is not None:
            if reason != said:  # every change of what the bless waits for, with since when
                self.say(
                    f"bless: slot {booted} waits: {reason} ({self._monotonic() - started:.0f} s into the trial)"
                )
                said = reason
            if self._monotonic() - started > deadline:
                line = (f"slot {booted} did not become healthy within {deadline:.0f} s ({reason}); rebooting: "
                        "GRUB boots it again while it has tries left, else the last good slot")  # fmt: skip
                self.say(line)
                self._event("bless", error=line)
                reboot(line)
                return
            await self._sleep(HEALTH_INTERVAL)
            reason = health()
        transition: Transition = await self._thread(self.disk.bless)
        self.say(f"{transition.message} after {self._monotonic() - started:.0f} s of health checks")
        self._event("bless")

    async def rollback(self, actor_id: str) -> Transition:
        """``talosctl rollback`` (SlotError with Talos's text when the other slot is empty)."""
        transition: Transition = await self._thread(self.disk.rollback)
        self.say(transition.message)
        self._event("rollback", actor_id)
        return transition

    async def meta_write(self, key: int, value: bytes) -> None:
        await self._thread(lambda: self.disk.meta_write(key, value))

    async def meta_delete(self, key: int) -> bool:
        return bool(await self._thread(lambda: self.disk.meta_delete(key)))
