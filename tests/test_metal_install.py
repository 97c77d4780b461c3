"""Installing to disk as machined drives it on metal, without a VM: the plan and its errors (as
``apply-config --insecure`` replies them), ``--dry-run``'s plan, the sequencer's install step
(success reboots, failure stays in maintenance mode saying why), the disk the node boots from,
the installed initramfs rebuilt from what stage 1 keeps, and the whole install on a loop device
(root): Talos's partitions, BOOT's slot A with the running image's kernel and initramfs, the
config on a freshly formatted STATE."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from disk_helpers import GIB, loop_device, need, sparse
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.imager._cpio import write_newc
from ichor.imager._initramfs import GRUB_IMAGES, InitramfsFiles, entries, kept_files
from ichor.imager._stage1 import KEEP
from ichor.machined.configstore import ConfigStore, LoadedConfig
from ichor.machined.configstore import load as load_config
from ichor.machined.cosi import WAIT_STATUSES, Source, State
from ichor.machined.events import EventBus
from ichor.machined.installation import DiskInstallation, system_disk_of
from ichor.machined.platform import EXIT_REBOOT, Layout, Platform
from ichor.machined.resources import MachineStage
from ichor.machined.sequencer import NodeParts, Sequencer
from ichor.machined.server._files import mounts
from ichor.machinery import proc
from ichor.machinery.blockdev import (
    Disk,
    Label,
    partition_path,
    plan,
    read_disk_table,
    talos_layout,
    write_disk_table,
)
from ichor.machinery.errors import InstallError
from ichor.machinery.generate import GenOptions, OutputType, generate
from ichor.machinery.meta import Meta, MetaValue, encode_values
from ichor.machinery.secrets import SecretsBundle


@pytest.fixture(scope="module")
def bundle() -> SecretsBundle:
    return SecretsBundle.generate()


def _config(bundle: SecretsBundle, install: str) -> LoadedConfig:
    opts = GenOptions(cluster_name="c", endpoint="https://127.0.0.1:6443", install_disk="/dev/sda")
    text = generate(bundle, opts, output_types=[OutputType.CONTROLPLANE], with_docs=False).outputs[
        OutputType.CONTROLPLANE
    ]
    start = text.index("    install:\n")
    end = text.index("\n    ", text.index("wipe:", start))
    return load_config(text[:start] + install.rstrip("\n") + text[end:], "test")


def _disk(path: Path, size: int = 2 * GIB, **facts: Any) -> Disk:
    return Disk(device_name=str(path), size=size, **facts)


def _installation(
    tmp_path: Path, disks: list[Disk], *, cmdline: str = "talos.platform=metal", **kw: Any
) -> DiskInstallation:
    mounts = tmp_path / "mounts"
    mounts.write_text("tmpfs /system/state tmpfs rw 0 0\n")
    (tmp_path / "cmdline").write_text(cmdline + "\n")
    return DiskInstallation(
        sys_block=tmp_path / "sys-block", state_dir=Path("/system/state"), disks=lambda: disks,
        mounts=mounts, cmdline=tmp_path / "cmdline", **kw,
    )  # fmt: skip


# --- the plan and its refusals ---------------------------------------------------------------------


def test_a_missing_install_disk_is_refused_as_talos_does_listing_the_disks(
    bundle: SecretsBundle, tmp_path: Path
) -> None:
    vda = sparse(tmp_path / "vda", 2 * GIB)
    disks = _installation(tmp_path, [_disk(vda, model="QEMU", serial="ichor-disk0")])
    config = _config(bundle, "    install:\n        disk: /dev/sda\n")
    with pytest.raises(InstallError) as caught:
        disks.plan(config.config)
    assert str(caught.value) == 'specified install disk does not exist: "/dev/sda"'
    assert f"{vda} (2147483648 bytes, model QEMU, serial ichor-disk0" in str(caught.value.hint)


def test_a_selector_matching_nothing_or_several_names_what_it_saw(
    bundle: SecretsBundle, tmp_path: Path
) -> None:
    a, b = sparse(tmp_path / "a", 2 * GIB), sparse(tmp_path / "b", 3 * GIB)
    disks = _installation(tmp_path, [_disk(a, model="QEMU"), _disk(b, 3 * GIB, model="QEMU")])
    with pytest.raises(InstallError, match="no disk found matching provided parameters") as none:
        disks.plan(
            _config(bundle, "    install:\n        diskSelector:\n            model: Samsung*\n").config
        )
    assert "model: 'Samsung*'" in str(none.value.hint) and str(a) in str(none.value.hint)
    with pytest.raises(InstallError, match=f"diskSelector matches 2 disks: {a}, {b}"):
        disks.plan(_config(bundle, "    install:\n        diskSelector:\n            model: QEMU\n").config)
    chosen = disks.plan(
        _config(bundle, "    install:\n        diskSelector:\n            size: '>= 3GB'\n").config
    )
    assert chosen.device == str(b) and "matches only" in chosen.target.reason


def test_a_disk_holding_partitions_is_wiped_only_when_asked_or_booted_from(
    bundle: SecretsBundle, tmp_path: Path
) -> None:
    vda = sparse(tmp_path / "vda", 2 * GIB)
    write_disk_table(vda, plan(2 * GIB, talos_layout()))
    disks = _installation(tmp_path, [_disk(vda)])
    with pytest.raises(
        InstallError, match=f"refusing to install to {vda}: it holds partitions EFI, BIOS"
    ) as no:
        disks.plan(_config(bundle, f"    install:\n        disk: {vda}\n        wipe: false\n").config)
    assert "machine.install.wipe: true" in str(no.value.hint)
    wiped = disks.plan(_config(bundle, f"    install:\n        disk: {vda}\n        wipe: true\n").config)
    assert (
        "it holds partitions EFI, BIOS, BOOT, META, STATE, EPHEMERAL: erased (machine.install.wipe is true)"
        in (wiped.summary())
    )
    booted = _installation(tmp_path, [_disk(vda)])
    booted.booted_from = lambda: str(vda)  # type: ignore[method-assign]
    own = booted.plan(_config(bundle, f"    install:\n        disk: {vda}\n        wipe: false\n").config)
    assert "erased (it is the disk this node boots from)" in own.summary()


def test_the_plan_carries_talos_kernel_args_with_extra_ones(bundle: SecretsBundle, tmp_path: Path) -> None:
    vda = sparse(tmp_path / "vda", 2 * GIB)
    config = _config(
        bundle,
        f"    install:\n        disk: {vda}\n        legacyBIOSSupport: true\n"
        "        extraKernelArgs: [-console=tty0, ip=10.5.0.2::10.5.0.1:255.255.255.0::eth0:off]\n",
    )
    planned = _installation(tmp_path, [_disk(vda)]).plan(config.config)
    assert planned.cmdline.startswith("talos.platform=metal console=ttyS0 init_on_alloc=1")
    assert planned.cmdline.endswith("ima_hash=sha512 ip=10.5.0.2::10.5.0.1:255.255.255.0::eth0:off")
    assert planned.legacy_bios and "legacy BIOS support: yes" in planned.summary()


def test_meta_values_from_the_environment_go_into_the_plan_machine_env_winning(
    bundle: SecretsBundle, tmp_path: Path
) -> None:
    """An ISO built with ``--meta`` carries ``talos.environment=INSTALLER_META_BASE64=...``; Talos hands
    that environment (and ``machine.env``, which wins) to its installer, which writes META."""
    vda = sparse(tmp_path / "vda", 2 * GIB)
    from_iso = encode_values([MetaValue.parse("0xa=net: {}"), MetaValue.parse("12=x")])
    config = _config(bundle, f"    install:\n        disk: {vda}\n")
    planned = _installation(
        tmp_path,
        [_disk(vda)],
        cmdline=f"talos.platform=metal talos.environment=INSTALLER_META_BASE64={from_iso}",
    ).plan(config.config)
    assert planned.meta == ((0x0A, b"net: {}"), (0x0C, b"x"))
    assert "META values: 0xa (7 bytes), 0xc (1 bytes)" in planned.summary()

    assert config.config.machine is not None
    env = {"INSTALLER_META_BASE64": encode_values([MetaValue.parse("0xa=other")])}
    with_env = config.config.model_copy(
        update={"machine": config.config.machine.model_copy(update={"env": env})}
    )
    again = _installation(
        tmp_path, [_disk(vda)], cmdline=f"talos.environment=INSTALLER_META_BASE64={from_iso}"
    )
    assert again.plan(with_env).meta == ((0x0A, b"other"),)

    broken = _installation(tmp_path, [_disk(vda)], cmdline="talos.environment=INSTALLER_META_BASE64=@@@")
    with pytest.raises(InstallError, match="INSTALLER_META_BASE64 in the node's environment") as err:
        broken.plan(config.config)
    assert err.value.hint is not None and "talos.environment" in err.value.hint
    assert _installation(tmp_path, [_disk(vda)]).plan(config.config).meta == ()


def test_maintenance_apply_replies_the_install_errors_and_dry_run_prints_the_plan(
    bundle: SecretsBundle, tmp_path: Path
) -> None:
    vda = sparse(tmp_path / "vda", 2 * GIB)
    disks = _installation(tmp_path, [_disk(vda)])
    layout = Layout(root=tmp_path / "node", address="127.5.0.3", platform=Platform.METAL)
    layout.ensure()

    async def go() -> None:
        store = ConfigStore(
            layout, State(), EventBus(), say=lambda _: None, clock=lambda: datetime.now(UTC),
            install_check=lambda loaded: disks.plan(loaded.config).summary(),
        )  # fmt: skip
        applied = store.await_maintenance_config()
        wrong = _config(bundle, "    install:\n        disk: /dev/sda\n")
        with pytest.raises(GRPCError) as caught:
            await store.apply(machine_pb2.ApplyConfigurationRequest(data=wrong.text.encode()))
        assert caught.value.status == Status.INVALID_ARGUMENT
        assert str(caught.value.message).startswith(
            'configuration validation failed: 1 error occurred:\n\t* specified install disk does not exist: "/dev/sda"'
        )
        assert f"disks on this node: {vda}" in str(caught.value.message)
        assert not applied.done()
        good = _config(bundle, f"    install:\n        disk: {vda}\n")
        dry = await store.apply(machine_pb2.ApplyConfigurationRequest(data=good.text.encode(), dry_run=True))
        assert f"install disk: {vda} (2.1 GB" in dry.mode_details
        assert f"why: machine.install.disk is {vda}" in dry.mode_details
        assert not applied.done() and not layout.config_file.exists()
        await store.apply(machine_pb2.ApplyConfigurationRequest(data=good.text.encode()))
        assert applied.done()

    asyncio.run(go())


# --- the sequencer's install step ------------------------------------------------------------------


class _Store:
    def __init__(self, source: LoadedConfig | None = None) -> None:
        self.request_reboot: Any = None
        self.activated: list[LoadedConfig] = []
        self.source = source

    async def acquire(self) -> LoadedConfig | None:
        return self.source

    def activate(self, loaded: LoadedConfig) -> None:
        self.activated.append(loaded)


def _sequencer(
    tmp_path: Path, configs: list[LoadedConfig], install: Any
) -> tuple[Sequencer, NodeParts, list[str], EventBus]:
    layout = Layout(tmp_path / "root", "127.0.0.1")
    layout.ensure()
    said: list[str] = []
    events = _Events()
    served: list[str] = []

    async def maintenance() -> LoadedConfig:
        served.append("maintenance")
        return configs.pop(0)

    parts = NodeParts(
        layout=layout, state=State(), events=events, store=_Store(), supervisor=None,  # type: ignore[arg-type]
        stage=Source("stage", MachineStage.BOOTING), say=said.append, clock=lambda: datetime.now(UTC),
        services=lambda loaded: [], maintenance=maintenance, leave_etcd=None, install=install,  # type: ignore[arg-type]
    )  # fmt: skip
    return Sequencer(parts), parts, said, events


class _Events(EventBus):
    def __init__(self) -> None:
        super().__init__()
        self.payloads: list[Any] = []

    def publish(self, payload: Any, *, actor_id: str = "") -> Any:
        self.payloads.append(payload)
        return super().publish(payload, actor_id=actor_id)


def _sequences(events: EventBus) -> list[tuple[str, int, str]]:
    assert isinstance(events, _Events)
    return [
        (m.sequence, m.action, m.error.message)
        for m in events.payloads
        if isinstance(m, machine_pb2.SequenceEvent)
    ]


def test_an_install_that_succeeds_reboots_into_the_installed_system(
    bundle: SecretsBundle, tmp_path: Path
) -> None:
    config = _config(bundle, "    install:\n        disk: /dev/vda\n")
    ran: list[str] = []

    def install(loaded: LoadedConfig, printf: Any) -> None:
        printf("partitioning /dev/vda: EFI, BIOS, BOOT, META, STATE, EPHEMERAL")
        ran.append(loaded.text)

    sequencer, parts, said, events = _sequencer(tmp_path, [config], install)
    assert asyncio.run(sequencer.run()) == EXIT_REBOOT
    assert ran == [config.text]
    assert "install: partitioning /dev/vda: EFI, BIOS, BOOT, META, STATE, EPHEMERAL" in said
    assert said[-1] == "installation complete: rebooting into the installed system"
    assert ("install", machine_pb2.SequenceEvent.START, "") in _sequences(events)
    assert ("install", machine_pb2.SequenceEvent.STOP, "") in _sequences(events)
    assert parts.stage.value is MachineStage.REBOOTING
    assert not parts.state.list(WAIT_STATUSES.default_namespace, WAIT_STATUSES)
    assert parts.store.activated == []  # type: ignore[attr-defined]


def test_a_config_from_talos_config_installs_without_maintenance_mode(
    bundle: SecretsBundle, tmp_path: Path
) -> None:
    config = _config(bundle, "    install:\n        disk: /dev/vda\n")
    ran: list[str] = []
    sequencer, parts, said, _ = _sequencer(tmp_path, [], lambda loaded, printf: ran.append(loaded.text))
    parts.store = _Store(source=config)  # type: ignore[assignment]
    assert asyncio.run(sequencer.run()) == EXIT_REBOOT
    assert ran == [config.text]
    assert said[-1] == "installation complete: rebooting into the installed system"


def test_a_failed_install_stays_in_maintenance_mode_saying_why(bundle: SecretsBundle, tmp_path: Path) -> None:
    config = _config(bundle, "    install:\n        disk: /dev/vda\n")
    attempts: list[int] = []

    def install(loaded: LoadedConfig, printf: Any) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise InstallError("installing to /dev/vda failed: mkfs.xfs: no space left", hint="a bigger disk")

    sequencer, parts, said, events = _sequencer(tmp_path, [config, config], install)
    seen: list[str] = []

    def watch(stage: MachineStage) -> None:
        if stage is MachineStage.MAINTENANCE:
            waits = parts.state.list(WAIT_STATUSES.default_namespace, WAIT_STATUSES)
            seen.extend(w.spec.reason for w in waits)

    with parts.stage.listen(lambda: watch(parts.stage.value)):
        assert asyncio.run(sequencer.run()) == EXIT_REBOOT
    assert len(attempts) == 2
    failure = "installing to /dev/vda failed: mkfs.xfs: no space left (a bigger disk)"
    assert f"installation failed: {failure}; staying in maintenance mode" in "\n".join(said)
    assert f"installation failed: {failure}" in seen, "the second maintenance mode did not say why"
    assert ("install", machine_pb2.SequenceEvent.STOP, failure) in _sequences(events)


# --- the disk the node boots from, and the initramfs stage 1 keeps ---------------------------------


def test_the_boot_disk_is_the_one_whose_state_is_mounted(tmp_path: Path) -> None:
    blocks = tmp_path / "sys/devices/pci0/virtio2/block/vda"
    (blocks / "vda5").mkdir(parents=True)
    (blocks / "dev").write_text("254:0\n")
    (blocks / "vda5/dev").write_text("254:5\n")
    classes = tmp_path / "class-block"
    classes.mkdir()
    (classes / "vda5").symlink_to(blocks / "vda5")
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/vda6 /var xfs rw 0 0\n/dev/vda5 /system/state xfs rw 0 0\n")
    assert system_disk_of(mounts, Path("/system/state"), classes) == "/dev/vda"
    mounts.write_text("tmpfs /system tmpfs rw 0 0\n")
    assert system_disk_of(mounts, Path("/system/state"), classes) is None


def _image_files(root: Path) -> InitramfsFiles:
    """A stand-in of the imager's inputs (the bytes are small; the layout is the real one)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, data in (("busybox", b"\x7fELF busybox"), ("rootfs.sqsh", b"hsqs base"), ("p.sqsh", b"hsqs py"),
                       ("i.sqsh", b"hsqs ichor"), ("vmlinuz", b"MZ kernel"), ("loop.ko", b"loop"),
                       ("squashfs.ko", b"sq"), ("BOOTX64.EFI", b"MZ grub"), ("boot.img", bytes(512)),
                       ("core.img", bytes(2048))):  # fmt: skip
        (root / name).write_bytes(data)
    return InitramfsFiles(
        busybox=Path(shutil.which("busybox") or root / "busybox"), init=b"#!/bin/busybox sh\n",
        modules=[("kernel/drivers/block/loop.ko", root / "loop.ko"), ("kernel/fs/squashfs/squashfs.ko",
                                                                      root / "squashfs.ko")],
        rootfs=root / "rootfs.sqsh", layers=[("10-pydeps.sqsh", root / "p.sqsh"), ("20-ichor.sqsh", root / "i.sqsh")],
        kernel=root / "vmlinuz", grub={name: root / name for name in GRUB_IMAGES},
    )  # fmt: skip


def _keep_by_stage1(files: InitramfsFiles, root: Path) -> Path:
    """Unpack the initramfs ``files`` make into ``root`` and run stage 1's keeping (imager/_stage1.py)
    there with a static busybox, as the kernel would (less the tmpfs: ``root`` is one already)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: chroot into an unpacked initramfs")
    need("cpio", "busybox")
    busybox = Path(shutil.which("busybox") or "")
    if b"statically linked" not in proc.run(["file", "-L", str(busybox)], check=False).stdout.encode():
        pytest.skip("needs a statically linked busybox (busybox-static)")
    root.mkdir()
    archive = root.with_suffix(".cpio")
    archive.write_bytes(_cpio(files))
    proc.run(["cpio", "-idm", "--quiet", "-D", str(root), "-F", str(archive)])
    script = '/bin/busybox --install -s /bin\nexport PATH=/bin\nfail() { echo "$*"; exit 1; }\n'
    script += KEEP.replace("mount -t tmpfs -o mode=0755 tmpfs /keep", ":") + 'echo "$from"\n'
    (root / "keep.sh").write_text(script)
    kept = proc.run(["chroot", str(root), "/bin/busybox", "sh", "/keep.sh"])
    assert kept.stdout.strip() == "/keep/amd64/initramfs", kept.stdout + kept.stderr
    assert not (root / "rootfs.sqsh").exists(), "the layers are moved, not copied"
    return root / "keep/amd64"


def _cpio(files: InitramfsFiles) -> bytes:
    out = io.BytesIO()
    write_newc(out, entries(files))
    return out.getvalue()


def test_the_installed_initramfs_is_the_bytes_the_imager_wrote(tmp_path: Path) -> None:
    files = _image_files(tmp_path / "inputs")
    assets = _keep_by_stage1(files, tmp_path / "initramfs")
    assert _cpio(kept_files(assets)) == _cpio(files)
    with pytest.raises(FileNotFoundError) as missing:
        kept_files(tmp_path / "nothing")
    assert missing.value.filename == str(tmp_path / "nothing/vmlinuz")


def test_an_image_without_install_assets_says_so(bundle: SecretsBundle, tmp_path: Path) -> None:
    vda = sparse(tmp_path / "vda", 2 * GIB)
    disks = _installation(tmp_path, [_disk(vda)], assets=tmp_path / "none")
    planned = disks.plan(_config(bundle, f"    install:\n        disk: {vda}\n").config)
    with pytest.raises(
        InstallError, match=r"this image carries no install assets: .*none/vmlinuz is missing"
    ):
        disks.install(planned, "config", lambda _: None)
    assert read_disk_table(vda) is None, "nothing was written"


# --- the whole install on a loop device (root) -----------------------------------------------------


def test_install_on_a_loop_device_as_machined_drives_it(bundle: SecretsBundle, tmp_path: Path) -> None:
    need("mkfs.xfs", "mkfs.vfat", "mcopy", "mmd", "xfs_db")
    files = _image_files(tmp_path / "inputs")
    assets = _keep_by_stage1(files, tmp_path / "initramfs")
    with loop_device(
        sparse(tmp_path / "loop.raw", 2 * GIB), "installs to a loop device and mounts STATE"
    ) as dev:
        meta_env = encode_values([MetaValue.parse("0xa=from the ISO")])
        disks = _installation(
            tmp_path, [_disk(dev)], assets=assets, work_dir=tmp_path,
            cmdline=f"talos.platform=metal talos.environment=INSTALLER_META_BASE64={meta_env}",
        )  # fmt: skip
        config = _config(bundle, f"    install:\n        disk: {dev}\n        legacyBIOSSupport: true\n")
        lines: list[str] = []
        disks.install(disks.plan(config.config), config.text, lines.append)
        table = read_disk_table(dev)
        assert table is not None
        assert table.names() == ["EFI", "BIOS", "BOOT", "META", "STATE", "EPHEMERAL"]
        assert f"partitioning {dev}: EFI, BIOS, BOOT, META, STATE, EPHEMERAL" in lines
        assert any(line.startswith("saved the machine config to STATE") for line in lines)

        def blkid(n: int) -> str:
            return proc.run(
                ["blkid", "-p", "-o", "value", "-s", "TYPE", partition_path(dev, n)], check=False
            ).stdout

        assert blkid(3).strip() == "xfs" and blkid(5).strip() == "xfs" and blkid(1).strip() == "vfat"
        assert blkid(6).strip() == "", "EPHEMERAL is formatted on its first mount, not by the install"
        state = table.by_name(Label.STATE)
        assert state is not None

        mountpoint = tmp_path / "mnt"
        mountpoint.mkdir()
        proc.run(["mount", "-t", "xfs", "-o", "ro", partition_path(dev, state.number), str(mountpoint)])
        try:
            saved = mountpoint / "config.yaml"
            assert saved.read_text() == config.text
            assert saved.stat().st_mode & 0o777 == 0o600
        finally:
            proc.run(["umount", str(mountpoint)])
        proc.run(["mount", "-t", "xfs", "-o", "ro", partition_path(dev, 3), str(mountpoint)])
        try:
            assert (mountpoint / "A/vmlinuz").read_bytes() == b"MZ kernel"
            assert (mountpoint / "A/initramfs.xz").read_bytes() == _cpio(files)
            grub_cfg = (mountpoint / "grub/grub.cfg").read_text()
            assert "talos.platform=metal console=ttyS0 console=tty0" in grub_cfg
        finally:
            proc.run(["umount", str(mountpoint)])
        with dev.open("rb") as raw:
            assert raw.read(512)[446] == 0x80, "legacyBIOSSupport marks the MBR's entry bootable"
        meta = table.by_name(Label.META)
        assert meta is not None
        assert Meta.open(partition_path(dev, meta.number)).get(0x0A) == b"from the ISO"


def test_mounts_on_a_machine_of_its_own_lists_its_mount_table(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    table = tmp_path / "mounts"
    table.write_text(
        f"/dev/vda5 {tmp_path / 'state'} xfs rw 0 0\nproc /proc proc rw 0 0\n/dev/vda6 {tmp_path / 'gone'} xfs rw 0 0\n"
    )
    layout = Layout(root=tmp_path / "node", address="127.5.0.3", platform=Platform.METAL, mount_table=table)
    rows = mounts(layout)
    assert [(r.filesystem, r.mounted_on) for r in rows] == [("/dev/vda5", str(tmp_path / "state"))]
    assert rows[0].size > 0
