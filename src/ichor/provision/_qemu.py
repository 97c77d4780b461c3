"""The ``qemu`` provisioner (:class:`~._provisioner.Provisioner`): each node a QEMU VM booting Ichor's
image on the metal platform, as Talos's QEMU provisioner (``pkg/provision/providers/qemu``) runs them.

Around the VMs is the container provisioner's network, unchanged (:mod:`._network`): the blackhole
route first, the nftables guard, the bridge with the gateway, dnsmasq handing each VM its address by
MAC and answering its name, chronyd. Each NIC of a VM is a tap device on that bridge (a VM on
``-netdev user`` sits behind a NAT of its own and can reach no other VM). A per-node launcher
(``python -m ichor.provision.launcher --vm <node>.vm.json``) runs QEMU and runs it again when it exits,
which with ``-no-reboot`` is how a guest reboot (or ``q`` on the monitor) looks; it also serves the
node's config at ``http://<gateway>:<port>/config.yaml`` for ``talos.config=``, as Talos's launcher does.

Per node, in the cluster's state directory: ``<node>-<i>.disk`` (sparse raw files, the system disk
``-0`` on virtio, extra disks on the q35 AHCI controller as Talos attaches them), ``<node>.log``
(the serial console, appended across boots: ``tail -F`` works), ``<node>.monitor`` (the QEMU
monitor, ``echo q | socat - unix-connect:<node>.monitor`` reboots), ``<node>.vars.fd`` (its UEFI
variables, with ``--with-uefi``) and ``<node>.vm.json`` (what the launcher runs).

Talos's rules kept: the first boot loads ``--vmlinuz-path``/``--initrd-path`` directly (or boots
``--iso-path``) while the system disk has no partitions or ``--with-bootloader=false``; otherwise the
firmware boots the disk. The kernel command line is Talos's ``kernel.DefaultArgs``, ``console=ttyS0
reboot=k panic=1 talos.shutdown=halt talos.platform=metal``, ``--extra-boot-kernel-args``, ``ip=``
with the node's reserved address (Ichor's: :func:`ip_argument` says why), then ``talos.config=``
(unless ``--with-apply-config``: the config then goes over the insecure maintenance API once the
node answers there). The configs install to ``/dev/vda`` with the same
arguments, get DHCP on every virtio NIC, and with ``--with-bootloader=false`` have kexec disabled.
Acceleration is TCG unless a short KVM canary boot succeeds (:func:`choose_accel`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any

from ichor.machinery import proc
from ichor.machinery.errors import MachineryError
from ichor.machinery.kernelargs import DEFAULT_ARGS, Cmdline
from ichor.provision import _container, _remains
from ichor.provision import _network as net
from ichor.provision._processes import ProcessId, find, tags
from ichor.provision._provisioner import Provisioner, ProvisionerName
from ichor.provision._record import ClusterRecord, NodeRecord, launcher_state_file

__all__ = [
    "CONFIG_URL",
    "PROVISIONER",
    "LaunchConfig",
    "QemuProvisioner",
    "VMOptions",
    "boot_cmdline",
    "choose_accel",
    "disk_bootable",
    "ip_argument",
    "qemu_command",
    "tap_name",
]

QEMU = "qemu-system-x86_64"
OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")
OVMF_HINT = "install Debian's ovmf package (`apt-get install -y ovmf`), or pass --with-uefi=false for SeaBIOS"
QEMU_HINT = "install it (Debian: `apt-get install -y qemu-system-x86 ovmf`)"
CONFIG_URL = "{TALOS_CONFIG_URL}"
"""Placeholder in the kernel command line, replaced by the launcher with its config server's URL."""
MAX_NICS = 4
_UNIX_PATH_MAX = 107
_KVM_CANARY_SECONDS = 10.0


@dataclass(frozen=True)
class VMOptions:
    """create's VM flags (Talos 1.7's defaults), as ``cluster.yaml`` keeps them (``vm``)."""

    cpus: str = "2.0"
    """``--cpus``: vCPUs, Talos's fraction rounded to even (at least 1)."""
    cpus_workers: str = "2.0"
    memory_mb: int = 2048
    memory_workers_mb: int = 2048
    disk_mb: int = 6 * 1024
    extra_disks: int = 0
    extra_disks_size_mb: int = 5 * 1024
    iso_path: str = ""
    vmlinuz_path: str = ""
    initrd_path: str = ""
    with_bootloader: bool = True
    with_uefi: bool = True
    with_apply_config: bool = False
    extra_boot_kernel_args: str = ""
    nics: int = 1
    """``--with-nics`` (Ichor's own): NICs per VM, each a tap on the cluster bridge."""

    @classmethod
    def of(cls, values: Mapping[str, object]) -> VMOptions:
        """From create's keyword flags (unknown keys ignored, missing ones Talos's defaults)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known and v is not None})  # type: ignore[arg-type]

    def vcpus(self, kind: str) -> int:
        text = self.cpus if kind == "controlplane" else self.cpus_workers
        try:
            share = float(text)
        except ValueError:
            flag = "--cpus" if kind == "controlplane" else "--cpus-workers"
            raise MachineryError(f"{flag} {text!r} is not a number", hint=f"pass e.g. {flag} 2.0") from None
        return max(1, round(share)) if math.isfinite(share) else 1

    def memory(self, kind: str) -> int:
        return self.memory_mb if kind == "controlplane" else self.memory_workers_mb


VM_FLAGS: dict[str, str] = {
    "vmlinuz_path": "--vmlinuz-path",
    "initrd_path": "--initrd-path",
    "iso_path": "--iso-path",
    "disk_mb": "--disk",
    "extra_disks": "--extra-disks",
    "extra_disks_size_mb": "--extra-disks-size",
    "with_bootloader": "--with-bootloader",
    "with_uefi": "--with-uefi",
    "with_apply_config": "--with-apply-config",
    "extra_boot_kernel_args": "--extra-boot-kernel-args",
    "nics": "--with-nics",
}
"""create's keyword name -> flag, for the flags only VM nodes take."""


def refuse_vm_flags(flags: Mapping[str, object], who: str) -> None:
    """Refuse any VM flag given a value other than its default, for ``who`` (``container nodes``)."""
    default = VMOptions()
    for name, flag in VM_FLAGS.items():
        if name in flags and flags[name] is not None and flags[name] != getattr(default, name):
            raise MachineryError(
                f"{flag} needs VM nodes: {who} boot machined directly, with no firmware, disk or NIC of their own",
                hint=f"pass --provisioner qemu (as root), or leave {flag} out",
            )


def tap_name(cluster: str, node: str, nic: int) -> str:
    """The host end of a VM's NIC ``nic`` on the cluster bridge (15 characters at most)."""
    return f"tap{hashlib.sha256(f'{cluster}/{node}'.encode()).hexdigest()[:8]}-{nic}"


def nic_mac(cluster: str, node: str, nic: int) -> str:
    """NIC 0 has the node's MAC (its DHCP reservation); the others one of their own."""
    return net.node_mac(cluster, node if nic == 0 else f"{node}/eth{nic}")


def boot_cmdline(extra: str) -> str:
    """The kernel command line of a direct (``-kernel``) boot, Talos's qemu provisioner's, with
    :data:`CONFIG_URL` where ``talos.config`` goes (left out by the caller for ``--with-apply-config``)."""
    cmdline = Cmdline()
    cmdline.set_all(DEFAULT_ARGS)
    cmdline.append("console", "ttyS0")
    cmdline.append("reboot", "k")
    cmdline.append("panic", "1")
    cmdline.append("talos.shutdown", "halt")
    cmdline.append("talos.platform", "metal")
    cmdline.append_all(extra.split())
    return str(cmdline)


def ip_argument(record: ClusterRecord, node: NodeRecord) -> str:
    """``ip=`` with the node's reserved address, gateway and name (first NIC), for direct boots.

    Talos's provisioner passes none: Talos fetches ``talos.config`` once its network controllers
    have a DHCP lease. Ichor's metal boot fetches it before machined starts, with only ``ip=``'s
    address (:mod:`ichor.machined._metal_boot`), so the provisioner gives the address DHCP would."""
    served = net.network(record.cidr)
    return f"ip={node.address}::{net.gateway(record.cidr)}:{served.netmask}:{node.name}::off"


@dataclass
class LaunchConfig:
    """What the launcher needs to run one VM (``<node>.vm.json``), as Talos's ``LaunchConfig``."""

    name: str
    memory_mb: int
    vcpus: int
    disks: list[str]
    taps: list[str]
    macs: list[str]
    uuid: str
    serial_log: str
    monitor: str
    cmdline: str
    """With :data:`CONFIG_URL` to be replaced; ``talos.config`` absent with ``--with-apply-config``."""
    kernel: str = ""
    initrd: str = ""
    iso: str = ""
    bootloader: bool = True
    uefi_code: str = ""
    uefi_vars: str = ""
    """The node's own copy of the UEFI variables ("" without UEFI: SeaBIOS)."""
    accel: str = "tcg"
    config: str = ""
    """The node's machine config file, served for ``talos.config`` ("": none served)."""
    gateway: str = ""
    extra: list[str] = field(default_factory=list)
    """Extra QEMU arguments (tests)."""

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> LaunchConfig:
        return cls(**json.loads(path.read_text()))


def disk_bootable(path: str | Path) -> bool:
    """Talos's ``checkPartitions``: the system disk has a GPT with partitions (an installed node)."""
    from ichor.machinery.blockdev import read_disk_table
    from ichor.machinery.errors import PartitionTableError

    try:
        table = read_disk_table(path)
    except (OSError, PartitionTableError):
        return False
    return table is not None and len(table.partitions) > 0


def qemu_command(launch: LaunchConfig, *, boot_disk: bool, config_url: str = "") -> list[str]:
    """QEMU's arguments for one boot of the VM. ``boot_disk``: the system disk is bootable, so the
    firmware boots it unless ``--with-bootloader=false`` (then the kernel or ISO is booted again)."""
    accel = ["-accel", "kvm", "-cpu", "host"] if launch.accel == "kvm" else ["-accel", "tcg", "-cpu", "max"]
    command = [
        QEMU, "-name", launch.name, "-machine", "q35", *accel,
        "-smp", f"cpus={launch.vcpus}", "-m", str(launch.memory_mb),
        "-nographic", "-no-reboot", "-boot", "order=cn,reboot-timeout=5000",
        "-chardev", f"file,id=console,path={launch.serial_log},append=on", "-serial", "chardev:console",
        "-monitor", f"unix:{launch.monitor},server,nowait",
        "-smbios", f"type=1,uuid={launch.uuid}",
        "-device", "virtio-rng-pci", "-device", "virtio-balloon,deflate-on-oom=on",
        "-device", "i6300esb,id=watchdog0", "-action", "watchdog=pause",
    ]  # fmt: skip
    for i, (tap, mac) in enumerate(zip(launch.taps, launch.macs, strict=True)):
        command += ["-netdev", f"tap,id=net{i},ifname={tap},script=no,downscript=no",
                    "-device", f"virtio-net-pci,netdev=net{i},mac={mac}"]  # fmt: skip
    for i, disk in enumerate(launch.disks):
        command += ["-drive", f"format=raw,if={'virtio' if i == 0 else 'ide'},file={disk},cache=unsafe"]
    if launch.uefi_vars:
        command += ["-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={launch.uefi_code}",
                    "-drive", f"if=pflash,format=raw,unit=1,file={launch.uefi_vars}"]  # fmt: skip
    if not boot_disk or not launch.bootloader:
        if launch.iso:
            command += ["-cdrom", launch.iso]
        elif launch.kernel:
            cmdline = launch.cmdline.replace(CONFIG_URL, config_url)
            command += ["-kernel", launch.kernel, "-initrd", launch.initrd, "-append", cmdline]
    return [*command, *launch.extra]


def choose_accel(kernel: str, cache: Path, progress: Callable[[str], None]) -> tuple[str, str]:
    """``("kvm", why)`` only when a short boot of ``kernel`` under KVM reaches the kernel's own
    panic for a missing root (proof that the host's KVM runs a stock kernel); else ``("tcg", why)``.
    The verdict is cached per QEMU binary and kernel."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg", "no usable /dev/kvm"
    qemu = shutil.which(QEMU) or QEMU
    stat = Path(kernel).stat()
    key = hashlib.sha256(
        f"{qemu}:{Path(qemu).stat().st_mtime_ns}:{kernel}:{stat.st_size}:{stat.st_mtime_ns}".encode()
    )
    verdict = cache / f"kvm-canary-{key.hexdigest()[:16]}.json"
    try:
        saved = json.loads(verdict.read_text())
        return str(saved["accel"]), str(saved["why"]) + " (cached)"
    except (OSError, ValueError, KeyError):
        pass
    progress(f"KVM canary: booting {kernel} under KVM for at most {_KVM_CANARY_SECONDS:.0f}s")
    cache.mkdir(parents=True, exist_ok=True)
    serial = cache / "kvm-canary.serial"
    serial.unlink(missing_ok=True)
    child = proc.start(
        [qemu, "-accel", "kvm", "-cpu", "host", "-machine", "q35", "-m", "256", "-nographic", "-no-reboot",
         "-monitor", "none", "-nic", "none", "-serial", f"file:{serial}", "-kernel", kernel,
         "-append", "console=ttyS0 panic=-1 root=/dev/ichor-none"],
        output=cache / "kvm-canary.log",
    )  # fmt: skip
    deadline = time.monotonic() + _KVM_CANARY_SECONDS
    accel, why = (
        "tcg",
        f"the KVM canary boot did not reach the kernel's root panic in {_KVM_CANARY_SECONDS:.0f}s",
    )
    try:
        while time.monotonic() < deadline:
            text = serial.read_bytes() if serial.exists() else b""
            if b"Kernel panic" in text or b"VFS: Unable to mount root" in text:
                accel, why = "kvm", "a KVM canary boot of the kernel reached its root panic"
                break
            if child.poll() is not None:
                why = f"the KVM canary boot ended with exit code {child.poll()} before the kernel ran"
                break
            time.sleep(0.1)
    finally:
        child.stop(timeout=2)
    verdict.write_text(json.dumps({"accel": accel, "why": why}))
    return accel, why


def default_boot_files(progress: Callable[[str], None]) -> tuple[str, str]:
    """The imager's ``vmlinuz-amd64`` and ``initramfs-amd64.xz``, built into its cache when missing
    or stale (a warm build takes seconds; a cold one minutes, with progress)."""
    from ichor.imager import ImagerError
    from ichor.imager._build import BuildOptions, Profile, build, default_cache

    out = default_cache() / "out"
    progress(f"kernel and initramfs: the imager's, in {out} (built now where missing or stale)")
    built = []
    for profile in (Profile.KERNEL, Profile.INITRAMFS):
        try:
            built.append(
                build(profile, BuildOptions(output=out, say=lambda line: progress(f"imager: {line}")))
            )
        except ImagerError as exc:
            raise MachineryError(f"building the VM's {profile}: {exc}", hint=exc.hint) from None
    return str(built[0].path), str(built[1].path)


class QemuProvisioner:
    name = ProvisionerName.QEMU
    nodes_noun = "VMs"
    owns_network = True
    node_limits = True
    runs_kubernetes = True
    kubernetes_wait_skipped = (
        "VM nodes run under QEMU's TCG here, where Kubernetes' servers take many minutes; create waits for "
        "the etcd stages of `talosctl health` (check the rest with `talosctl health`)"
    )
    maintenance_timeout = timedelta(seconds=300)
    """Measured: 48 s at idle to the maintenance API under TCG; a loaded host slows TCG 3-5x."""

    def check_host(self) -> None:
        _container.check_host()
        if shutil.which(QEMU) is None:
            raise MachineryError(f"{QEMU} is not installed", hint=QEMU_HINT)
        if not os.path.exists("/dev/net/tun"):
            raise MachineryError("/dev/net/tun is missing (VM NICs are tap devices)", hint="modprobe tun")

    def check_flags(self, flags: dict[str, object]) -> None:
        if flags.get("extra_cidr"):
            raise MachineryError(
                "--extra-cidr is Ichor's for container nodes; VM nodes take --with-nics for more NICs",
                hint="leave --extra-cidr out (pass --with-nics 2 for a second NIC on the cluster bridge)",
            )
        if flags.get("static_addresses"):
            raise MachineryError("--static-addresses is for container nodes", hint="leave it out")
        if flags.get("extensions"):
            raise MachineryError(
                "--extension layers into container nodes; a VM boots its image, whose extensions the imager bakes in",
                hint="leave --extension out (extensions in VM images come with the imager)",
            )
        options = VMOptions.of(flags)
        for name, value in (("--disk", options.disk_mb), ("--extra-disks-size", options.extra_disks_size_mb)):
            if value < 1:
                raise MachineryError(f"{name} {value}: a disk needs at least 1 MB", hint=f"pass {name} in MB")
        if not 0 <= options.extra_disks <= 8:
            raise MachineryError(f"--extra-disks {options.extra_disks} is out of range", hint="pass 0 to 8")
        if not 1 <= options.nics <= MAX_NICS:
            raise MachineryError(f"--with-nics {options.nics} is out of range", hint=f"pass 1 to {MAX_NICS}")
        for kind in ("controlplane", "worker"):
            options.vcpus(kind)
            if options.memory(kind) < 512:
                flag = "--memory" if kind == "controlplane" else "--memory-workers"
                raise MachineryError(
                    f"{flag} {options.memory(kind)} MB is too little for a VM node",
                    hint=f"pass {flag} 1024 or more (Talos's default 2048)",
                )
        for path, flag in ((options.vmlinuz_path, "--vmlinuz-path"), (options.initrd_path, "--initrd-path"),
                           (options.iso_path, "--iso-path")):  # fmt: skip
            if path and not Path(path).expanduser().is_file():
                raise MachineryError(f"{flag} {path}: no such file", hint=f"pass an existing file to {flag}")
        if bool(options.vmlinuz_path) != bool(options.initrd_path):
            raise MachineryError(
                "--vmlinuz-path and --initrd-path go together",
                hint="pass both, or neither for the imager's (python -m ichor.imager kernel|initramfs)",
            )
        bad = [a for a in options.extra_boot_kernel_args.split() if '"' in a or "'" in a]
        if bad:
            raise MachineryError(
                f"--extra-boot-kernel-args: {bad[0]!r} cannot be passed on the kernel command line",
                hint="space-separated key or key=value arguments, without quotes",
            )
        if options.with_uefi and not (OVMF_CODE.is_file() and OVMF_VARS.is_file()):
            raise MachineryError(f"--with-uefi needs OVMF ({OVMF_CODE} is missing)", hint=OVMF_HINT)

    def addresses(self, cidr: str, count: int) -> list[str]:
        return net.node_addresses(cidr, count)

    def check_free(self, name: str, cidr: str, state: Path, addresses: Sequence[str], controlplanes: int,
                   extra_cidr: str) -> None:  # fmt: skip
        monitor = state.expanduser().resolve() / name / f"{name}-controlplane-1.monitor"
        if len(str(monitor)) > _UNIX_PATH_MAX - 8:
            raise MachineryError(
                f"the VMs' monitor sockets ({monitor}) would be longer than a unix socket path may be",
                hint="pass a shorter --state or --name",
            )
        _container.check_cidr(name, cidr, state, extra_cidr)

    def plan_node(self, record: ClusterRecord, node: NodeRecord) -> None:
        options = VMOptions.of(record.vm)
        state_dir = Path(record.state_dir)
        node.taps = [tap_name(record.name, node.name, i) for i in range(options.nics)]
        node.macs = [nic_mac(record.name, node.name, i) for i in range(options.nics)]
        node.mac = node.macs[0]
        node.uuid = str(uuid.uuid4())
        node.disks = [str(state_dir / f"{node.name}-{i}.disk") for i in range(1 + options.extra_disks)]

    def create_network(self, record: ClusterRecord, progress: Callable[[str], None]) -> None:
        _container.create_network(record, progress)

    def node_patches(self, record: ClusterRecord, node: NodeRecord) -> list[str]:
        options = VMOptions.of(record.vm)
        install_args = ["console=ttyS0", "reboot=k", "panic=1", "talos.shutdown=halt", "talos.platform=metal"]
        patches = [
            _container.time_server_patch(record),
            "machine:\n  install:\n    disk: /dev/vda\n    extraKernelArgs: ["
            + ", ".join(install_args)
            + "]\n  network:\n    interfaces:\n      - deviceSelector:\n          driver: virtio_net\n"
            f"        dhcp: true\n        mtu: {record.mtu}\n",
        ]
        if not options.with_bootloader:
            # As Talos: kexec would boot the installed kernel, i.e. use the bootloader's files.
            patches.append('machine:\n  sysctls:\n    kernel.kexec_load_disabled: "1"\n')
        return patches

    def start_nodes(self, record: ClusterRecord, progress: Callable[[str], None]) -> bool:
        options = VMOptions.of(record.vm)
        state_dir = Path(record.state_dir)
        kernel, initrd = options.vmlinuz_path, options.initrd_path
        if not options.iso_path and not kernel:
            kernel, initrd = default_boot_files(progress)
        if not record.accel:
            cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ichor" / "qemu"
            accel, why = choose_accel(kernel, cache, progress) if kernel else ("tcg", "")
            record.accel = accel
            record.save()
            progress(f"acceleration: {accel}" + (f" ({why})" if why else ""))
        for node in record.nodes:
            cmdline = boot_cmdline(options.extra_boot_kernel_args) + " " + ip_argument(record, node)
            if not options.with_apply_config:
                cmdline += f" talos.config={CONFIG_URL}"
            for i, disk in enumerate(node.disks):
                size = options.disk_mb if i == 0 else options.extra_disks_size_mb
                with open(disk, "ab") as f:  # sparse: only what the guest writes takes space
                    f.truncate(size * 1024 * 1024)
            vars_copy = ""
            if options.with_uefi:
                vars_copy = str(state_dir / f"{node.name}.vars.fd")
                shutil.copyfile(OVMF_VARS, vars_copy)
            for tap in node.taps:
                _add_tap(tap, record.bridge, record.mtu)
            launch = LaunchConfig(
                name=node.name, memory_mb=options.memory(node.type), vcpus=options.vcpus(node.type),
                disks=node.disks, taps=node.taps, macs=node.macs, uuid=node.uuid,
                serial_log=str(state_dir / f"{node.name}.log"), monitor=str(state_dir / f"{node.name}.monitor"),
                cmdline=cmdline, kernel=kernel, initrd=initrd, iso=options.iso_path,
                bootloader=options.with_bootloader, uefi_code=str(OVMF_CODE) if vars_copy else "",
                uefi_vars=vars_copy, accel=record.accel,
                config="" if options.with_apply_config else str(state_dir / f"{node.name}.yaml"),
                gateway=net.gateway(record.cidr),
            )  # fmt: skip
            launch_file = state_dir / f"{node.name}.vm.json"
            launch.save(launch_file)
            background = proc.start(
                [sys.executable, "-m", "ichor.provision.launcher", "--vm", str(launch_file),
                 "--log", launch.serial_log, "--state-file", str(launcher_state_file(state_dir, node.name))],
                output=state_dir / f"{node.name}.launcher.log", env=tags(state_dir, node.name),
            )  # fmt: skip
            identity = ProcessId.of(background.pid)
            node.launcher_pid, node.launcher_start = background.pid, identity.start if identity else 0
            record.save()
            disks = ", ".join(f"{Path(d).name} ({(options.disk_mb if i == 0 else options.extra_disks_size_mb)} MB)"
                              for i, d in enumerate(node.disks))  # fmt: skip
            progress(
                f"started VM {node.name} ({launch.vcpus} vCPU, {launch.memory_mb} MB, {record.accel}): "
                f"{', '.join(f'{t} {m}' for t, m in zip(node.taps, node.macs, strict=True))} on {record.bridge}, "
                f"{node.address}; disks {disks}; console {launch.serial_log}; monitor {launch.monitor}"
            )
        return options.with_apply_config

    def host_parts(
        self, record: ClusterRecord | None, name: str, state_dir: Path, host: _remains.Host
    ) -> _remains.HostParts:
        found = _container.PROVISIONER.host_parts(record, name, state_dir, host)
        nodes = sorted(p.name.removesuffix(".launcher.log") for p in state_dir.glob("*.launcher.log"))
        derived = [tap_name(name, node, i) for node in nodes for i in range(MAX_NICS)]
        found.taps = list(dict.fromkeys([*found.taps, *(t for t in derived if host.link_exists(t))]))
        return found

    def show_rows(self, record: ClusterRecord) -> list[list[str]]:
        state_dir = Path(record.state_dir)
        running = find(state_dir)
        rows = [["NAME", "QEMU PID", "ACCEL", "DISKS", "CONSOLE LOG", "MONITOR"]]
        for node in record.nodes:
            vms = [p for p in running if p.node == node.name and p.role == QEMU]
            disks = ",".join(f"{Path(d).name}:{_size(d)}" for d in node.disks)
            pid = str(vms[0].id.pid) if vms else "-"
            rows.append([node.name, pid, record.accel or "-", disks,
                         str(state_dir / f"{node.name}.log"), str(state_dir / f"{node.name}.monitor")])  # fmt: skip
        return rows


def _size(path: str) -> str:
    """A disk file's size and how much of it is allocated (sparse)."""
    try:
        st = os.stat(path)
    except OSError:
        return "gone"
    return f"{st.st_size // 2**20}MiB({st.st_blocks * 512 // 2**20}MiB used)"


def _add_tap(tap: str, bridge: str, mtu: int) -> None:
    """A persistent tap device on the bridge for QEMU to open by name (removed by destroy)."""
    proc.run(["ip", "tuntap", "add", "dev", tap, "mode", "tap"], timeout=15)
    proc.run(["ip", "link", "set", tap, "mtu", str(mtu), "master", bridge, "up"], timeout=15)


class ConfigServer:
    """The node's machine config at ``http://<gateway>:<port>/config.yaml`` (``talos.config=``), as
    Talos's launcher serves it; the port is the kernel's choice. Run by the launcher, closed with it."""

    def __init__(self, address: str, config: Path) -> None:
        import http.server
        import threading

        body = config.read_bytes()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/config.yaml":
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/yaml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                sys.stderr.write(f"config server: {self.address_string()} {format % args}\n")

        self._server = http.server.ThreadingHTTPServer((address, 0), Handler)
        self.url = f"http://{address}:{self._server.server_address[1]}/config.yaml"
        self._thread = threading.Thread(target=self._server.serve_forever, name="config-server", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class VMBoot:
    """One boot of a VM as the launcher's node: QEMU's exit 0 (``-no-reboot``: the guest rebooted,
    or ``q`` on the monitor) is a reboot; any other code a crash."""

    def __init__(self, child: proc.Background) -> None:
        self.child = child

    @property
    def pid(self) -> int:
        return self.child.pid

    def wait(self, timeout: float | None = None) -> int:
        from ichor.machined.platform import EXIT_REBOOT

        code = self.child.wait(timeout)
        return EXIT_REBOOT if code == 0 else code

    def signal_group(self, sig: int) -> None:
        self.child.signal_group(sig)


def vm_node_starter(launch_file: Path) -> tuple[Callable[[], VMBoot], Callable[[], None]]:
    """The launcher's ``--vm`` mode: a function starting one boot, and one closing what it holds
    (the config server)."""
    launch = LaunchConfig.load(launch_file)
    server = ConfigServer(launch.gateway, Path(launch.config)) if launch.config else None
    url = server.url if server is not None else ""
    output = Path(launch.serial_log).with_name(f"{launch.name}.launcher.log")

    def start() -> VMBoot:
        command = qemu_command(launch, boot_disk=disk_bootable(launch.disks[0]), config_url=url)
        print(f"starting {QEMU}: {' '.join(command)}", file=sys.stderr, flush=True)
        return VMBoot(proc.start(["nice", "-n", "10", *command], output=output, hint=QEMU_HINT))

    def close() -> None:
        if server is not None:
            server.close()

    return start, close


PROVISIONER: Provisioner = QemuProvisioner()
