"""The metal platform's host-testable parts: kernel arguments, /sys/block disks, coldplug aliases."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ichor.machined.blockdevices import list_disks
from ichor.machined.kernelargs import KernelArgs, parse, parse_ip
from ichor.machined.metal import MOUNTS, coldplug_aliases
from ichor.machined.platform import Platform


def test_kernel_args_keep_repeated_keys_and_report_unknown_talos_args() -> None:
    args = KernelArgs.from_cmdline(
        "BOOT_IMAGE=/A/vmlinuz console=ttyS0 console=tty0 talos.platform=metal talos.config=http://10.5.0.1:8080/c.yaml "
        'talos.bogus=1 talos.shutdown=halt quoted="a b" slab_nomerge\n'
    )
    assert args.consoles == ["ttyS0", "tty0"]
    assert args.platform == "metal" and args.config_url == "http://10.5.0.1:8080/c.yaml"
    assert args.halt_on_shutdown
    assert args.unknown == ["talos.bogus"]
    assert args.problems == ["unknown kernel argument talos.bogus=1 ignored"]
    assert parse('quoted="a b" x')["quoted"] == ["a b"]
    assert parse("slab_nomerge")["slab_nomerge"] == [""]


def test_ip_argument_static_forms_and_dhcp() -> None:
    ip = parse_ip("10.5.0.2::10.5.0.1:255.255.255.0:node1:eth0:off:10.5.0.1::10.5.0.1")
    assert ip is not None
    assert (ip.address, ip.gateway, ip.hostname, ip.device, ip.nameservers, ip.ntp) == (
        "10.5.0.2/24", "10.5.0.1", "node1", "eth0", ("10.5.0.1",), "10.5.0.1",
    )  # fmt: skip
    assert parse_ip("10.5.0.3:::24") is not None and parse_ip("10.5.0.3:::24").address == "10.5.0.3/24"  # type: ignore[union-attr]
    assert parse_ip("10.5.0.3") is not None and parse_ip("10.5.0.3").address == "10.5.0.3/32"  # type: ignore[union-attr]
    assert parse_ip("dhcp") is None and parse_ip(":::::eth0:dhcp") is None
    with pytest.raises(ValueError):
        parse_ip("10.5.0.300::::")
    bad = KernelArgs.from_cmdline("ip=10.5.0.300:::24 ip=10.5.0.4:::24")
    assert bad.ip is not None and bad.ip.ip == "10.5.0.4"
    assert any("ip=10.5.0.300:::24 ignored" in p for p in bad.problems)


def _disk(root: Path, name: str, sectors: int, **files: str) -> None:
    entry = root / name
    (entry / "device").mkdir(parents=True)
    (entry / "queue").mkdir()
    (entry / "size").write_text(f"{sectors}\n")
    for rel, text in files.items():
        path = entry / rel.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def test_disks_come_from_sys_block_without_loop_or_ram(tmp_path: Path) -> None:
    _disk(
        tmp_path,
        "vda",
        12582912,
        serial="ichor-0",
        queue__rotational="1",
        device__modalias="virtio:d00000002v00001AF4",
    )
    _disk(tmp_path, "nvme0n1", 2097152, device__model="QEMU NVMe Ctrl", device__serial="deadbeef", ro="1")
    _disk(tmp_path, "loop0", 100)
    _disk(tmp_path, "ram0", 100)
    disks = list_disks(tmp_path)
    assert [d.device_name for d in disks] == ["/dev/nvme0n1", "/dev/vda"]
    nvme, vda = disks
    assert (nvme.type, nvme.model, nvme.serial, nvme.size, nvme.readonly) == (
        "NVME", "QEMU NVMe Ctrl", "deadbeef", 2097152 * 512, True,
    )  # fmt: skip
    assert (vda.type, vda.serial, vda.modalias, vda.size) == (
        "HDD",
        "ichor-0",
        "virtio:d00000002v00001AF4",
        6 * 2**30,
    )
    assert list_disks(tmp_path / "missing") == []


def test_coldplug_reads_every_modalias_under_sys_devices(tmp_path: Path) -> None:
    (tmp_path / "pci0000:00/0000:00:02.0/virtio0").mkdir(parents=True)
    (tmp_path / "pci0000:00/0000:00:02.0/modalias").write_text("pci:v00001AF4d00001000sv\n")
    (tmp_path / "pci0000:00/0000:00:02.0/virtio0/modalias").write_text("virtio:d00000001v00001AF4\n")
    (tmp_path / "platform/empty").mkdir(parents=True)
    (tmp_path / "platform/empty/modalias").write_text("\n")
    assert coldplug_aliases(tmp_path) == {"pci:v00001AF4d00001000sv", "virtio:d00000001v00001AF4"}


def test_metal_mounts_cgroup2_and_talos_pseudo_filesystems_and_owns_its_kernel() -> None:
    targets = {target: (fstype, data) for _, target, fstype, _, data in MOUNTS}
    assert targets["/sys/fs/cgroup"] == ("cgroup2", "nsdelegate,memory_recursiveprot")
    assert {"/proc", "/sys", "/dev/pts", "/dev/shm", "/run", "/system", "/tmp", "/sys/fs/bpf"} <= set(targets)
    assert Platform.METAL.owns_kernel and Platform.CONTAINER.owns_kernel and not Platform.PROCESS.owns_kernel
    assert Platform.METAL.mode == "metal"


_SUPERVISE = r"""
import ctypes, json, os, signal, sys, time
from ichor.machined import metal
from ichor.machined.kernelargs import KernelArgs

ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans come to us, as to PID 1

class Kmsg:
    lines = []
    def say(self, line):
        self.lines.append(line)

def child(args, fd):
    os.dup2(fd, 1)
    if os.fork() == 0:
        if os.fork() == 0:       # orphaned at once, exits in 0.2 s: a zombie only PID 1 can reap
            time.sleep(0.2)
            os._exit(0)
        os._exit(0)
    os.wait()
    print("machined says hello", flush=True)
    if sys.argv[1] == "term":
        signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
        time.sleep(30)
    time.sleep(0.8)
    os._exit(75)

beside = []
kmsg = Kmsg()
if sys.argv[1] == "term":
    signal.setitimer(signal.ITIMER_REAL, 0.8)
    signal.signal(signal.SIGALRM, lambda *a: os.kill(os.getpid(), signal.SIGTERM))
code = metal._supervise(KernelArgs({}), kmsg, lambda: beside.append(1), child_main=child)
def zombie_children():
    found = []
    for p in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            found.append(p)
    return found

zombies = zombie_children()
print(json.dumps({"code": code, "beside": beside, "lines": kmsg.lines, "zombies": zombies}))
"""


@pytest.mark.parametrize(("how", "code"), [("exit", 75), ("term", 0)])
def test_pid1_supervisor_copies_the_console_reaps_orphans_and_forwards_sigterm(how: str, code: int) -> None:
    out = subprocess.run([sys.executable, "-c", _SUPERVISE, how], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["code"] == code
    assert result["beside"] == [1], "coldplug ran beside machined"
    assert "machined says hello" in result["lines"]
    assert result["zombies"] == [], "the orphan was reaped"
    if how == "term":
        assert any("SIGTERM: asking machined to stop" in line for line in result["lines"])


def test_talos_config_url_gets_talos_variables() -> None:
    from ichor.machined._metal_boot import config_url

    url = config_url(
        "http://10.5.0.1/c?u=${uuid}&s=${serial}&m=${mac}&h=${hostname}&c=${code}",
        uuid="4c4c4544-0031", serial="S1", mac="52:54:00:49:43:02", hostname="node1",
    )  # fmt: skip
    assert url == "http://10.5.0.1/c?u=4c4c4544-0031&s=S1&m=52:54:00:49:43:02&h=node1&c=${code}"


def test_talos_config_fetch_retries_saying_why_then_gives_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import http.server
    import threading

    from ichor.machined._metal_boot import fetch_config

    assert not fetch_config("http://127.0.0.1:9/none.yaml", tmp_path / "c.yaml", deadline_s=0.3, sleep=0.1)
    said = capsys.readouterr().out
    assert (
        "failed" in said
        and "retrying" in said
        and "giving up on talos.config=http://127.0.0.1:9/none.yaml" in said
    )

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"version: v1alpha1\n")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/c.yaml"
        assert fetch_config(url, tmp_path / "c.yaml", deadline_s=5)
        assert (tmp_path / "c.yaml").read_text() == "version: v1alpha1\n"
    finally:
        server.shutdown()
        server.server_close()


def test_kmsg_records_read_as_talos_dmesg_lines() -> None:
    from ichor.machined.kmsg import format_record

    line = format_record(b"6,339,5140900,-;ichor-metal: PID 1 up\n SUBSYSTEM=x\n", boot_time=1_700_000_000.0)
    assert line == b"kern:    info: [2023-11-14T22:13:25.140900Z]: ichor-metal: PID 1 up\n"
    assert format_record(b"30,1,0,-;daemon says\n", 0.0).startswith(b"daemon:    info: [1970-01-01T00:00:00")
    assert format_record(b"garbage", 0.0) == b"garbage\n"


def test_dev_links_give_programs_their_stdin_by_name(tmp_path: Path) -> None:
    """devtmpfs has no /dev/stdin: `nft -f -` failed on metal with "Could not open file /dev/stdin"."""
    from ichor.machined.metal import dev_links

    (tmp_path / "stdout").symlink_to("/elsewhere")
    dev_links(tmp_path)
    dev_links(tmp_path)  # again: what exists stays
    assert {p.name: str(p.readlink()) for p in tmp_path.iterdir()} == {
        "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/elsewhere", "stderr": "/proc/self/fd/2"}  # fmt: skip


_END_EVERY = r"""
import json, os, subprocess, time
from ichor.machined import metal

assert os.getpid() == 1, "not PID 1 of a new PID namespace"
quick = subprocess.Popen(["sleep", "30"])
stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 30"])
time.sleep(0.2)
started = time.monotonic()
metal._end_every_process(grace=0.5)
took = time.monotonic() - started
try:
    os.waitpid(-1, os.WNOHANG)
    left = True
except ChildProcessError:
    left = False
print(json.dumps({"took": took, "left": left}))
"""


def test_pid1_ends_every_process_and_stops_waiting_once_none_is_left() -> None:
    """PID 1's last act before reboot(2): SIGTERM, then SIGKILL for what ignores it, returning as soon
    as nothing is left (it used to sleep 1 s after each). Run as PID 1 of a PID namespace of its own,
    so ``kill(-1)`` reaches only the processes it started."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and util-linux's unshare (a PID namespace)")
    out = subprocess.run(["unshare", "--pid", "--fork", sys.executable, "-c", _END_EVERY],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert not result["left"], "a process outlived SIGKILL"
    assert 0.4 < result["took"] < 1.2, result  # the TERM grace for the stubborn one, no KILL grace
