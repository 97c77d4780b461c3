"""Upgrade wall time of one VM node beside a plain reboot of the same node, in the same run (issue 23).

Run (root; holds ``/tmp/ichor-heavy.lock`` itself, like ``benchmarks/boot.py``):
``.venv/bin/python benchmarks/upgrade.py [--runs N]``

One QEMU node (TCG, UEFI, 1.5 GiB, 1 vCPU) installed to disk as ``tests/test_e2e_vm_upgrade.py``
does, with the same helpers (``tests/vm_helpers.py``): the imager's kernel and initramfs boot into
maintenance mode on a tap in a network namespace made here, ``apply-config --insecure`` installs v1
(the image's own version) to ``/dev/vda``, QEMU restarts from the disk, the node is bootstrapped
(one etcd member). A ``docker-registry`` on the namespace's bridge holds the v2 installer (``python
-m ichor.imager installer --version v1.7.7-ichor.2``); the node's config names it as its
``ghcr.io`` mirror. Then, measured with the wall clock from the command's start:

1. **reboot**: ``talosctl reboot --wait`` (an API reboot: Ichor reboots by kexec, as Talos does);
2. **upgrade**: ``talosctl upgrade --image ghcr.io/siderolabs/installer:<v2> --preserve=true --wait``
   (written to the other slot, kexec into it on trial, blessed).

"Back" means, in this order, each asked every second after the command returned until it holds:
``talosctl version`` answers; ``service etcd`` reports ``HEALTH OK`` (etcd is the last service of
this node's boot: apid, syslogd and trustd are up before it, and the OS image has no containerd, so
containerd, cri and kubelet are skipped); ``get bootslots`` shows the expected
slot ``booted`` and ``good`` at the expected version (after the upgrade: slot B, v2, blessed; after
the reboot: slot A, v1). The version is read from the boot slot (``talosctl version``'s server Tag
said v1.7.6 on every image when this was written; since c74532c it is the image's version too). The command's own return (``--wait``: a new boot,
the machine stage ``running``) is printed too. Each "back" is rounded up by the poll (one ``talosctl``
process, about 1-2 s under TCG load). The line printed last is the ratio upgrade / reboot.

``--runs N`` (default 1) repeats reboot then upgrade; between runs ``talosctl rollback`` puts the
node back on v1 (slot A; the next upgrade writes slot B again), timed the same way and printed but
not part of the ratio. The medians are printed. Everything made here (QEMU and the registry, killed
by PID; the namespace with its bridge and tap) is removed at the end, also on Ctrl-C or SIGTERM. All
traffic stays inside that namespace: the node's 10.80.0.0/24 is not routed from the host.

Measured (2026-11-28, ``.venv/bin/python benchmarks/upgrade.py --runs 2``; 2 cores shared, load
average 0.37 at start, 0.88 at the end; image cache warm: the three outputs ready in 6.3 s; install
22 s, v1 up with etcd healthy 76 s after the install began)::

                                                run 1    run 2   median  ratio
    reboot: command returned                    34.7s    32.7s    33.7s  0.61x reboot
    reboot                                      55.4s    55.2s    55.3s  1.00x reboot
    upgrade: command returned                   42.0s    31.1s    36.5s  0.66x reboot
    upgrade                                     64.4s    53.0s    58.7s  1.06x reboot
    rollback (v2 -> v1): command returned           -     0.4s     0.4s  0.01x reboot
    rollback (v2 -> v1)                             -    53.9s    53.9s  0.97x reboot
    upgrade 58.7 s / reboot 55.3 s = 1.06x (2 run(s))

So an upgrade costs about one reboot plus the fetch and write of the installer (3 s in the medians,
9 s in run 1; the bless itself waits for nothing the reboot's "back" does not). On the console, every
boot's kexec to machined's "boot: slot" line took 22-25 s, and etcd then logged "Waiting for time
sync" for about 17 s although the config has ``machine.time.disabled: true`` before it became
healthy 3 s later: a third of each "back", and the first thing to look at for faster reboots
(fixed in c74532c: the time controller's first round, asking servers by name before DNS answered,
no longer holds the config that disables it).

Again after that fix (same command, load average 0.11 at start, 1.00 at the end; images ready in
7.9 s, install 23 s, v1 up with etcd healthy 60 s after the install began)::

                                                run 1    run 2   median  ratio
    reboot: command returned                    37.5s    34.4s    35.9s  0.84x reboot
    reboot                                      44.1s    41.6s    42.9s  1.00x reboot
    upgrade: command returned                   40.2s    32.3s    36.3s  0.85x reboot
    upgrade                                     47.1s    40.6s    43.9s  1.02x reboot
    rollback (v2 -> v1)                             -    42.6s    42.6s  0.99x reboot
    upgrade 43.9 s / reboot 42.9 s = 1.02x (2 run(s))

A reboot "back" 55.3 s -> 42.9 s and an upgrade 58.7 s -> 43.9 s: the 17 s etcd waited for time sync
are gone from every boot.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import vm_helpers as helpers
from cluster_helpers import json_documents

from ichor.imager._installer_image import open_installer_archive
from ichor.imager.vm import SerialLog
from ichor.machinery import proc

LOCK = "/tmp/ichor-heavy.lock"
NODE_IP, GATEWAY = "10.80.0.2", "10.80.0.1"
REGISTRY = f"{GATEWAY}:5000"
IP_ARG = f"ip={NODE_IP}::{GATEWAY}:255.255.255.0::eth0:off"
V1, V2 = "v1.7.6", "v1.7.7-ichor.2"
PATCH = (
    "machine:\n  install:\n    disk: /dev/vda\n"
    f'    extraKernelArgs: ["-console=tty0", "{IP_ARG}"]\n'
    f'  registries:\n    mirrors:\n      ghcr.io:\n        endpoints: ["http://{REGISTRY}"]\n'
    "  time:\n    disabled: true\n"
    "cluster:\n  discovery:\n    enabled: false\n"
)


def booted_slot(bootslots_json: str) -> tuple[str, str, str] | None:
    """``(slot, version, state)`` of the slot ``get bootslots -o json`` (one object per resource,
    one after another) says is booted, or None."""
    for document in json_documents(bootslots_json):
        spec: dict[str, Any] = document.get("spec") or {}
        if spec.get("booted") is True:
            return str(document["metadata"]["id"]), str(spec.get("version")), str(spec.get("state"))
    return None


def table(runs: list[dict[str, float]], baseline: str = "reboot") -> str:
    """Each timed step per run, its median and its ratio to the baseline's median."""
    keys = list(dict.fromkeys(k for run in runs for k in run))
    floor = statistics.median(run[baseline] for run in runs if baseline in run)
    lines = [f"{'':40}" + "".join(f"{f'run {i + 1}':>9}" for i in range(len(runs))) + f"{'median':>9}  ratio"]
    for key in keys:
        values = [run[key] for run in runs if key in run]
        median = statistics.median(values)
        cells = "".join(f"{run[key]:8.1f}s" if key in run else f"{'-':>9}" for run in runs)
        lines.append(f"{key:40}{cells}{median:8.1f}s  {median / floor:.2f}x {baseline}")
    return "\n".join(lines)


def _interrupt(signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt(f"signal {signum}")


class Node:
    """The installed node: ``talosctl`` against it from inside the namespace, and the waits."""

    def __init__(
        self, netns: str, work: Path, configs: Path, console: Path, alive: Callable[[], bool]
    ) -> None:
        self.netns, self.work, self.console, self.alive = netns, work, console, alive
        self.args = ("--talosconfig", str(configs / "talosconfig"), "-e", NODE_IP, "-n", NODE_IP)

    def talosctl(self, *args: str, timeout: float = 300) -> proc.Completed:
        return helpers.talosctl_in(self.netns, self.work, *self.args, *args, timeout=timeout)

    def must(self, *args: str, timeout: float = 300) -> proc.Completed:
        done = self.talosctl(*args, timeout=timeout)
        if done.exit_code != 0:
            tail = SerialLog(self.console, 0).text()[-4000:]
            raise RuntimeError(
                f"talosctl {' '.join(args)} failed:\n{done.stdout}{done.stderr}\nconsole:\n{tail}"
            )
        return done

    def back(self, tag: str, slot: str, timeout: float = 900) -> None:
        """Until the API answers, then etcd is healthy, then ``slot`` is booted and good on ``tag``:
        each asked every second until it holds (each holds from then on)."""
        deadline = time.monotonic() + timeout
        checks: list[Callable[[], bool]] = [
            lambda: self.talosctl("version", timeout=60).exit_code == 0,
            lambda: "HEALTH   OK" in self.talosctl("service", "etcd", timeout=60).stdout,
            lambda: (
                booted_slot(self.talosctl("get", "bootslots", "-o", "json", timeout=60).stdout)
                == (slot, tag, "good")
            ),
        ]
        for check in checks:
            while not check():
                if time.monotonic() > deadline or not self.alive():
                    raise RuntimeError(
                        f"node not back on {tag} within {timeout:g} s (QEMU alive: {self.alive()})"
                    )
                time.sleep(1)

    def timed(self, run: dict[str, float], name: str, command: tuple[str, ...], tag: str, slot: str) -> None:
        started = time.monotonic()
        self.must(*command, timeout=1800)
        run[f"{name}: command returned"] = time.monotonic() - started
        self.back(tag, slot)
        run[name] = time.monotonic() - started
        print(
            f"  {name}: command {run[f'{name}: command returned']:.1f} s, back {run[name]:.1f} s", flush=True
        )


def measure(work: Path, images: dict[str, Path], runs: int) -> list[dict[str, float]]:
    results: list[dict[str, float]] = []
    with (
        helpers.vm_netns("ichor-upbench", GATEWAY) as netns,
        helpers.serve_registry(netns, REGISTRY, work / "registry"),
    ):
        helpers.push_installer(
            netns, open_installer_archive(images["installer"], work / "v2-layout").layout, REGISTRY, V2
        )
        configs = helpers.gen_node_config(work, "upgrade-bench", NODE_IP, PATCH)
        spec = helpers.disk_vm_spec(work, images["kernel"], images["initrd"], IP_ARG)
        started = time.monotonic()
        from_disk = helpers.install_to_disk(
            netns, work, spec, configs / "controlplane.yaml", NODE_IP, work / "serial-2.log"
        )
        print(f"installed v1 in {time.monotonic() - started:.0f} s", flush=True)
        vm = proc.start(
            ["ip", "netns", "exec", netns, "nice", "-n", "10", *from_disk], output=work / "qemu.log"
        )
        try:
            node = Node(netns, work, configs, work / "serial-2.log", lambda: vm.poll() is None)
            helpers.wait_api(node.talosctl, detail=lambda: SerialLog(node.console, 0).text()[-3000:])
            helpers.bootstrap(node.talosctl)
            helpers.etcd_healthy(node.talosctl)
            node.back(V1, "A")
            print(
                f"v1 up, etcd healthy {time.monotonic() - started:.0f} s after the install began", flush=True
            )
            image = f"ghcr.io/siderolabs/installer:{V2}"
            for index in range(runs):
                run: dict[str, float] = {}
                if index:
                    node.timed(run, "rollback (v2 -> v1)", ("rollback",), V1, "A")
                node.timed(run, "reboot", ("reboot", "--wait"), V1, "A")
                node.timed(run, "upgrade", ("upgrade", "--image", image, "--preserve=true", "--wait",
                                            "--timeout", "20m"), V2, "B")  # fmt: skip
                results.append(run)
            print(node.talosctl("service").stdout)
        finally:
            vm.stop(timeout=5)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=1, help="reboot + upgrade pairs (a rollback between)")
    args = parser.parse_args()
    reason = helpers.vm_skip_reason() or next(
        (f"needs {t}" for t in ("docker-registry", "skopeo") if shutil.which(t) is None), None
    )
    if reason is not None:
        print(f"benchmarks/upgrade.py: {reason}", file=sys.stderr)
        return 2
    if os.environ.get("ICHOR_HEAVY_LOCKED") != "1":
        os.environ["ICHOR_HEAVY_LOCKED"] = "1"
        os.execvp("flock", ["flock", LOCK, sys.executable, *sys.argv])
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="ichor-upgrade-bench-"))
    try:
        started = time.monotonic()
        out = work / "image"
        images = {
            "kernel": helpers.build_output(out, "kernel", "vmlinuz-amd64"),
            "initrd": helpers.build_output(out, "initramfs", "initramfs-amd64.xz"),
            "installer": helpers.build_output(
                out / "v2", "installer", "installer-amd64.tar", "--version", V2
            ),
        }
        print(
            f"images (kernel, initramfs, v2 installer) ready in {time.monotonic() - started:.1f} s",
            flush=True,
        )
        runs = measure(work, images, args.runs)
        print(f"\nload average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(table(runs))
        reboot = statistics.median(run["reboot"] for run in runs)
        upgrade = statistics.median(run["upgrade"] for run in runs)
        print(
            f"upgrade {upgrade:.1f} s / reboot {reboot:.1f} s = {upgrade / reboot:.2f}x ({len(runs)} run(s))"
        )
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
