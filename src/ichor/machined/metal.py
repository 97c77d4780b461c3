"""PID 1 on the metal platform (``/sbin/init`` of the OS image): the machine's duties, then machined.

What a kernel expects of init and what Talos's machined does before its controllers start:

* mount the pseudo-filesystems as Talos does (proc, sys, devpts, shm, mqueue, cgroup2 with
  ``nsdelegate``, bpffs, securityfs, efivarfs under UEFI) and tmpfs on ``/run``, ``/system``,
  ``/tmp`` and ``/var`` (until an installed EPHEMERAL takes its place); ``/etc`` gets a tmpfs upper
  so machined can write ``hosts``/``resolv.conf`` over the read-only image; ``/dev/fd`` and
  ``/dev/std{in,out,err}``, which devtmpfs lacks (``nft -f -`` opens ``/dev/stdin``);
* load the modules the hardware asks for (coldplug: every ``modalias`` under ``/sys/devices``
  through kmod's ``modprobe``, which honours softdeps, repeated while new devices appear), in a
  thread while machined starts, then ``/run/ichor/coldplug-done`` (machined's start waits for it
  before looking for an installed disk);
* read the kernel command line (:mod:`ichor.machined.kernelargs`); unknown ``talos.*`` arguments
  are reported, never fatal;
* run machined (``python -m ichor.machined --platform metal``) as its child, forward SIGTERM/SIGINT
  to it, reap every zombie the machine has (orphans are re-parented here), and copy machined's
  console into ``/dev/kmsg`` so the serial console and ``dmesg`` both have it;
* never exit: machined exiting 75 reboots (straight into the next boot when machined loaded it for
  kexec, :mod:`ichor.machined.kexecprep`), 0 powers off (or halts with ``talos.shutdown=halt``),
  anything else, or an error here, is fatal: say why, ``sync`` and ``reboot(2)`` after 10 s.

Why a child and not machined in this very process: PID 1 must reap every process, and a blanket
``waitpid(-1)`` in machined would steal the exit statuses asyncio waits for. The child is forked
after the cheap imports only, so the heavy import of machined's stack happens once.

This module imports only the standard library and stdlib-only Ichor modules: it runs first in a
TCG guest, where every import costs 13-16x what it does on the host.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import selectors
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from ichor.machined.kernelargs import KernelArgs

__all__ = [
    "COLDPLUG_DONE",
    "DEV_LINKS",
    "MARKER",
    "MOUNTS",
    "coldplug_aliases",
    "coldplug_then_mark",
    "dev_links",
    "main",
]

COLDPLUG_DONE = "/run/ichor/coldplug-done"
"""Written once module coldplug has finished (:func:`coldplug_then_mark`)."""
MARKER = "ichor-metal: PID 1 up"
"""The first line PID 1 prints (boot benchmarks time the rootfs's start by it)."""

EXIT_REBOOT = 75  # ichor.machined.platform's codes, not imported: that module is not stdlib-only
EXIT_POWEROFF = 0

# (source, target, fstype, flags, data): Talos's pseudo-filesystems (internal/pkg/mount/pseudo.go)
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_RELATIME = 2, 4, 8, 1 << 21
_NSD = MS_NOSUID | MS_NODEV
MOUNTS: tuple[tuple[str, str, str, int, str], ...] = (
    ("proc", "/proc", "proc", _NSD | MS_NOEXEC, ""),
    ("sysfs", "/sys", "sysfs", _NSD | MS_NOEXEC, ""),
    ("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755"),
    ("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "ptmxmode=000,mode=620,gid=5"),
    ("shm", "/dev/shm", "tmpfs", _NSD, ""),
    ("mqueue", "/dev/mqueue", "mqueue", _NSD | MS_NOEXEC, ""),
    ("tmpfs", "/run", "tmpfs", _NSD | MS_RELATIME, "mode=0755"),
    ("tmpfs", "/system", "tmpfs", 0, "mode=0755"),
    ("tmpfs", "/tmp", "tmpfs", _NSD, "mode=1777"),
    ("tmpfs", "/var", "tmpfs", 0, "mode=0755"),
    ("cgroup2", "/sys/fs/cgroup", "cgroup2", _NSD | MS_NOEXEC | MS_RELATIME, "nsdelegate,memory_recursiveprot"),
    ("bpf", "/sys/fs/bpf", "bpf", _NSD | MS_NOEXEC, ""),
    ("securityfs", "/sys/kernel/security", "securityfs", _NSD | MS_NOEXEC | MS_RELATIME, ""),
)  # fmt: skip
_EFIVARS = ("efivarfs", "/sys/firmware/efi/efivars", "efivarfs", _NSD | MS_NOEXEC | MS_RELATIME, "")

_RB_AUTOBOOT = 0x01234567
_RB_POWER_OFF = 0x4321FEDC
_RB_HALT_SYSTEM = 0xCDEF0123

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: str, fstype: str, flags: int, data: str) -> None:
    if _libc.mount(source.encode(), target.encode(), fstype.encode(), flags, data.encode() or None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype} on {target}: {os.strerror(err)}")


def _mounted() -> set[str]:
    try:
        return {line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()}
    except OSError:
        return set()


DEV_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
             ("stderr", "/proc/self/fd/2"))  # fmt: skip
"""The links devtmpfs lacks and programs open by name (``nft -f -`` reads ``/dev/stdin``)."""


def dev_links(dev: Path) -> None:
    """:data:`DEV_LINKS` in ``dev``, leaving any that exists."""
    for name, target in DEV_LINKS:
        with contextlib.suppress(FileExistsError):
            (dev / name).symlink_to(target)


def mount_pseudo(say: Callable[[str], None]) -> None:
    """Talos's pseudo-filesystems and the writable places, skipping what is mounted already."""
    mounted = _mounted()
    table = [*MOUNTS, *([_EFIVARS] if os.path.isdir("/sys/firmware/efi") else [])]
    for source, target, fstype, flags, data in table:
        if target in mounted:
            continue
        os.makedirs(target, exist_ok=True)
        try:
            _mount(source, target, fstype, flags, data)
        except OSError as err:
            # /proc and /sys are needed by everything after; the rest are reported and skipped.
            if target in ("/proc", "/sys", "/dev", "/system", "/run"):
                raise
            say(f"warning: {err.strerror}")
        if target == "/proc":
            mounted = _mounted()
    dev_links(Path("/dev"))
    # /etc stays the image's, with a tmpfs upper for the files machined writes (hosts, resolv.conf).
    for d in ("/system/etc/upper", "/system/etc/work"):
        os.makedirs(d, exist_ok=True)
    if "/etc" not in mounted:
        _mount(
            "overlay",
            "/etc",
            "overlay",
            0,
            "lowerdir=/etc,upperdir=/system/etc/upper,workdir=/system/etc/work",
        )


def coldplug_aliases(sys_devices: Path = Path("/sys/devices")) -> set[str]:
    """Every device's ``modalias`` (what the kernel would have sent udev at boot)."""
    aliases: set[str] = set()
    for root, _dirs, files in os.walk(sys_devices):
        if "modalias" in files:
            try:
                alias = Path(root, "modalias").read_text().strip()
            except OSError:
                continue
            if alias:
                aliases.add(alias)
    return aliases


def coldplug(say: Callable[[str], None], rounds: int = 4) -> int:
    """Load the modules for every device, again while loading them reveals new devices."""
    from ichor.machinery import proc

    seen: set[str] = set()
    loaded_before = _loaded_modules()
    for _ in range(rounds):
        aliases = coldplug_aliases() - seen
        if not aliases:
            break
        seen |= aliases
        proc.run(["/sbin/modprobe", "-a", "-q", "-b", *sorted(aliases)], check=False, timeout=120)
    loaded = _loaded_modules() - loaded_before
    say(f"coldplug: {len(seen)} devices, loaded {len(loaded)} modules: {' '.join(sorted(loaded))}")
    return len(loaded)


def coldplug_then_mark(say: Callable[[str], None], done: Path = Path(COLDPLUG_DONE)) -> None:
    """:func:`coldplug`, then :data:`COLDPLUG_DONE` (machined's start waits for it before it looks
    for an installed disk: the disks' drivers are loaded by then), whatever coldplug did."""
    try:
        coldplug(say)
    except Exception as err:  # PID 1 reports and goes on
        say(f"coldplug failed: {err}")
    finally:
        with contextlib.suppress(OSError):
            done.parent.mkdir(parents=True, exist_ok=True)
            done.write_text("")


def _loaded_modules() -> set[str]:
    try:
        return {line.split()[0] for line in Path("/proc/modules").read_text().splitlines()}
    except OSError:
        return set()


class _Kmsg:
    """The kernel log as machined's console: each line a ``/dev/kmsg`` record (``dmesg`` shows it)."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open("/dev/kmsg", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = None

    def say(self, line: str) -> None:
        for part in line.splitlines() or [""]:
            record = f"<6>{part}"[:1000].encode(errors="replace")
            if self._fd is not None:
                try:
                    os.write(self._fd, record)
                    continue
                except OSError:
                    pass
            os.write(2, part.encode(errors="replace") + b"\n")


def _end_every_process(grace: float = 1.0) -> None:
    """SIGTERM, then SIGKILL, to every process left (all are PID 1's children or orphans re-parented
    to it), each given ``grace`` seconds; returns as soon as none is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(OSError):
            os.kill(-1, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return  # nothing is left
            if pid == 0:
                time.sleep(0.05)


def _finish(code: int, args: KernelArgs, say: Callable[[str], None]) -> None:
    """The machine's last act: power off, halt or reboot (never returns)."""
    with_halt = args.halt_on_shutdown
    if code == EXIT_POWEROFF:
        how, cmd = ("halting", _RB_HALT_SYSTEM) if with_halt else ("powering off", _RB_POWER_OFF)
    elif code == EXIT_REBOOT:
        how, cmd = "rebooting", _RB_AUTOBOOT
    else:
        how, cmd = "rebooting in 10 s", _RB_AUTOBOOT
    say(f"ichor-metal: {how}")
    _end_every_process()
    if cmd == _RB_AUTOBOOT and code != EXIT_REBOOT:
        time.sleep(9)
    _libc.sync()
    if code == EXIT_REBOOT:
        # machined loaded the next boot for kexec (Talos's KexecPrepare): jump straight into it; a
        # refused jump falls through to the firmware's reboot.
        from ichor.machinery import kexec

        if kexec.is_loaded():
            say("ichor-metal: kexec into the loaded kernel")
            _libc.reboot(kexec.LINUX_REBOOT_CMD_KEXEC)
            say(
                f"ichor-metal: kexec failed ({os.strerror(ctypes.get_errno())}): rebooting through the firmware"
            )
    while True:
        _libc.reboot(cmd)
        time.sleep(1)


def _run_machined(args: KernelArgs, out_fd: int) -> None:
    """The child: apply ``ip=``, then machined on the metal platform. Never returns."""
    code = 1
    try:
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGPWR):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        gc.disable()  # while the stack imports: machined's entry point freezes and re-enables it
        from ichor.machinery import codecache

        codecache.install()
        from ichor.machined import _metal_boot

        code = _metal_boot.run(args)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _supervise(
    args: KernelArgs,
    kmsg: _Kmsg,
    beside: Callable[[], object],
    child_main: Callable[[KernelArgs, int], None] = _run_machined,
) -> int:
    """Start machined (``child_main`` in a forked child, its console on the fd it is given), run
    ``beside`` in a thread meanwhile, reap everything, forward signals; machined's exit code."""
    read_fd, write_fd = os.pipe()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPWR, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    child = os.fork()
    if child == 0:
        os.close(read_fd)
        child_main(args, write_fd)
        os._exit(1)
    os.close(write_fd)
    kmsg.say(f"ichor-metal: machined started (pid {child})")
    # After the fork: a thread running at fork time would be missing, locks and all, in the child.
    threading.Thread(target=beside, name="coldplug", daemon=True).start()
    selector = selectors.DefaultSelector()
    selector.register(read_fd, selectors.EVENT_READ, "console")
    selector.register(wake_r, selectors.EVENT_READ, "signal")
    pending = b""
    status: int | None = None
    while status is None:
        for key, _ in selector.select(timeout=5.0):
            if key.data == "console":
                chunk = os.read(read_fd, 65536)
                if not chunk:
                    selector.unregister(read_fd)
                    continue
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    kmsg.say(line.decode(errors="replace"))
            else:
                for signum in os.read(wake_r, 512):
                    # Ctrl-Alt-Del (SIGINT), power button (SIGPWR) and SIGTERM all mean a clean stop.
                    if signum in (signal.SIGTERM, signal.SIGINT, signal.SIGPWR):
                        kmsg.say(f"ichor-metal: {signal.Signals(signum).name}: asking machined to stop")
                        os.kill(child, signal.SIGTERM)
        # Reap every zombie: machined's and the orphans the kernel hands to PID 1.
        while True:
            try:
                pid, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == child:
                status = os.waitstatus_to_exitcode(wstatus)
    if pending:
        kmsg.say(pending.decode(errors="replace"))
    return status


def main() -> int:
    kmsg = _Kmsg()
    say = kmsg.say
    args = KernelArgs({})
    try:
        say(MARKER)
        if os.getpid() != 1:
            say(
                "ichor-metal: not PID 1; run machined directly (python -m ichor.machined) off the metal platform"
            )
            return 1
        mount_pseudo(say)
        kmsg = _Kmsg()  # /dev may have been mounted just now
        say = kmsg.say
        args = KernelArgs.from_cmdline(Path("/proc/cmdline").read_text())
        for problem in args.problems:
            say(f"ichor-metal: {problem}")
        if args.platform not in (None, "metal"):
            say(f"ichor-metal: talos.platform={args.platform} is not supported here; running as metal")
        # Coldplug runs while machined imports its stack: probing disks and links sleeps a lot
        # (SATA link detection), importing is CPU; machined waits for the links it needs.
        code = _supervise(args, kmsg, lambda: coldplug_then_mark(say))
        say(f"ichor-metal: machined exited with code {code}")
    except BaseException as err:  # PID 1 never exits: anything unexpected is a fatal reboot
        for line in traceback.format_exception(err):
            say(line.rstrip())
        code = 1
    _finish(code, args, say)
    return code  # unreachable: _finish reboots


if __name__ == "__main__":
    sys.exit(main())
