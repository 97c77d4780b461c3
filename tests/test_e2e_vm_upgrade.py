"""V3 on one VM: install v1 -> ``upgrade --preserve`` to v2 from a registry through the node's mirror ->
blessed on slot B -> ``rollback`` -> v1 on slot A; META written and read back across reboots; then
``upgrade --stage`` to v2, performed at the next boot and blessed on slot B; then the talos#10364
case as issue 23 words it: v1 -> v2 (good) -> v3 whose kernel cannot boot, written over v1 in slot
A; after its three tries the node boots v2 (the last good slot), not v1 and not "the other slot".

One QEMU (TCG, UEFI, 1.5 GiB) on a tap in a network namespace the test makes, with a registry
(``docker-registry``) on the bridge's address holding the installer images: v2 built by ``python -m
ichor.imager installer --version v1.7.7-ichor.2`` (what ``imager installer`` and ``--push``
produce) and a broken v3 whose initramfs is junk (the kernel panics; ``panic=10`` in the node's
``extraKernelArgs`` reboots it). The node's config names the registry as its ``ghcr.io`` mirror and
the upgrades ask for ``ghcr.io/siderolabs/installer:<tag>``. The first boot is the imager's kernel
and initramfs into maintenance mode, where ``apply-config`` installs to ``/dev/vda``; QEMU
(``-no-reboot``) exits on that reboot and is started again from the disk alone, without
``-no-reboot``, with an i6300esb watchdog. Every later reboot asked through the API is a kexec, as
Talos's are (machined loads the slot GRUB would boot and does GRUB's counting step itself; checked on
the console for the upgrade, the rollback and the broken upgrade's first try); the broken kernel's
panics reboot through OVMF and GRUB's own counting. Each trial boot arms the watchdog without a
``WatchdogTimerConfig`` (2 min) and the bless disarms it (both console lines checked on the v2 trial).

Checked as a user sees it: ``get bootslots`` (version, state, tries, booted), ``get metakeys``,
``read /proc/cmdline`` (``ichor.slot=``), Talos 1.7.6's refusal of an upgrade of a single etcd member
without ``--preserve`` (its whole text, checked under the etcd upgrade mutex) leaving the slots, the
member and its health as they were (three reads, a few seconds; the ``--preserve`` upgrade that
follows took the etcd upgrade mutex 41 s after the refusal's, inside its 60 s lease), the registry's access log (the node fetched through the mirror), the
console lines of every transition. v2 also carries the Proprietary Kernel Modules procedure's
out-of-tree ``hello.ko`` (built here from source, ``tests/hello_module.py``) as a system extension,
and the config asks for it in ``machine.kernel.modules``: on v1 ``get waits`` names it with
modprobe's reason; after ``upgrade --preserve=true`` to v2 it is in ``/proc/modules`` with its
parameter (budget 60 s after the bless); after the rollback to v1 it is gone again. v2 is also built
with ``--rootfs-overlay`` (the "Customizing the Root Filesystem" procedure): its file is readable
after the upgrade and gone after the rollback. With these
checks the file took 891 s (images 17 s, upgrade to blessed 122 s, total in the VM 872 s); with the
refusal's no-change checks too, 1154 s on a host running other helpers' work (images 36 s, install 94 s,
v1 up 206 s, upgrade to blessed 217 s, rollback 116 s, broken upgrade to fallback 206 s, staged 247 s).

Time budget, measured on 2 cores (TCG, 1 vCPU) with kexec reboots, 2026-11-27: 431 s for the file
with a warm image cache and the fast tier running beside it (install 25 s, v1 up with etcd healthy
76 s, ``upgrade --preserve=true --wait`` to blessed 57 s, ``rollback`` to the API up 37 s, the broken
upgrade's three panicking tries and the fallback 95 s, ``--stage`` to blessed 84 s); 542 s in the
e2e tier beside the Kubernetes unit and the other VMs. Through the firmware (before kexec) the same
file took 974 s on an idle host (upgrade 137 s, rollback 121 s, broken 185 s, staged 235 s). The
file allows 45 min (a loaded host slows TCG 3-5x). QEMU and the registry are stopped by PID and the
namespace deleted afterwards, on failure too.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hello_module import build_hello_extension, hello_skip_reason
from vm_helpers import (
    Talosctl,
    bootstrap,
    build_output,
    disk_vm_spec,
    etcd_healthy,
    gen_node_config,
    install_to_disk,
    push_installer,
    serve_registry,
    talosctl_in,
    vm_netns,
    vm_skip_reason,
    wait_api,
)

from ichor.imager import _build
from ichor.imager._installer_image import open_installer_archive
from ichor.imager.vm import SerialLog
from ichor.images import access_log
from ichor.machinery import proc

pytestmark = [pytest.mark.e2e, pytest.mark.vm, pytest.mark.root, pytest.mark.slow]

NODE_IP = "10.79.0.2"
GATEWAY = "10.79.0.1"
REGISTRY = f"{GATEWAY}:5000"
IP_ARG = f"ip={NODE_IP}::{GATEWAY}:255.255.255.0::eth0:off"
V1 = "v1.7.6"
V2 = "v1.7.7-ichor.2"
V3 = "v1.7.8-broken"
OVERLAY_FILE = "/etc/ichor/v2-overlay.txt"
"""A file only v2's installer carries (``imager --rootfs-overlay``): there after the upgrade to v2,
gone after the rollback to v1."""
OVERLAY_TEXT = "added by imager --rootfs-overlay to v1.7.7-ichor.2\n"


def _skip_reason() -> str | None:
    reason = vm_skip_reason()
    if reason is not None:
        return reason
    reason = hello_skip_reason(_build._Builder(_build.BuildOptions(output=Path(os.devnull))).kernel()[1])
    if reason is not None:
        return reason
    missing = next((t for t in ("unsquashfs", "docker-registry", "skopeo") if shutil.which(t) is None), None)
    return f"needs {missing} (scripts/os-packages.txt)" if missing else None


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("image")
    started = time.monotonic()
    kernel = build_output(out, "kernel", "vmlinuz-amd64")
    initrd = build_output(out, "initramfs", "initramfs-amd64.xz")
    # v2 carries the Proprietary Kernel Modules procedure's module, built here from source against
    # the image's kernel headers and packed as a system extension (v1 has no such module).
    _root, release = _build._Builder(_build.BuildOptions(output=Path(os.devnull))).kernel()
    hello = build_hello_extension(tmp_path_factory.mktemp("hello"), release)
    # ... and a file of the "Customizing the Root Filesystem" procedure (001:250-298), as a top layer.
    overlay = tmp_path_factory.mktemp("overlay")
    (overlay / Path(OVERLAY_FILE).parent.relative_to("/")).mkdir(parents=True)
    (overlay / OVERLAY_FILE.lstrip("/")).write_text(OVERLAY_TEXT)
    installer = build_output(out / "v2", "installer", "installer-amd64.tar", "--version", V2,
                             "--system-extension-image", str(hello), "--rootfs-overlay", str(overlay))  # fmt: skip
    print(f"images built in {time.monotonic() - started:.0f} s")
    return {"kernel": kernel, "initrd": initrd, "installer": installer}


def _canonical(document: dict[str, object]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _broken_installer(work: Path, kernel: Path) -> Path:
    """An installer image layout (Ichor's config and top layer) whose initramfs is junk."""
    blobs = work / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def blob(data: bytes) -> dict[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in (("usr/install/amd64/vmlinuz", kernel.read_bytes()),
                           ("usr/install/amd64/initramfs.xz", b"not an initramfs\n" * 64)):  # fmt: skip
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    layer = gzip.compress(raw.getvalue(), compresslevel=1, mtime=0)
    diff_id = "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()
    config = blob(_canonical({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": ["/usr/bin/python3.11", "-I", "-m", "ichor.installer"],
                   "Labels": {"org.opencontainers.image.version": V3}},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }))  # fmt: skip
    manifest = blob(_canonical({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **blob(layer)}],
    }))  # fmt: skip
    (work / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (work / "index.json").write_bytes(_canonical({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", **manifest,
         "annotations": {"org.opencontainers.image.ref.name": V3}}]}))  # fmt: skip
    return work


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A namespace with the VM's bridge and a registry on the bridge's address."""
    with (
        vm_netns("ichor-upg", GATEWAY) as netns,
        serve_registry(netns, REGISTRY, tmp_path / "registry") as log,
    ):
        yield netns, log


class Console:
    """The serial log of the relaunched VM, read from a mark on (one file for every later boot)."""

    def __init__(self, path: Path) -> None:
        self.log = SerialLog(path, time.monotonic())
        self.mark = 0

    def step(self) -> None:
        self.mark = len(self.log.text())

    def wait(self, pattern: str, timeout: float, alive: object) -> float:
        started = time.monotonic()
        regex = re.compile(pattern)
        while time.monotonic() - started < timeout:
            if regex.search(self.log.text()[self.mark :]):
                return time.monotonic() - started
            assert alive(), "QEMU exited"  # type: ignore[operator]
            time.sleep(0.5)
        tail = "\n".join(self.log.text()[self.mark :].splitlines()[-60:])
        raise AssertionError(f"no {pattern!r} on the console within {timeout:g} s:\n{tail}")


def test_upgrade_bless_rollback_meta_and_a_broken_upgrade_falling_back(
    images: dict[str, Path], registry: tuple[str, Path], tmp_path: Path
) -> None:
    netns, registry_log = registry
    figures: dict[str, float] = {}
    t0 = time.monotonic()
    push_installer(
        netns, open_installer_archive(images["installer"], tmp_path / "v2-layout").layout, REGISTRY, V2
    )
    push_installer(netns, _broken_installer(tmp_path / "v3-layout", images["kernel"]), REGISTRY, V3)
    figures["push"] = time.monotonic() - t0

    configs = gen_node_config(
        tmp_path,
        "upgrade-vm",
        NODE_IP,
        "machine:\n  install:\n    disk: /dev/vda\n"
        f'    extraKernelArgs: ["-console=tty0", "{IP_ARG}", "panic=10"]\n'
        f'  registries:\n    mirrors:\n      ghcr.io:\n        endpoints: ["http://{REGISTRY}"]\n'
        "  time:\n    disabled: true\n"
        "  kernel:\n    modules:\n      - name: hello\n        parameters: [greeting=upgraded]\n"
        "cluster:\n  discovery:\n    enabled: false\n",
    )
    node = ("--talosconfig", str(configs / "talosconfig"), "-e", NODE_IP, "-n", NODE_IP)

    def talosctl(*args: str, timeout: float = 300) -> proc.Completed:
        return talosctl_in(netns, tmp_path, *node, *args, timeout=timeout)

    spec = disk_vm_spec(tmp_path, images["kernel"], images["initrd"], IP_ARG)
    serial1, serial2 = spec.serial, tmp_path / "serial-2.log"
    relaunched: proc.Background | None = None
    try:
        # --- install v1 from maintenance mode; the node reboots from its disk, slot A ----------------
        second = install_to_disk(netns, tmp_path, spec, configs / "controlplane.yaml", NODE_IP, serial2)
        figures["install"] = time.monotonic() - t0
        second += ["-device", "i6300esb"]  # a watchdog for the trials (QEMU's action: reset)
        relaunched = proc.start(["ip", "netns", "exec", netns, "nice", "-n", "10", *second],
                                output=tmp_path / "qemu-2.log")  # fmt: skip
        running = relaunched
        alive = lambda: running.poll() is None  # noqa: E731
        console = Console(serial2)
        console.wait(rf"boot: slot A \({V1}\), good", 600, alive)

        def api_up() -> float:
            return wait_api(talosctl, detail=lambda: console.log.text()[-3000:])

        api_up()
        bootstrap(talosctl)
        etcd_healthy(talosctl)
        figures["v1 up, etcd healthy"] = time.monotonic() - t0

        slots = talosctl("get", "bootslots")
        assert slots.exit_code == 0, slots.stderr
        assert re.search(rf"\bA\s+\d+\s+{re.escape(V1)}\s+good\s+0\s+true", slots.stdout), slots.stdout
        assert re.search(r"\bB\s+\d+\s+empty\s+0\s+false", slots.stdout), slots.stdout
        _no_hello(talosctl)  # v1 has no such module: named in waits, not loaded
        wrote = talosctl("meta", "write", "0x0c", "survives-reboots")
        assert wrote.exit_code == 0, wrote.stderr
        keys = talosctl("get", "metakeys")
        assert re.search(r"0x0c\s+\d+\s+survives-reboots", keys.stdout), keys.stdout

        # --- Talos's refusal: one etcd member and no --preserve ---------------------------------------
        image2 = f"ghcr.io/siderolabs/installer:{V2}"
        refused = talosctl("upgrade", "--image", image2, "--wait=false", timeout=900)
        assert refused.exit_code != 0
        assert ("only 1 etcd member found; assuming this is not an HA setup and refusing to upgrade; "
                "if this is a single-node cluster, use --preserve to upgrade" in refused.stderr), refused.stderr  # fmt: skip
        # Refused before anything changed: the slots, the one etcd member, its health (no boot needed).
        unchanged = talosctl("get", "bootslots")
        assert re.search(rf"\bA\s+\d+\s+{re.escape(V1)}\s+good\s+0\s+true", unchanged.stdout), (
            unchanged.stdout
        )
        assert re.search(r"\bB\s+\d+\s+empty\s+0\s+false", unchanged.stdout), unchanged.stdout
        members = talosctl("etcd", "members")
        assert members.exit_code == 0 and len(members.stdout.strip().splitlines()) == 2, members.stdout
        assert "HEALTH   OK" in talosctl("service", "etcd").stdout
        # The checks ran under the etcd upgrade mutex (TryLock); the --preserve upgrade below takes it
        # again, which a key left behind would fail ("Locked by another session") for its 60 s lease.
        served = [e for e in access_log(registry_log) if e.client == NODE_IP and "/manifests/" in e.path]
        assert served and served[0].path == f"/v2/siderolabs/installer/manifests/{V2}", access_log(
            registry_log
        )

        # --- upgrade --preserve to v2: slot B on trial, rebooted into, blessed -----------------------
        console.step()
        started = time.monotonic()
        # The seeds' deploy step (001:780) as written: `--preserve=true`.
        upgraded = talosctl(
            "upgrade", "--image", image2, "--preserve=true", "--wait", "--timeout", "20m", timeout=1500
        )
        assert upgraded.exit_code == 0, upgraded.stdout + upgraded.stderr
        console.wait(rf"upgrade: {re.escape(V2)} written to slot B, on trial for 3 boots", 1, alive)
        console.wait(rf"kexec: loaded the next boot \(boot: slot B \({re.escape(V2)}\) on trial, 2 tries left\): "
                     "rebooting without the firmware", 1, alive)  # fmt: skip
        console.wait("ichor-metal: kexec into the loaded kernel", 1, alive)
        console.wait(rf"boot: slot B \({re.escape(V2)}\) on trial, 2 tries left;", 1, alive)
        console.wait(rf"bless: {re.escape(V2)} \(slot B\) is good", 600, alive)
        figures["upgrade to blessed"] = time.monotonic() - started
        # the trial's hang detector: the VM's watchdog armed without a document, disarmed by the bless
        console.wait(r"watchdog /dev/watchdog0 armed: timeout 2m0s, fed every 40s", 1, alive)
        console.wait(r"watchdog /dev/watchdog0 disarmed", 60, alive)
        slots = talosctl("get", "bootslots")
        assert re.search(rf"\bB\s+\d+\s+{re.escape(V2)}\s+good\s+0\s+true", slots.stdout), slots.stdout
        assert re.search(rf"\bA\s+\d+\s+{re.escape(V1)}\s+installed\s+0\s+false", slots.stdout), slots.stdout
        cmdline = talosctl("read", "/proc/cmdline")
        assert "ichor.slot=B" in cmdline.stdout and "panic=10" in cmdline.stdout, cmdline.stdout
        # The node reports the version it was upgraded to, as a Talos node reports its installer's.
        version = talosctl("version")
        server = version.stdout.partition("Server:")[2]
        assert re.search(rf"Tag:\s+{re.escape(V2)}\s", server), version.stdout
        keys = talosctl("get", "metakeys")
        assert "survives-reboots" in keys.stdout and "0x06" not in keys.stdout, (
            keys.stdout
        )  # fallback tag dropped
        _hello_loaded(talosctl, console.log)  # the module v2's extension carries, with its parameter
        overlaid = talosctl("read", OVERLAY_FILE)
        assert overlaid.exit_code == 0 and overlaid.stdout == OVERLAY_TEXT, overlaid.stdout + overlaid.stderr

        # --- rollback: back on v1, slot A ------------------------------------------------------------
        console.step()
        started = time.monotonic()
        rolled = talosctl("rollback")
        assert rolled.exit_code == 0, rolled.stderr
        console.wait(
            rf"rolling back from {re.escape(V2)} \(slot B\) to {re.escape(V1)} \(slot A\)", 60, alive
        )
        console.wait(rf"kexec: loaded the next boot \(boot: slot A \({re.escape(V1)}\), good\)", 300, alive)
        console.wait(rf"(?<!\()boot: slot A \({re.escape(V1)}\), good(?!\))", 900, alive)  # machined's line
        api_up()
        figures["rollback to API up"] = time.monotonic() - started
        etcd_healthy(talosctl)
        slots = talosctl("get", "bootslots")
        assert re.search(rf"\bA\s+\d+\s+{re.escape(V1)}\s+good\s+0\s+true", slots.stdout), slots.stdout
        assert "ichor.slot=A" in talosctl("read", "/proc/cmdline").stdout
        assert "survives-reboots" in talosctl("get", "metakeys").stdout
        _no_hello(talosctl)  # back on an image without the module: gone
        assert talosctl("read", OVERLAY_FILE).exit_code != 0, "v1 has no overlay file"

        # --- --stage: META 7/8, the upgrade performed at the next boot, then its trial and bless ------
        console.step()
        started = time.monotonic()
        staged = talosctl("upgrade", "--image", image2, "--preserve", "--stage", "--wait=false", timeout=900)
        assert staged.exit_code == 0, staged.stderr
        console.wait(rf"upgrade to {re.escape(image2)} staged: it runs at the next boot", 60, alive)
        console.wait(rf"performing the staged upgrade to {re.escape(image2)}", 900, alive)
        console.wait("staged upgrade written: rebooting into it", 600, alive)
        console.wait(rf"bless: {re.escape(V2)} \(slot B\) is good", 900, alive)
        figures["staged upgrade to blessed"] = time.monotonic() - started
        keys = talosctl("get", "metakeys")
        assert "0x07" not in keys.stdout and "0x08" not in keys.stdout, keys.stdout
        api_up()
        etcd_healthy(talosctl)

        # --- a broken upgrade (talos#10364's opposite): v1 -> v2 good -> v3 that cannot boot; after its
        # three tries the node boots v2, the last good slot (not v1, not "the other slot") ------------
        console.step()
        started = time.monotonic()
        broken = talosctl("upgrade", "--image", f"ghcr.io/siderolabs/installer:{V3}", "--preserve", "--wait=false",
                          timeout=900)  # fmt: skip
        assert broken.exit_code == 0, broken.stderr
        line = (rf"upgrade to {re.escape(V3)} \(slot A\) failed: no healthy boot in its tries; "
                r"booted the last good slot B")  # fmt: skip
        console.wait(line, 1500, alive)
        # the first try is a kexec (machined counted it); the panics reboot through OVMF and GRUB
        console.wait(rf"kexec: loaded the next boot \(boot: slot A \({re.escape(V3)}\) on trial, 2 tries left\)", 1,
                     alive)  # fmt: skip
        figures["broken upgrade to fallback"] = time.monotonic() - started
        panics = re.findall(
            r"(?m)^(?!.*end Kernel panic).*Kernel panic - not syncing.*$", console.log.text()[console.mark :]
        )
        assert len(panics) == 3, f"{len(panics)} failed boots of v3, expected 3 (GRUB's tries): {panics}"
        api_up()
        slots = talosctl("get", "bootslots")
        assert re.search(rf"\bB\s+\d+\s+{re.escape(V2)}\s+good\s+0\s+true", slots.stdout), slots.stdout
        assert re.search(rf"\bA\s+\d+\s+{re.escape(V3)}\s+failed\s+0\s+false", slots.stdout), slots.stdout
        assert "ichor.slot=B" in talosctl("read", "/proc/cmdline").stdout
        _hello_loaded(talosctl, console.log)  # v2's module again: the node runs v2

        figures["total"] = time.monotonic() - t0
    finally:
        print("figures (s): " + ", ".join(f"{k} {v:.0f}" for k, v in figures.items()))
        if relaunched is not None:
            relaunched.stop(timeout=5)
            text = SerialLog(serial2, 0).text()
            print("console digest (every transition):\n" + _digest(text))
            print(text[-8000:])
        print(SerialLog(serial1, 0).text()[-3000:])


_DIGEST = re.compile(r"\[talos\]|ichor-metal:|Traceback|Error:|task '|Kernel panic|watchdog")


def _digest(text: str, lines: int = 90) -> str:
    """The console's own lines (sequences, slots, services, failures), short enough that a CI
    excerpt of a failure shows where each boot got to."""
    kept = [line for line in text.splitlines() if _DIGEST.search(line)]
    shortened = [re.sub(r"\d{4}-\d\d-\d\dT(\d\d:\d\d:\d\d)\.\d+Z ", r"\1 ", line)[:200] for line in kept]
    return "\n".join(shortened[-lines:])


def _no_hello(talosctl: Talosctl) -> None:
    """An image without the extension: ``hello`` is not loaded, and ``get waits`` names it with
    modprobe's reason (the kernel modules controller retries it)."""
    deadline = time.monotonic() + 60
    while True:
        waits = " ".join(talosctl("get", "waits", "-o", "yaml").stdout.split())
        if 'error loading module "hello": modprobe: FATAL: Module hello not found' in waits:
            break
        assert time.monotonic() < deadline, waits
        time.sleep(3)
    modules = talosctl("read", "/proc/modules")
    assert modules.exit_code == 0 and not re.search(r"^hello ", modules.stdout, re.M), modules.stdout


def _hello_loaded(talosctl: Talosctl, log: SerialLog) -> None:
    """The Proprietary Kernel Modules procedure's end (001:780): after ``upgrade --preserve=true`` to
    the installer carrying the extension, ``machine.kernel.modules`` loaded the out-of-tree module with
    its parameter (budget 60 s): ``/proc/modules`` (tainted ``(POE)``), ``/sys/module/hello/parameters``,
    ``get extensions``, the taint in ``dmesg``."""
    deadline = time.monotonic() + 60
    modules = talosctl("read", "/proc/modules")
    while not re.search(r"^hello ", modules.stdout, re.M) and time.monotonic() < deadline:
        time.sleep(3)
        modules = talosctl("read", "/proc/modules")
    line = re.search(r"^hello .*$", modules.stdout, re.M)
    assert line is not None and line.group(0).endswith("(POE)"), modules.stdout + log.text()[-3000:]
    greeting = talosctl("read", "/sys/module/hello/parameters/greeting")
    assert greeting.stdout == "upgraded\n", greeting.stdout + greeting.stderr
    extensions = talosctl("get", "extensions", "-o", "yaml")
    assert "name: ichor-hello-module" in extensions.stdout, extensions.stdout + extensions.stderr
    dmesg = talosctl("dmesg").stdout
    assert "hello: hello, upgraded" in dmesg and "hello: loading out-of-tree module taints kernel" in dmesg
    assert 'error loading module "hello"' not in " ".join(
        talosctl("get", "waits", "-o", "yaml").stdout.split()
    )
