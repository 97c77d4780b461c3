"""``cluster create`` with the container provisioner beside the process provisioner, in one run.

For each shape (``--shapes``, default 1+1 and 3+2) and each run, both provisioners create the same
cluster, in alternating order, through ``python -m ichor cluster create`` (a subprocess with its own
HOME and state dir), until it returns: etcd bootstrapped and healthy on every control plane, all
voting. Reported per provisioner: the wall time of create, the CLI's own "since create started"
figure from its last progress line, and the wall time of ``cluster destroy`` (which for container
nodes includes removing the veths, the bridge and the blackhole route). The figure is the ratio
container / process of the medians: what a node in namespaces of its own, with a bridge, a DHCP
server and real mounts, costs over a node process on the loopback.

Measured (2 CPUs shared, 2 runs): 1+1 create 9.7 s container vs 5.0 s process (1.9x), 3+2 19.2 s vs
15.4 s (1.25x); destroy 1.75-1.8x. Most of the 1+1 gap is a worker asking the control plane's trustd
for its certificate before that address answers: on a real link the first connect waits for ARP to
give up (about 3 s) where the loopback refuses at once.

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
from pathlib import Path

PY = sys.executable
HEALTHY = re.compile(
    r"etcd is healthy on (\d+) control plane\(s\) after ([\d.]+)s \(([\d.]+)s since create started\)"
)


def _talosctl(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HOME=str(home), TALOSCONFIG=str(home / "talosconfig"))
    return subprocess.run([PY, "-m", "ichor", *args], env=env, cwd=home, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def _free_cidr(provisioner: str, n: int) -> str:
    if provisioner == "process":
        return f"127.78.{n % 250}.0/24"
    taken = subprocess.run(
        ["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True
    ).stdout
    while True:
        cidr = f"10.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"
        if cidr.rsplit(".", 1)[0] + "." not in taken:
            return cidr


def _one(home: Path, provisioner: str, cps: int, workers: int, n: int) -> tuple[float, float, float]:
    """(create wall s, CLI's create s, destroy wall s); always destroys."""
    name, state = f"bench{n}", str(home / "clusters")
    try:
        start = time.perf_counter()
        r = _talosctl(home, "cluster", "create", "--provisioner", provisioner, "--name", name, "--state", state,
                      "--cidr", _free_cidr(provisioner, n), "--controlplanes", str(cps), "--workers", str(workers))  # fmt: skip
        wall = time.perf_counter() - start
        if r.returncode != 0:
            raise RuntimeError(f"{provisioner} cluster create failed ({r.returncode}):\n{r.stderr[-3000:]}")
        match = HEALTHY.search(r.stderr)
        if match is None or match.group(1) != str(cps):
            raise RuntimeError(f"no 'etcd is healthy' line for {cps} control planes:\n{r.stderr[-2000:]}")
        cli = float(match.group(3))
    finally:
        start = time.perf_counter()
        d = _talosctl(home, "cluster", "destroy", "--name", name, "--state", state, timeout=180)
        destroy = time.perf_counter() - start
        if d.returncode != 0 and "not found" not in d.stderr:
            print(f"warning: cluster destroy {name} failed: {d.stderr.strip()[-500:]}", file=sys.stderr)
    return wall, cli, destroy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--shapes", default="1+1,3+2", help="control planes + workers, comma separated")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("benchmarks/provisioners.py: container nodes need root")
    shapes = [tuple(int(x) for x in shape.split("+")) for shape in args.shapes.split(",")]
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} run(s) per shape and provisioner"
    )
    n = 0
    with tempfile.TemporaryDirectory(prefix="ichor-bench-prov-") as tmp:
        print(f"{'shape':<6} {'provisioner':<10} {'create (wall)':>14} {'create (CLI)':>13} {'destroy':>8}")
        for cps, workers in shapes:
            results: dict[str, list[tuple[float, float, float]]] = {"process": [], "container": []}
            for run in range(args.runs):
                order = ["process", "container"] if run % 2 == 0 else ["container", "process"]
                for provisioner in order:
                    n += 1
                    home = Path(tmp) / f"h{n}"
                    home.mkdir()
                    results[provisioner].append(_one(home, provisioner, cps, workers, n))
            medians = {
                p: [statistics.median(r[i] for r in rs) for i in range(3)] for p, rs in results.items()
            }
            for provisioner, (wall, cli, destroy) in medians.items():
                print(f"{cps}+{workers:<4} {provisioner:<10} {wall:>13.2f}s {cli:>12.2f}s {destroy:>7.2f}s")
            ratios = [c / p for c, p in zip(medians["container"], medians["process"], strict=True)]
            print(f"{cps}+{workers:<4} {'ratio':<10} {ratios[0]:>13.2f}x {ratios[1]:>12.2f}x {ratios[2]:>7.2f}x"
                  "   (container / process, medians)")  # fmt: skip


if __name__ == "__main__":
    main()
