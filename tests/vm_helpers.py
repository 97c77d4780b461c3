"""Shared pieces of the VM tests and ``benchmarks/upgrade.py``: why a VM test cannot run here, the
imager's outputs built for one, a network namespace with a bridge and a tap for one VM, and
``talosctl`` run inside it (nothing reaches the host's network; deleting the namespace removes the
bridge and the tap); a registry on the bridge for installer images, a node installed to disk from
maintenance mode, and the waits for its API, bootstrap and etcd."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ichor.imager.vm import OVMF_CODE, SerialLog, VMSpec, qemu_command, uefi_vars_copy
from ichor.machinery import proc

IMAGE_TOOLS = (
    "qemu-system-x86_64", "mksquashfs", "ip", "apt-get", "dpkg-deb", "depmod", "grub-mkimage", "xorriso",
    "mkfs.xfs", "mkfs.vfat", "mcopy",
)  # fmt: skip
"""What building the imager's outputs and booting them needs (``scripts/os-packages.txt``)."""


def vm_skip_reason() -> str | None:
    """Why a VM test cannot run on this machine, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespace, bridge, tap)"
    missing = next((tool for tool in IMAGE_TOOLS if shutil.which(tool) is None), None)
    if missing:
        return f"needs {missing} (scripts/os-packages.txt)"
    if not OVMF_CODE.exists():
        return f"needs {OVMF_CODE} (ovmf)"
    return None


def build_output(out: Path, profile: str, name: str, *args: str) -> Path:
    """``python -m ichor.imager <profile> --output out <args>``; returns ``out/name`` (the path it printed)."""
    result = proc.run(
        [sys.executable, "-m", "ichor.imager", profile, "--output", str(out), *args], timeout=1200
    )
    assert result.stdout.strip().endswith(str(out / name)), result.stdout
    return out / name


@contextmanager
def vm_netns(prefix: str, gateway: str) -> Iterator[str]:
    """A namespace ``<prefix>-<pid>`` with bridge ``br0`` (``gateway``/24) and ``tap0`` on it."""
    name = f"{prefix}-{os.getpid()}"
    proc.run(["ip", "netns", "add", name])
    try:
        for command in (
            ["link", "add", "br0", "type", "bridge"],
            ["addr", "add", f"{gateway}/24", "dev", "br0"],
            ["link", "set", "br0", "up"],
            ["link", "set", "lo", "up"],
            ["tuntap", "add", "tap0", "mode", "tap"],
            ["link", "set", "tap0", "master", "br0", "up"],
        ):
            proc.run(["ip", "-n", name, *command])
        yield name
    finally:
        proc.run(["ip", "netns", "delete", name], check=False)


def talosctl_in(netns: str, home: Path, *args: str, timeout: float = 120) -> proc.Completed:
    """``python -m ichor <args>`` in ``netns`` with ``HOME=home``; never raises on its exit code."""
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return proc.run(
        ["ip", "netns", "exec", netns, sys.executable, "-m", "ichor", *args],
        env=env,
        check=False,
        timeout=timeout,
    )


Talosctl = Callable[..., proc.Completed]
"""``talosctl`` against one node: ``talosctl(*args, timeout=...)``, never raising on its exit code."""


@contextmanager
def serve_registry(netns: str, address: str, state: Path) -> Iterator[Path]:
    """``docker-registry`` in ``netns`` listening on ``address`` (``host:port``), storing under
    ``state``; yields its log (the access log is on). Stopped by PID on the way out."""
    state.mkdir(parents=True, exist_ok=True)
    config = state / "registry.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: false\n"
        f"storage:\n  filesystem:\n    rootdirectory: {state / 'data'}\n"
        f"http:\n  addr: {address}\n  secret: {secrets.token_hex(16)}\n"
    )
    log = state / "registry.log"
    child = proc.start(["ip", "netns", "exec", netns, "docker-registry", "serve", str(config)], output=log)
    try:
        deadline = time.monotonic() + 30
        while "listening on" not in (log.read_text() if log.exists() else ""):
            assert child.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield log
    finally:
        child.stop(timeout=5)


def push_installer(netns: str, layout: Path, registry: str, tag: str) -> None:
    """Copy the OCI layout's ``tag`` to ``<registry>/siderolabs/installer:<tag>`` (from ``netns``)."""
    proc.run(["ip", "netns", "exec", netns, "skopeo", "--insecure-policy", "copy", "--quiet", "--dest-tls-verify=false",
              f"oci:{layout}:{tag}", f"docker://{registry}/siderolabs/installer:{tag}"], timeout=300)  # fmt: skip


def gen_node_config(work: Path, name: str, node_ip: str, patch: str) -> Path:
    """``talosctl gen config <name> https://<node_ip>:6443 --install-disk /dev/vda`` with ``patch``
    (YAML) into ``work/configs``; returns that folder (``controlplane.yaml``, ``talosconfig``)."""
    (work / "patch.yaml").write_text(patch)
    configs = work / "configs"
    made = proc.run([sys.executable, "-m", "ichor", "gen", "config", name, f"https://{node_ip}:6443",
                     "--install-disk", "/dev/vda", "--config-patch", f"@{work / 'patch.yaml'}", "--output",
                     str(configs)], env={**os.environ, "HOME": str(work)}, check=False)  # fmt: skip
    assert made.exit_code == 0, made.stdout + made.stderr
    return configs


def without_direct_boot(command: list[str]) -> list[str]:
    """The same QEMU booting from its disk and rebooting in place: no ``-kernel``/``-initrd``/
    ``-append``, no ``-no-reboot``."""
    out: list[str] = []
    skip = False
    for arg in command:
        if skip:
            skip = False
        elif arg in ("-kernel", "-initrd", "-append"):
            skip = True
        elif arg != "-no-reboot":
            out.append(arg)
    return out


def disk_vm_spec(work: Path, kernel: Path, initrd: Path, ip_arg: str) -> VMSpec:
    """One UEFI VM (1.5 GiB) on ``tap0`` with a fresh 3 GiB disk, booting the imager's ``kernel`` and
    ``initrd`` into maintenance mode; its console in ``work/serial-1.log``."""
    disk = work / "disk0.raw"
    with disk.open("wb") as f:
        f.truncate(3 << 30)
    return VMSpec(kernel=kernel, initrd=initrd, serial=work / "serial-1.log", disk=disk, tap="tap0", memory_mb=1536,
                  uefi_vars=uefi_vars_copy(work / "OVMF_VARS.fd"),
                  cmdline=f"console=ttyS0 talos.platform=metal printk.devkmsg=on {ip_arg}")  # fmt: skip


def install_to_disk(
    netns: str, work: Path, spec: VMSpec, config: Path, node_ip: str, serial_after: Path
) -> list[str]:
    """Boot ``spec`` (the imager's kernel and initramfs: maintenance mode) in ``netns``, install with
    ``apply-config --insecure --file config``, wait for QEMU (``-no-reboot``) to exit on the install's
    reboot; returns the QEMU command that boots the same disk, serial console to ``serial_after``.
    QEMU is stopped by PID on the way out, on failure too."""
    command = qemu_command(spec)
    vm = proc.start(
        ["ip", "netns", "exec", netns, "nice", "-n", "10", *command], output=work / "qemu-install.log"
    )
    try:
        console = SerialLog(spec.serial, time.monotonic())
        alive = lambda: vm.poll() is None  # noqa: E731
        console.wait_for(rf"talosctl apply-config --insecure --nodes {node_ip} --file", 400, alive=alive)
        applied = talosctl_in(netns, work, "apply-config", "--insecure", "-n", node_ip, "--file", str(config))
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        console.wait_for("installation complete: rebooting", 600, alive=alive)
        assert vm.wait(timeout=120) == 0
    finally:
        vm.stop(timeout=5)
    return [a if a != f"file:{spec.serial}" else f"file:{serial_after}" for a in without_direct_boot(command)]


def wait_api(talosctl: Talosctl, timeout: float = 600, detail: Callable[[], str] = str) -> float:
    """Seconds until ``talosctl version`` answers (asked every 5 s)."""
    started = time.monotonic()
    while True:
        version = talosctl("version", timeout=60)
        if version.exit_code == 0:
            return time.monotonic() - started
        assert time.monotonic() - started < timeout, version.stderr + detail()
        time.sleep(5)


def bootstrap(talosctl: Talosctl) -> None:
    """``talosctl bootstrap``, asked again while Talos refuses it for the clock (the API answers a
    moment before TimeStatus is synced)."""
    deadline = time.monotonic() + 120
    done = talosctl("bootstrap")
    while done.exit_code != 0 and "time is not in sync yet" in done.stderr:
        assert time.monotonic() < deadline, done.stderr
        time.sleep(3)
        done = talosctl("bootstrap")
    assert done.exit_code == 0, done.stderr


def etcd_healthy(talosctl: Talosctl, timeout: float = 300, every: float = 3) -> None:
    """etcd answers: an upgrade of a control plane takes its upgrade mutex there (a kexec reboot
    brings the API up seconds before etcd)."""
    deadline = time.monotonic() + timeout
    while "HEALTH   OK" not in talosctl("service", "etcd").stdout:
        assert time.monotonic() < deadline, "etcd never became healthy"
        time.sleep(every)
