"""The Talos-way floor of a 3-control-plane etcd: what it costs here with etcd alone, by hand.

Talos bootstraps etcd on one control plane and every other control plane joins as a learner that is
promoted once it has caught up, one at a time. Done here with the same etcd binaries a node runs
(:func:`ichor.etcd.find_binaries`), the same flags (:func:`ichor.etcd.build_args`, so fsync is on),
and mutual TLS like the nodes' (server, peer and admin certificates from one etcd CA, issued before
the clock starts):

1. ``floor-0`` starts with ``initial-cluster-state=new`` and a quorum read on it succeeds;
2. for ``floor-1`` then ``floor-2``: ``etcdctl member add --learner`` (retried while etcd says
   "unhealthy cluster": it adds a member only when every voter has been connected for 5 s), start
   it with ``initial-cluster-state=existing``, then ``etcdctl member promote`` until etcd accepts it (it
   refuses while the learner is not in sync with the leader);
3. a quorum read succeeds on all three (:meth:`EtcdClient.health`).

Timed from the first process start to the last health answer. Measured (2 CPUs shared, load
average about 2, 3 runs): median 5.89 s (5.64-6.36 s); floor-0 healthy at 0.34-1.04 s, floor-1
added and promoted 0.1 s later, floor-2 added 5.0 s after that, promoted and all healthy 0.16 s
later. So five sixths of the floor is etcd's 5 s rule, and TLS (in every step) does not dominate.

Addresses are 127.x loopback only; every etcd is stopped by PID in a ``finally`` and its directory
removed with the caller's temp dir. Used by ``benchmarks/provisioners.py`` (floor vs container 3+2 vs process 3+2 in one run); on its
own: ``.venv/bin/python benchmarks/floor.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

# benchmarks/etcd.py (this directory is sys.path[0] when a benchmark runs as a script).
from etcd import Member, _members, _wait_healthy

from ichor.etcd import PKIPaths, etcd_version, find_binaries, format_initial_cluster
from ichor.machinery import proc
from ichor.machinery.pki import CertKey, new_ecdsa_ca

NET = "127.76"
ADDED = re.compile(r"Member +([0-9a-f]+) added to cluster")
UNHEALTHY = "etcdserver: unhealthy cluster"
"""etcd refuses a member add until every voter has been connected to the leader for 5 s (strict
reconfig check); Talos's join retries it, and so does the floor."""
NOT_IN_SYNC = "can only promote a learner member which is in sync with leader"


def _etcdctl(etcdctl: Path, pki: PKIPaths, endpoints: list[Member], *args: str) -> proc.Completed:
    return proc.run(
        [str(etcdctl), f"--endpoints={','.join(m.client_url for m in endpoints)}", f"--cacert={pki.ca_crt}",
         f"--cert={pki.admin_crt}", f"--key={pki.admin_key}", "--dial-timeout=2s", "--command-timeout=5s", *args],
        timeout=30, check=False,
    )  # fmt: skip


def _join(etcdctl: Path, pki: PKIPaths, voters: list[Member], learner: Member, mark: Callable[[str], None],
          timeout: float = 60.0) -> None:  # fmt: skip
    """Add ``learner`` as a learner, start it, promote it as soon as etcd allows."""
    deadline = time.monotonic() + timeout
    while True:
        added = _etcdctl(etcdctl, pki, voters, "member", "add", learner.name, "--learner",
                         f"--peer-urls={learner.peer_url}")  # fmt: skip
        match = ADDED.search(added.stdout)
        if added.exit_code == 0 and match is not None:
            break
        if UNHEALTHY not in added.stderr or time.monotonic() > deadline:
            raise RuntimeError(f"etcdctl member add {learner.name} failed: {added.stdout}{added.stderr}")
        time.sleep(0.05)
    mark(f"{learner.name} added")
    learner.start(format_initial_cluster((m.name, m.peer_url) for m in [*voters, learner]), state="existing")
    while True:
        promoted = _etcdctl(etcdctl, pki, voters, "member", "promote", match.group(1))
        if promoted.exit_code == 0:
            mark(f"{learner.name} promoted")
            return
        if NOT_IN_SYNC not in promoted.stderr or time.monotonic() > deadline:
            raise RuntimeError(
                f"etcdctl member promote {learner.name} failed: {promoted.stderr}\n{learner.log_tail()}"
            )
        if learner.process is not None and learner.process.poll() is not None:
            raise RuntimeError(f"etcd {learner.name} exited:\n{learner.log_tail()}")
        time.sleep(0.05)


def talos_way(base: Path, ca: CertKey, net: str, phases: list[tuple[str, float]] | None = None) -> float:
    """Seconds from the first etcd start until three voting members answer a quorum read.

    ``phases`` gets (step, seconds since start) as each step ends. Everything started is stopped
    before this returns, whatever happens.
    """
    binaries = find_binaries()
    if binaries.etcdctl is None:
        raise SystemExit(
            f"etcdctl is not next to {binaries.etcd}: build it with `python -m ichor.etcd.build`"
        )
    version = etcd_version(binaries.etcd)
    members = _members(base, ca, binaries, version, [(f"floor-{i}", f"{net}.{i + 1}") for i in range(3)])
    first = members[0]
    try:
        start = time.perf_counter()

        def mark(step: str) -> None:
            if phases is not None:
                phases.append((step, time.perf_counter() - start))

        first.start(format_initial_cluster([(first.name, first.peer_url)]))
        asyncio.run(_wait_healthy(ca, [first]))
        mark(f"{first.name} healthy")
        pki = PKIPaths(first.root / "pki")
        for i, learner in enumerate(members[1:], start=1):
            _join(binaries.etcdctl, pki, members[:i], learner, mark)
        asyncio.run(_wait_healthy(ca, members))
        mark("all three healthy")
        return time.perf_counter() - start
    finally:
        for m in members:
            m.stop()


def new_ca() -> CertKey:
    return new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--net", default=NET, help="first two octets of every 127.x address used")
    args = parser.parse_args()
    if not args.net.startswith("127."):
        parser.error("--net must be a loopback prefix (127.x)")
    ca = new_ca()
    runs = []
    with tempfile.TemporaryDirectory(prefix="ichor-bench-floor-") as tmp:
        for i in range(args.runs):
            phases: list[tuple[str, float]] = []
            runs.append(talos_way(Path(tmp) / f"r{i}", ca, f"{args.net}.{10 + i}", phases))
            print(f"run {i}: " + ", ".join(f"{step} {at:.2f} s" for step, at in phases))
    print(f"Talos-way floor, 1 bootstrapped + 2 learners promoted: median {statistics.median(runs):.2f} s "
          f"(runs: {', '.join(f'{r:.2f}' for r in runs)})")  # fmt: skip


if __name__ == "__main__":
    main()
