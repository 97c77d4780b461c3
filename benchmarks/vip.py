"""Layer 2 VIP failover: how long a client on the bridge loses the VIP when its holder dies.

Each run creates a container cluster of 3 control planes (no workers) whose ``eth0`` carries
``vip.ip`` = ``<cidr>.100`` (the Production guide's Layer 2 VIP), waits until apid answers on the
VIP from the host (the bridge's side), finds the holder (``talosctl get addresses``), and kills
every process of that node with SIGKILL (launcher, machined, etcd: the machine is gone, no
goodbye). The figure is the time from the kill until a TCP connect from the host to
``<vip>:50000`` succeeds again, probed every 50 ms with a 200 ms connect timeout. A fresh cluster
per run: with one of three control planes dead a second kill would take etcd's quorum with it.

Baseline, same run: the etcd lease TTL the election uses
(:data:`ichor.machined.controllers.network.vip.LEASE_TTL`). The holder's lease must expire before
another control plane can win the election key, so failover / TTL cannot go below about 1; what
is above it is the campaign's wake-up, adding the address, gratuitous ARP and apid answering.

Measured (2 CPUs shared with other work, load average 3.35 at start, 2.19 at end, 3 runs): VIP
lost for min 12.34 s, median 12.59 s, max 13.09 s; / lease TTL (10 s) 1.23x, 1.26x, 1.31x. The
holder was each time controlplane-1, the node etcd was bootstrapped on and so normally etcd's raft
leader, which died with it: a new raft leader is elected first, and etcd's new leader renews every
lease to its full TTL when it takes over, so the dead holder's key lives one whole TTL after that
election, not what was left of it (failover = raft election + TTL + watch, ARP, apid; about 2.5 s
above the TTL here).

Root only. The cluster is on a 10.2xx.y.0/24 the machine does not route (create installs its
blackhole route first); it is destroyed in a ``finally`` whatever happens. Run:
``.venv/bin/python benchmarks/vip.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from provisioners import _free_cidr, _talosctl  # benchmarks/provisioners.py

from ichor.machined.controllers.network.vip import LEASE_TTL
from ichor.provision._processes import find, signal_and_wait

CONTROL_PLANES = 3
PORT = 50000


def _answers(ip: str, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((ip, PORT), timeout=timeout):
            return True
    except OSError:
        return False


def _until(what: str, check: object, limit: float, every: float = 0.05) -> float:
    start = time.monotonic()
    while not check():  # type: ignore[operator]
        if time.monotonic() - start > limit:
            raise RuntimeError(f"{what}: not within {limit:g}s")
        time.sleep(every)
    return time.monotonic() - start


def _holder(home: Path, nodes: list[str], vip: str) -> str:
    held = [
        n
        for n in nodes
        if f"eth0/{vip}/32" in _talosctl(home, "-n", n, "get", "addresses", timeout=60).stdout
    ]
    if len(held) != 1:
        raise RuntimeError(f"expected one holder of {vip}, found {held}")
    return held[0]


def _one(home: Path, n: int) -> float:
    """Seconds the VIP does not answer after its holder is killed; always destroys the cluster."""
    name, state, cidr = f"vip{n}", home / "clusters", _free_cidr("container", n)
    prefix = cidr.rsplit(".", 1)[0]
    vip = f"{prefix}.100"
    nodes = [f"{prefix}.{2 + i}" for i in range(CONTROL_PLANES)]
    patch = f'{{"machine": {{"network": {{"interfaces": [{{"interface": "eth0", "dhcp": true, "vip": {{"ip": "{vip}"}}}}]}}}}}}'
    try:
        r = _talosctl(home, "cluster", "create", "--provisioner", "container", "--name", name, "--state", str(state),
                      "--cidr", cidr, "--controlplanes", str(CONTROL_PLANES), "--workers", "0",
                      "--config-patch-control-plane", patch, "--wait-timeout", "5m")  # fmt: skip
        if r.returncode != 0:
            raise RuntimeError(f"cluster create failed ({r.returncode}):\n{r.stderr[-3000:]}")
        _until("the VIP answers", lambda: _answers(vip), 120)
        holder = _holder(home, nodes, vip)
        node = f"{name}-controlplane-{nodes.index(holder) + 1}"
        victims = [p.id for p in find((state / name).resolve()) if p.node == node]
        if not victims:
            raise RuntimeError(f"no process of {node}")
        killed = time.monotonic()
        left = signal_and_wait(victims, signal.SIGKILL, 10)
        if left:
            raise RuntimeError(f"{node}: {len(left)} process(es) survived SIGKILL")
        lost = _until("the VIP answers from another node", lambda: _answers(vip), 120)
        print(f"  run {n}: holder {holder} killed, VIP back after {lost:.2f} s "
              f"({time.monotonic() - killed:.2f} s incl. the kill)", flush=True)  # fmt: skip
        return lost
    finally:
        d = _talosctl(home, "cluster", "destroy", "--name", name, "--state", str(state), timeout=180)
        if d.returncode != 0 and "not found" not in d.stderr:
            print(f"warning: cluster destroy {name} failed: {d.stderr.strip()[-500:]}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("benchmarks/vip.py: container nodes need root")
    print(
        f"{os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.2f}; election lease TTL {LEASE_TTL} s"
    )
    with tempfile.TemporaryDirectory(prefix="ichor-bench-vip-") as tmp:
        losses = []
        for n in range(args.runs):
            home = Path(tmp) / f"h{n}"
            home.mkdir()
            losses.append(_one(home, n))
    low, mid, high = min(losses), statistics.median(losses), max(losses)
    print(f"VIP lost for: min {low:.2f} s, median {mid:.2f} s, max {high:.2f} s over {args.runs} kill(s)")
    print(f"/ lease TTL ({LEASE_TTL} s): min {low / LEASE_TTL:.2f}x, median {mid / LEASE_TTL:.2f}x, "
          f"max {high / LEASE_TTL:.2f}x; load average at end {os.getloadavg()[0]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
