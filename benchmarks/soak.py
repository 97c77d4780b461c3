"""Soak: many concurrent talosctl-like clients through apid, bounded in time, while a control plane
is killed and restarted.

Starts ``talosctl cluster create`` (1 control plane + 1 worker, its own HOME and loopback range),
warms both nodes up with one client, then for each client count runs that many clients for
``--seconds``, each alternating ``Version`` (``nodes`` metadata, as ``talosctl -n IP version``) and
a COSI ``Get`` (``MachineStatuses/machine``), all through the control plane's apid: half of the
clients ask the control plane itself, half the worker through the control plane's proxy hop.
Halfway through each run the control plane crashes (its machined, apid inside it, and its etcd get
SIGKILL by PID); its launcher starts it again, and the run counts the errors and the time until
calls succeed again (``--no-restart`` leaves it alone; then any error fails the soak).

Reported per run: calls/s, p50/p99 latency of the calls that succeeded, errors by kind, the CPU
time the nodes' machined processes spent per call (both nodes together: the node's own cost, what
Ichor can make cheaper) and the load generator's, and each machined's RSS before (idle after the
warm-up, before the first run), its peak during the run and after the run once the node settled.
``--pin`` puts the load generator on the first CPU and every process of the cluster on the
second, so the node's CPU per call is not blurred by the clients competing with it (the figure
itself is CPU time, so it holds on a busy machine too).

Exits 1 if a node's machined RSS after any run is more than 20% above its RSS before the first
run, if a client saw an error without a restart, or if the control plane did not answer again
within 60 s of its crash. ``--short`` (10 clients, 20 s) is what ``tests/test_e2e_soak.py`` runs in CI.

Run: ``.venv/bin/python benchmarks/soak.py [--short] [--clients 20 50 100] [--seconds 30] [--pin]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ichor
from ichor.machinery import proc

PY = sys.executable
SETTLE_SECONDS = 5.0
RSS_TOLERANCE = 1.2
RECOVERY_TIMEOUT = 60.0
CLUSTER = "soak"
TICK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def _talosctl(home: Path, *args: str, check: bool = True) -> proc.Completed:
    # The cluster runs the Ichor this script imported, whatever the working directory.
    source = str(Path(ichor.__file__).resolve().parents[1])
    env = {"HOME": str(home), "TALOSCONFIG": str(home / ".talos/config"), "PYTHONPATH": source}
    return proc.run([PY, "-m", "ichor", *args], env=env, cwd=home, check=check, timeout=300)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _tree(pid: int) -> Iterator[int]:
    yield pid
    for child in _children(pid):
        yield from _tree(child)


def _stat(pid: int) -> tuple[float, int] | None:
    """CPU seconds (user + system) and RSS in KiB of one process, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # Fields after the command: state is 3, utime 14, stime 15, rss 24 (proc(5), 1-based).
    return (int(fields[11]) + int(fields[12])) / TICK, int(fields[21]) * PAGE_KIB


def _pin(pid: int, cpus: set[int]) -> None:
    """Pin every thread of ``pid`` and of its descendants (threads carry their own masks)."""
    for member in _tree(pid):
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{member}/task").iterdir():
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(task.name), cpus)


@dataclass
class Node:
    """One node of the soak cluster: its launcher (recorded by ``cluster create``) and its machined."""

    name: str
    address: str
    root: Path
    launcher_pid: int

    def machined_pid(self) -> int | None:
        pids = _children(self.launcher_pid)
        return pids[0] if pids else None

    def rss_kib(self) -> int | None:
        pid = self.machined_pid()
        stat = _stat(pid) if pid else None
        return stat[1] if stat else None

    def crash(self) -> int | None:
        """SIGKILL this node's machined and etcd, as a power loss would; the launcher restarts it."""
        pid = self.machined_pid()
        etcd = self.root / "system/run/etcd.pid"
        victims = [pid, int(etcd.read_text()) if etcd.exists() else None]
        for victim in victims:
            if victim and victim in _tree(self.launcher_pid):  # only processes this cluster started
                os.kill(victim, signal.SIGKILL)
        return pid


@dataclass
class Run:
    clients: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    peak_rss: dict[str, int] = field(default_factory=dict)
    cpu: dict[int, tuple[float, float]] = field(default_factory=dict)
    """machined PID -> (CPU seconds at its first sample, at its last)."""
    generator_cpu: float = 0.0
    restart: str = ""
    recovered: bool = True

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 if ordered else float("nan")

    def node_cpu_per_call(self) -> float:
        """Milliseconds of machined CPU (all nodes) per successful call."""
        spent = sum(last - first for first, last in self.cpu.values())
        return spent / max(1, len(self.latencies)) * 1000


def _client_factory(home: Path, endpoint: str) -> Callable[[str], Any]:
    from ichor.client import Client
    from ichor.machinery.clientconfig import GlobalOptions

    def make(node: str) -> Any:
        options = GlobalOptions(
            talosconfig=str(home / ".talos/config"), context=CLUSTER, endpoints=[endpoint], nodes=[node]
        )
        return Client.from_options(options)

    return make


def _error_kind(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    return f"{type(exc).__name__}({status.name})" if status is not None else type(exc).__name__


async def _one_client(make: Callable[[str], Any], node: str, until: float, run: Run) -> None:
    from google.protobuf import empty_pb2

    from ichor.api.gen.v1alpha1 import state_pb2

    get = state_pb2.GetRequest(namespace="runtime", type="MachineStatuses.runtime.talos.dev", id="machine")
    client = make(node)
    try:
        turn = random.randrange(2)
        while time.monotonic() < until:
            start = time.perf_counter()
            try:
                if turn % 2 == 0:
                    await client.machine.Version(empty_pb2.Empty(), timeout=10)
                else:
                    await client.with_node(node).cosi.Get(get, timeout=10)
            except Exception as exc:  # a soak counts failures instead of stopping at the first
                run.errors[_error_kind(exc)] += 1
                await asyncio.sleep(0.1)  # a node that is down is not hammered in a tight loop
            else:
                run.latencies.append(time.perf_counter() - start)
            turn += 1
    finally:
        client.close()


def _sample(nodes: list[Node], run: Run) -> None:
    for node in nodes:
        pid = node.machined_pid()
        stat = _stat(pid) if pid else None
        if pid is None or stat is None:
            continue
        cpu, rss = stat
        run.peak_rss[node.name] = max(run.peak_rss.get(node.name, 0), rss)
        run.cpu[pid] = (run.cpu.get(pid, (cpu, cpu))[0], cpu)


async def _sampler(nodes: list[Node], run: Run, stop: asyncio.Event) -> None:
    while not stop.is_set():
        _sample(nodes, run)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)
    _sample(nodes, run)


async def _crash_midway(cp: Node, make: Callable[[str], Any], seconds: float, run: Run) -> None:
    """Crash the control plane halfway; report how long until a call succeeds again."""
    from google.protobuf import empty_pb2

    await asyncio.sleep(seconds / 2)
    pid = cp.crash()
    killed = time.monotonic()
    probe = make(cp.address)
    try:
        while time.monotonic() - killed < RECOVERY_TIMEOUT:
            await asyncio.sleep(0.2)
            with contextlib.suppress(Exception):
                await probe.machine.Version(empty_pb2.Empty(), timeout=2)
                run.restart = (
                    f"machined PID {pid} killed; answers again after {time.monotonic() - killed:.1f} s"
                )
                return
    finally:
        probe.close()
    run.recovered = False
    run.restart = f"machined PID {pid} killed; no answer within {RECOVERY_TIMEOUT:.0f} s"


async def _run(
    make: Callable[[str], Any], nodes: list[Node], clients: int, seconds: float, crash: bool
) -> Run:
    run = Run(clients, seconds)
    stop = asyncio.Event()
    cp, worker = nodes
    generator = os.times()
    _sample(nodes, run)
    until = time.monotonic() + seconds
    async with asyncio.TaskGroup() as group:
        sampler = group.create_task(_sampler(nodes, run, stop))
        if crash:
            group.create_task(_crash_midway(cp, make, seconds, run))
        workers = [
            group.create_task(_one_client(make, (cp if i % 2 == 0 else worker).address, until, run))
            for i in range(clients)
        ]
        await asyncio.gather(*workers)
        stop.set()
        await sampler
    after = os.times()
    run.generator_cpu = after.user + after.system - generator.user - generator.system
    return run


def _mib(kib: int | None) -> str:
    return f"{kib / 1024:.0f} MiB" if kib else "?"


def _report(run: Run) -> None:
    errors = ", ".join(f"{k} {v}" for k, v in run.errors.most_common()) or "none"
    calls = max(1, len(run.latencies))
    print(
        f"{run.clients} clients x {run.seconds:.0f} s: {run.rate:.0f} calls/s, "
        f"p50 {run.percentile(0.5):.1f} ms, p99 {run.percentile(0.99):.1f} ms, errors: {errors}; "
        f"CPU per call: nodes {run.node_cpu_per_call():.2f} ms, "
        f"load generator {run.generator_cpu / calls * 1000:.2f} ms",
        flush=True,
    )
    if run.restart:
        print(f"  crash: {run.restart}", flush=True)


def _check_memory(nodes: list[Node], before: dict[str, int | None], run: Run) -> list[str]:
    failed = []
    for node in nodes:
        start, after = before[node.name], node.rss_kib()
        ratio = after / start if after and start else float("inf")
        print(
            f"  {node.name} machined RSS: before {_mib(start)}, peak {_mib(run.peak_rss.get(node.name))}, "
            f"after {_mib(after)} = {ratio:.2f}x before",
            flush=True,
        )
        if ratio > RSS_TOLERANCE:
            failed.append(
                f"{node.name} machined RSS after {run.clients} clients is {_mib(after)}, "
                f"more than 20% over its {_mib(start)} before"
            )
    return failed


def _soak(home: Path, nodes: list[Node], args: argparse.Namespace) -> list[str]:
    make = _client_factory(home, nodes[0].address)
    warm = asyncio.run(_run(make, nodes, 1, 5.0, crash=False))
    print("warm-up, 1 client:", end=" ")
    _report(warm)
    failed = [f"the warm-up saw errors: {dict(warm.errors)}"] if warm.errors else []
    time.sleep(SETTLE_SECONDS)
    before = {n.name: n.rss_kib() for n in nodes}  # the start every run's "after" is held to
    for count in args.clients:
        run = asyncio.run(_run(make, nodes, count, args.seconds, crash=not args.no_restart))
        _report(run)
        if not run.recovered:
            failed.append(f"{count} clients: the control plane did not answer again after its crash")
        elif run.errors and not run.restart:
            failed.append(f"{count} clients saw errors without a crash")
        time.sleep(SETTLE_SECONDS)
        failed += _check_memory(nodes, before, run)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/soak.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="10 clients for 20 s: the CI check")
    parser.add_argument("--clients", type=int, nargs="+", default=[20, 50, 100], help="client counts to run")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each run")
    parser.add_argument("--no-restart", action="store_true", help="do not crash the control plane midway")
    parser.add_argument("--pin", action="store_true", help="load generator on CPU 0, the cluster on CPU 1")
    parser.add_argument("--cidr", help="loopback range for the cluster (default: a random 127.x.y.0/24)")
    parser.add_argument("--home", type=Path, help="HOME for talosctl and the cluster (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.short:
        args.clients, args.seconds = [10], 20.0
    cidr = args.cidr or f"127.{random.randint(100, 250)}.{random.randint(0, 255)}.0/24"
    if args.pin and len(os.sched_getaffinity(0)) < 2:
        parser.error("--pin needs two CPUs")

    from ichor.provision._cluster import ClusterRecord

    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        home = args.home or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="soak-")))
        _talosctl(
            home,
            "cluster",
            "create",
            "--provisioner",
            "process",
            "--name",
            CLUSTER,
            "--cidr",
            cidr,
            "--workers",
            "1",
        )
        print(f"cluster create 1+1 on {cidr}: {time.perf_counter() - started:.1f} s", flush=True)
        try:
            record = ClusterRecord.load(home / ".talos/clusters", CLUSTER)
            nodes = [Node(n.name, n.address, Path(n.root), n.launcher_pid) for n in record.nodes]
            if args.pin:
                os.sched_setaffinity(0, {0})
                for pid in (record.discovery_pid, *(n.launcher_pid for n in nodes)):
                    if pid:
                        _pin(pid, {1})
            failed = _soak(home, nodes, args)
        finally:
            _talosctl(home, "cluster", "destroy", "--name", CLUSTER, check=False)
    for reason in failed:
        print(f"FAIL: {reason}")
    print(f"total {time.perf_counter() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
