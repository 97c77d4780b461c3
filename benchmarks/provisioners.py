"""``cluster create`` with the container provisioner beside the process provisioner, in one run.

For each shape (``--shapes``, default 1+1 and 3+2) and each run, both provisioners create the same
cluster, in alternating order, through ``python -m ichor cluster create`` (a subprocess with its own
HOME and state dir), until it returns: etcd bootstrapped and healthy on every control plane, all
voting. Reported per provisioner: the wall time of create, the CLI's own "since create started"
figure from its last progress line, the wall time of ``cluster destroy`` (which for container
nodes includes removing the veths, the bridge and the blackhole route), and right after create the
RSS of each node's machined and of each control plane's etcd (found by the cluster's marks,
:func:`ichor.provision._processes.find`; median over nodes and runs). The figure is the ratio
container / process of the medians: what a node in namespaces of its own, with a bridge, a DHCP
server and real mounts, costs over a node process on the loopback. For a shape with 3 control
planes each run also times the Talos-way floor (``benchmarks/floor.py``: the same etcd binaries by
hand, one bootstrapped, two learners added and promoted with etcdctl, mutual TLS, on 127.76.x) and
prints both provisioners as ratios to it.

Measured (2 CPUs shared with other work, load average 2.2-3.4, 2 runs):

    shape provisioner create  (CLI)  destroy machined RSS  etcd RSS
    1+1   process      7.64s  6.75s   0.49s    68.7 MiB   28.8 MiB
    1+1   container    8.95s  8.20s   0.65s    77.6 MiB   28.6 MiB
    1+1   ratio        1.17x  1.21x   1.32x     1.13x      0.99x
    3+2   process     18.02s 17.45s   7.76s    70.4 MiB   33.1 MiB
    3+2   container   17.94s 17.35s   7.61s    79.0 MiB   33.6 MiB
    3+2   ratio        1.00x  0.99x   0.98x     1.12x      1.02x
    3+2   floor        5.97s (runs 5.77, 6.17)
    3+2   container / floor 3.00x, process / floor 3.02x (wall)

Where a 3+2 container create's 16.4 s went (one create, CLI progress lines): 1.9 s bridge, DHCP,
NTP and discovery service, 1.1 s PKI, 1.4 s starting the 5 nodes, 3.7 s until every API answers,
9.8 s etcd phase (bootstrap to 3 voters; the third control plane is added only ~8 s after the
bootstrap because of etcd's 5 s rule below). The etcd phase alone is 1.6x the floor.

Since then (issue 26 §3: a joining control plane asks every second instead of every 3 s, every
0.5 s while etcd refuses only for now; ``--shapes 3+2 --runs 1``, load average 1.6 and 4.4 at start,
create now includes the Kubernetes bring-up on container nodes): etcd phase (bootstrap to 3 voters,
create's "etcd is healthy ... after X s") container 9.20 s then 9.00 s = 1.50x and 1.59x the floor
of the same run (6.15 s, 5.65 s), process 8.20 s then 7.40 s = 1.33x and 1.31x. With the 0.5 s
retry alone (join still every 3 s) container 9.20 s / 1.50x; before both, 1.8x (10.35 s / 5.67 s).

A container node's machined holds about 9 MiB more than a process node's (the network stack it
runs: netlink, DHCP, nftables, SNTP); etcd is the same binary either way. Most of the floor is
etcd's own rule that a member is added only once every voter has been connected for 5 s (the
second learner waits for the first one's promotion to age). Before the time sync fix (commit
"A container node syncs its time as soon as DHCP gives it an address") a container node's first
SNTP round ran before its DHCP lease, failed, and was retried 10 s later, holding back trustd and
with it the worker's certificate: 1+1 container create, main vs the fix, interleaved, 3 runs each,
14.96 s vs 7.25 s median (0.48x). The ~3 s ARP wait on the worker's first trustd connect noted
here before was not seen in the node logs of the runs inspected after the fix: the worker asks
only once it has its own lease (its certificate's SANs need its address), and the control plane,
started first, has had its lease by then.

Root only (container nodes need it). Addresses: process nodes on 127.78.x.0/24, container nodes on a
10.2xx.y.0/24 the machine does not route (checked), whose blackhole route create installs first.
Every cluster is destroyed in a ``finally``. Run: ``.venv/bin/python benchmarks/provisioners.py
[--runs N] [--shapes 1+1,3+2]``.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import floor  # benchmarks/floor.py: the Talos-way floor

from ichor.provision._processes import find

PY = sys.executable
HEALTHY = re.compile(
    r"etcd is healthy on (\d+) control plane\(s\) after ([\d.]+)s \(([\d.]+)s since create started\)"
)


def _env(home: Path) -> dict[str, str]:
    """The environment of a ``talosctl`` with its own HOME (and talosconfig there) but the user's
    build cache: one under the temporary HOME would rebuild Kubernetes."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return dict(os.environ, HOME=str(home), TALOSCONFIG=str(home / "talosconfig"), XDG_CACHE_HOME=cache)


def _talosctl(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "ichor", *args], env=_env(home), cwd=home, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def _free_cidr(provisioner: str, n: int) -> str:
    if provisioner == "process":
        return f"127.78.{n % 250}.0/24"
    taken = subprocess.run(
        ["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True
    ).stdout
    while True:
        cidr = f"10.{random.choice([n for n in range(200, 251) if n != 244])}.{random.randint(0, 255)}.0/24"
        if cidr.rsplit(".", 1)[0] + "." not in taken:
            return cidr


@dataclass(frozen=True)
class Run:
    create: float
    """Wall seconds of ``cluster create``."""
    cli: float
    """The CLI's own "since create started" figure."""
    destroy: float
    machined: tuple[int, ...]
    """RSS in bytes of each node's machined right after create."""
    etcd: tuple[int, ...]
    """RSS in bytes of each control plane's etcd right after create."""
    etcd_phase: float = 0.0
    """The CLI's "etcd is healthy ... after X s": from ``bootstrap`` to every control plane voting."""


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0  # a kernel thread or a zombie: no memory of its own


def _node_rss(state_dir: Path) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """RSS of every node's machined and of every etcd, found by the cluster's marks (PID 1 of a
    container node is seen from here under its host PID)."""
    processes = [p for p in find(state_dir) if p.node]
    machined = tuple(_rss(p.id.pid) for p in processes if p.role == "machined")
    etcd = tuple(_rss(p.id.pid) for p in processes if p.role == "etcd")
    return machined, etcd


def _one(home: Path, provisioner: str, cps: int, workers: int, n: int) -> Run:
    """One create (timed, then RSS measured) and destroy (timed); always destroys."""
    name, state = f"bench{n}", home / "clusters"
    try:
        start = time.perf_counter()
        r = _talosctl(home, "cluster", "create", "--provisioner", provisioner, "--name", name, "--state", str(state),
                      "--cidr", _free_cidr(provisioner, n), "--controlplanes", str(cps), "--workers", str(workers))  # fmt: skip
        wall = time.perf_counter() - start
        if r.returncode != 0:
            raise RuntimeError(f"{provisioner} cluster create failed ({r.returncode}):\n{r.stderr[-3000:]}")
        match = HEALTHY.search(r.stderr)
        if match is None or match.group(1) != str(cps):
            raise RuntimeError(f"no 'etcd is healthy' line for {cps} control planes:\n{r.stderr[-2000:]}")
        cli, etcd_phase = float(match.group(3)), float(match.group(2))
        machined, etcd = _node_rss((state / name).resolve())
        if len(machined) != cps + workers or len(etcd) != cps:
            raise RuntimeError(f"found {len(machined)} machined and {len(etcd)} etcd processes after create")
    finally:
        start = time.perf_counter()
        d = _talosctl(home, "cluster", "destroy", "--name", name, "--state", str(state), timeout=180)
        destroy = time.perf_counter() - start
        if d.returncode != 0 and "not found" not in d.stderr:
            print(f"warning: cluster destroy {name} failed: {d.stderr.strip()[-500:]}", file=sys.stderr)
    return Run(wall, cli, destroy, machined, etcd, etcd_phase)


def _mib(values: list[int]) -> float:
    return statistics.median(values) / (1 << 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--shapes", default="1+1,3+2", help="control planes + workers, comma separated")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("benchmarks/provisioners.py: container nodes need root")
    shapes = [tuple(int(x) for x in shape.split("+")) for shape in args.shapes.split(",")]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} run(s) per shape and provisioner, "
          f"load average at start {os.getloadavg()[0]:.2f}")  # fmt: skip
    n = 0
    ca = floor.new_ca()
    with tempfile.TemporaryDirectory(prefix="ichor-bench-prov-") as tmp:
        print(f"{'shape':<6} {'provisioner':<10} {'create (wall)':>14} {'create (CLI)':>13} {'destroy':>8}"
              f" {'machined RSS':>13} {'etcd RSS':>9}")  # fmt: skip
        for cps, workers in shapes:
            results: dict[str, list[Run]] = {"process": [], "container": []}
            floors: list[float] = []
            for run in range(args.runs):
                order = ["process", "container"] if run % 2 == 0 else ["container", "process"]
                for provisioner in order:
                    n += 1
                    home = Path(tmp) / f"h{n}"
                    home.mkdir()
                    results[provisioner].append(_one(home, provisioner, cps, workers, n))
                if cps == 3:
                    n += 1
                    floors.append(floor.talos_way(Path(tmp) / f"floor{n}", ca, f"{floor.NET}.{n % 250}"))
            medians = {
                p: [
                    statistics.median(r.create for r in rs), statistics.median(r.cli for r in rs),
                    statistics.median(r.destroy for r in rs),
                    _mib([b for r in rs for b in r.machined]), _mib([b for r in rs for b in r.etcd]),
                ]
                for p, rs in results.items()
            }  # fmt: skip
            for provisioner, (wall, cli, destroy, machined, etcd) in medians.items():
                print(f"{cps}+{workers:<4} {provisioner:<10} {wall:>13.2f}s {cli:>12.2f}s {destroy:>7.2f}s"
                      f" {machined:>9.1f} MiB {etcd:>5.1f} MiB")  # fmt: skip
            ratios = [c / p for c, p in zip(medians["container"], medians["process"], strict=True)]
            print(f"{cps}+{workers:<4} {'ratio':<10} {ratios[0]:>13.2f}x {ratios[1]:>12.2f}x {ratios[2]:>7.2f}x"
                  f" {ratios[3]:>12.2f}x {ratios[4]:>8.2f}x   (container / process, medians; RSS per node)")  # fmt: skip
            if floors:
                low = statistics.median(floors)
                print(f"{cps}+{workers:<4} {'floor':<10} {low:>13.2f}s   (Talos way by hand: 1 etcd bootstrapped, "
                      f"2 learners added and promoted; runs {', '.join(f'{f:.2f}' for f in floors)})")  # fmt: skip
                for p in ("container", "process"):
                    phase = statistics.median(r.etcd_phase for r in results[p])
                    print(f"{cps}+{workers:<4} {p + '/floor':<16} create (wall) {medians[p][0] / low:.2f}x, "
                          f"create (CLI) {medians[p][1] / low:.2f}x, etcd phase (bootstrap to {cps} voters) "
                          f"{phase:.2f}s = {phase / low:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
