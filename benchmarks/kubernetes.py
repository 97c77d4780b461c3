"""A Kubernetes cluster of container nodes beside the floor, the same binaries by hand, in one run.

1. **Ichor**: ``talosctl cluster create --provisioner container`` with 1 control plane + 1 worker and
   the locally built Kubernetes images (``--kubernetes-images local``: the build cache of
   :mod:`ichor.kubebuild`, served by the cluster's own registry, mirrored for registry.k8s.io and
   ghcr.io), which waits for every stage of ``talosctl health``. The wall time of create, each health
   stage as create reports it "OK" (time since create started), then ``talosctl health`` run once
   more on its own against the healthy cluster.
2. **Floor** (``benchmarks/kubefloor.py``): the same kube-apiserver, kube-controller-manager,
   kube-scheduler, kubelet, etcd and containerd started by hand, kubeadm-style, in namespaces of
   their own, from the PKI until ``kubectl get nodes`` shows the node Ready.
3. **Memory** once the cluster is healthy: RSS of each component per node, found by walking the
   process tree under each node's PID 1 (``<state>/<cluster>/<node>.launcher.json``); apid and trustd
   run inside machined (one Python process), so they have no row of their own. Beside it each node's
   memory cgroup usage (the whole node) and the floor's RSS of the same component.

What the two clocks cover differs, and the ratio says how much Talos's way costs on top of the
minimum: create also makes the bridge, DHCP, NTP, discovery and registry, boots two machined,
pushes the images, runs flannel, kube-proxy and CoreDNS and a second node; the floor runs no pod.

Measured (2 CPUs shared with three other helpers' work, load average 2.1-3.6 at start, 2.3-3.3 at
the end; one run, a second run gave create 128.8 s, floor 2.68 s, 48x):

    floor: node Ready after 3.20 s (PKI 0.01 s; containerd socket 0.32 s; apiserver ready 3.09 s;
           node registered 3.15 s; node Ready 3.20 s)
    Ichor: create 138.30 s; talosctl health on the healthy cluster 0.61 s; destroy 11.62 s
       9.33 s  all nodes to finish boot sequence (etcd healthy 7.73 s, kubelet healthy 9.31 s)
      55.55 s  all k8s nodes to report
      74.75 s  all k8s nodes to report ready
     138.06 s  all control plane static pods to be running (then every other stage within 0.1 s)
    ratio create / floor 43.2x; 'all k8s nodes to report ready' / floor node Ready 23.4x

    component (RSS MiB)        control plane   worker   floor
    machined (+apid, trustd)            89.1     88.1       -
    etcd                                47.7        -    42.9
    containerd                          39.0     38.0       -
    cri                                 54.7     48.2    39.3   (the floor's one containerd)
    kubelet                             91.7     87.7    74.1
    kube-apiserver                     268.0        -   239.3
    kube-controller-manager            110.2        -    71.4
    kube-scheduler                      60.4        -    54.7
    kube-proxy                          50.9     51.8       -
    coredns                             95.6        -       -   (both replicas on one node)
    flannel                             39.3     38.9       -
    shims, pause, ctr                  133.3     63.0       -
    sum of RSS                        1079.9    415.6   521.6
    node memory cgroup                 995.3    385.3

The floor's components are measured right after its node is Ready, the cluster's after health.

Where the control plane's 130 s go (one create outside this script, its kubelet and console logs;
times since the kubelet started, ~10 s after create): the kubelet asks for its client certificate
with the bootstrap token at 0, 2, 6, 15 and 31 s, then gives up until 64 s; the apiserver answers
at ~27 s, but ManifestApplyController, backing off 1-2-4-8-16 s while it did not, applies the
bootstrap manifests (the token's Secret among them) only at 32 s, 1 s after the kubelet's last try.
So the node registers at 69 s (create's "all k8s nodes to report"). The mirror pods of the static
pods then appear 40-60 s later (apiserver 108 s, scheduler 130 s), on the kubelet's 1-minute pod
resync. The floor has none of those waits: its kubelet starts with a client certificate and its
control plane is not static pods.

Since then (helper-boot): ManifestApplyController probes ``/readyz`` every second instead of backing
off, so the token's Secret is there within a second of the API server being ready; that only helps
when the API server gets ready before one of the kubelet's tries it would otherwise have missed.
"all control plane static pods to be running" now reads the node's StaticPodStatuses as Talos 1.7
does, and the mirror-pod wait shows under "all control plane components to be ready". Talos sets
no syncFrequency, httpCheckFrequency or fileCheckFrequency (kubelet defaults 1m, 20s, 20s), nor does
Ichor: the mirror-pod wait is the kubelet's own. Three runs, same machine, one each: main 97.99 s
(nodes report 41.6 s, mirror pods 97.8 s); an ambiguous run while the change was being written
106.99 s; helper-boot 146.54 s (kubelet healthy 16.3 s, nodes report 64.0 s, static pods 71.3 s,
components 146.3 s). The spread comes from when the API server gets ready relative to the kubelet's
tries (0, 2, 6, 15, 31 s, then about a minute later) and to each static pod's resync (60-90 s after
its last sync), not from a difference one run can show.

Since then (helper-k8sfast): the static pod server gives each pod its own UID and, for 2 minutes
after the kubelet has its client certificate, a new ``ichor.dev/kubelet-registered`` serial on each
fetch, so each 20 s fetch is an update the kubelet syncs at once and the mirror pods come as soon as
its Node informer has the Node (which its reflector backoff delays up to a minute past the
certificate). One ``cluster create`` 1+1 each (``--kubernetes-images local``, same machine, same
hour; times since create started, from create's progress lines and the kubelet logs):

    phase                                main   one serial  serial per fetch  + kubelet restart*
    kubelet healthy / boot sequence     19.53        22.50             18.24              14.07
    kubelet client certificate (cp)     50.42        68.40             60.57              51.17
    all k8s nodes to report             52.06        69.21             66.22              53.31
    all k8s nodes to report ready       72.99       102.97             80.97              58.99
    static pods running                 73.13       103.06             81.12              59.04
    control plane components (mirrors) 148.41       171.38             81.18              60.34
    coredns ready                      148.54       171.52             81.25              73.00
    create                             148.58       171.54             81.27              73.02

A second run with a serial per fetch: create 84.69 s (nodes report 47.53 s, Ready 70.82 s, static
pods running 70.87 s, mirror pods Ready 83.59 s, coredns 84.67 s). The mirror-pod wait is down from
75 s after the static pods ran (main) to 0.06-12.7 s (the kubelet's next 20 s fetch of the list). (*) Not committed: the kubelet restarted once when its client certificate appears (a
kubelet started without credentials keeps its informers' stretched backoff; restarted, it lists at
once); it ran in that one measured create only.

Left on the path: the kubelets' TLS bootstrap (client certificate 14-32 s after the API server
answers: the certificate manager's 2-4-8-16 s backoff), the DaemonSet pods reaching a worker late
(its pod watch waits for the same Node informer), flannel's start (20-40 s) and CoreDNS (13 s).

Since then (issue 26 §3, this file's ``--runs 3`` before and after, same machine, same hour; before
is b2f8b2a run with ``PYTHONPATH`` on a worktree, the nodes too): the kubelet fetches the static pod
list every second, kube-controller-manager and kube-scheduler start once the API server answers
``/readyz``, KubePrism retries a lost upstream within a second, and a joining kubelet restarts once
when it has its client certificate (ARCHITECTURE.md, "Bring-up"). Seconds since create started:

    phase                        before: runs          median   after: runs         median   floor
    etcd healthy                  7.01   6.07   6.51     6.51    5.92   5.89   6.18    5.92       -
    API server answering         29.08  28.23  28.51    28.51    8.47   8.21   8.55    8.47    2.45
    nodes registered             47.33  67.24  67.98    67.24   29.78  28.47  28.83   28.83    2.50
    nodes Ready                  67.71 109.89 103.43   103.43   32.89  31.03  31.42   31.42    2.55
    static pods running          67.73 109.90 103.44   103.44   32.91  31.05  31.45   31.45       -
    mirror pods Ready            71.93 125.52 106.04   106.04   40.30  37.87  38.82   38.82       -
    kube-proxy ready             71.95 125.53 106.04   106.04   40.31  37.88  38.83   38.83       -
    coredns ready                74.01 125.54 113.72   113.72   51.57  37.89  47.07   47.07       -
    create (every health stage)  74.15 125.66 113.86   113.86   51.69  38.02  47.20   47.20    2.55

3+1 after, one run: create 58.09 s (etcd healthy 18.67, nodes registered 34.00, Ready 40.49, mirror
pods 41.83, coredns 57.94); with the faster etcd join too (``--controlplanes 3 --runs 3``, load
average 0.2 at start): create 56.01 s median (53.61-57.03; etcd healthy 15.26, API answering 16.28,
registered 34.49, Ready 40.42, mirror pods 45.17, coredns 55.83). What is left is Kubernetes's own: the controller manager approves the
first CSR ~16 s after it starts (its node-IPAM controller's ``wait.Poll`` sleeps 10 s before any of
its informers start), a new mirror pod's status waits for the kubelet's 10 s status batch, and a
CoreDNS pod whose first readiness probe comes before it is ready waits 10 s (``periodSeconds``) for
the next: the 38-52 s spread after is mostly that probe.

Root only (container nodes and namespaces need it); exits 2 otherwise. The cluster uses a
10.2xx.y.0/24 no route of the machine covers (create blackholes it first); the floor only loopback
and a dummy link inside its own network namespace. Everything is removed in ``finally`` blocks,
also on Ctrl-C or SIGTERM: the cluster destroyed and whatever carries its marks killed by PID,
its bridge, firewall table and blackhole route removed; the floor's processes killed by PID and
its cgroups removed. Run: ``.venv/bin/python benchmarks/kubernetes.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from kubefloor import Floor, shielded
from provisioners import _env, _free_cidr, _rss, _talosctl

from ichor.kubebuild import ensure_built
from ichor.machinery.errors import MachineryError
from ichor.provision import _cgroups as cgroups
from ichor.provision._network import BLACKHOLE_METRIC, bridge_name, firewall_table, veth_name
from ichor.provision._processes import find, signal_and_wait

PY = sys.executable
NAME = f"kubebench{os.getpid()}"
"""Unique per run: what an interrupted run left behind cannot collide with the next one."""
CREATE_TIMEOUT = 900
READY_STAGE = "all k8s nodes to report ready"
"""The health stage closest to the floor's end (every node Ready; no pod asked for yet)."""
API_STAGE = "all k8s nodes to report"
API_DOWN = "Kubernetes API not answering"
"""While create's "all k8s nodes to report" line says this, no API server answers yet."""
API_ANSWERS = "API server answering"
CREATE = "create (every health stage)"
PHASES = (
    ("etcd healthy", "etcd to be healthy", None),
    (API_ANSWERS, None, "apiserver ready"),
    ("nodes registered", API_STAGE, "node registered"),
    ("nodes Ready", READY_STAGE, "node Ready"),
    ("static pods running", "all control plane static pods to be running", None),
    ("mirror pods Ready", "all control plane components to be ready", None),
    ("kube-proxy ready", "kube-proxy to report ready", None),
    ("coredns ready", "coredns to report ready", None),
    (CREATE, None, "node Ready"),
)  # fmt: skip
"""(row, create's health stage, the floor's phase): the per-phase table's rows."""


def node_names(controlplanes: int, workers: int) -> list[str]:
    return [f"controlplane-{i}" for i in range(1, controlplanes + 1)] + [
        f"worker-{i}" for i in range(1, workers + 1)
    ]


def phases_of(stages: Sequence[tuple[str, float]], created: float) -> dict[str, float]:
    """Row -> seconds since create started, from create's stage lines (see :data:`PHASES`)."""
    times = dict(stages)
    out = {row: times[stage] for row, stage, _ in PHASES if stage is not None and stage in times}
    answering = times.get(API_ANSWERS)
    if answering is None:
        answering = times.get(API_STAGE)
    if answering is not None:
        out[API_ANSWERS] = answering
    out[CREATE] = created
    return out


def phase_table(runs: Sequence[Mapping[str, float]], floor: Mapping[str, float]) -> Iterator[str]:
    """One row per phase: each run, the median, the floor's same phase and the ratio."""
    head = "".join(f"{f'run {i}':>9}" for i in range(1, len(runs) + 1))
    yield f"{'phase (s since create)':<30}{head}{'median':>9}{'floor':>9}{'ratio':>8}"
    for row, _stage, floor_phase in PHASES:
        values = [r[row] for r in runs if row in r]
        cells = "".join(f"{r[row]:9.2f}" if row in r else "-".rjust(9) for r in runs)
        median = statistics.median(values) if values else None
        at = floor.get(floor_phase) if floor_phase else None
        ratio = f"{median / at:7.1f}x" if median is not None and at else "-".rjust(8)
        median_cell = f"{median:9.2f}" if median is not None else "-".rjust(9)
        floor_cell = f"{at:9.2f}" if at else "-".rjust(9)
        yield f"{row:<30}{cells}{median_cell}{floor_cell}{ratio}"


HEALTH_TIMEOUT = 300
ROWS = (
    "machined", "etcd", "containerd", "cri", "kubelet", "kube-apiserver", "kube-controller-manager",
    "kube-scheduler", "kube-proxy", "coredns", "flannel", "runtime",
)  # fmt: skip
ROW_LABELS = {"machined": "machined (+apid, trustd)", "runtime": "shims, pause, ctr"}
_NAMED = {
    "etcd",
    "kubelet",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
    "coredns",
}
_RUNTIME = {"pause", "ctr", "runc", "containerd-shim-runc-v2", "containerd-shim"}


def component_of(argv: Sequence[str]) -> str:
    """The component a node's process belongs to, from its command line (``other`` when none)."""
    if not argv:
        return "other"
    if any(a.startswith("ichor.machined") for a in argv):
        return "machined"
    binary = Path(argv[0]).name
    if binary == "containerd":
        # The system containerd's socket is under /system (Talos's layout); the CRI one is not.
        address = argv[argv.index("--address") + 1] if "--address" in argv[:-1] else ""
        return "containerd" if address.startswith("/system/") else "cri"
    if binary in ("flanneld", "flannel"):
        return "flannel"
    if binary in _NAMED:
        return binary
    return "runtime" if binary in _RUNTIME else "other"


def descendants(root: int, parents: Mapping[int, int]) -> list[int]:
    """``root`` and every process below it, from a PID -> parent PID map."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return sorted(found)


def _parents() -> dict[int, int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_bytes()
                parents[int(entry)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
    return parents


def _argv(pid: int) -> tuple[str, ...]:
    try:
        return tuple(
            p.decode(errors="replace") for p in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if p
        )
    except OSError:
        return ()


def node_memory(node_pid: int) -> dict[str, int]:
    """RSS in bytes per component of the node whose PID 1 is ``node_pid`` (host PID)."""
    totals: dict[str, int] = {}
    for pid in descendants(node_pid, _parents()):
        component = component_of(_argv(pid))
        totals[component] = totals.get(component, 0) + _rss(pid)
    return totals


def cgroup_usage(cluster: str, node: str) -> int | None:
    """The node's memory cgroup usage in bytes (v1 ``memory.usage_in_bytes`` or v2 ``memory.current``)."""
    found = cgroups.current()
    for hierarchy, directory in zip(found, cgroups.node_dirs(found, cluster, node), strict=True):
        for name in ("memory.usage_in_bytes", "memory.current"):
            if "memory" in hierarchy.options.split(",") or (
                hierarchy.version == 2 and name == "memory.current"
            ):
                with contextlib.suppress(OSError, ValueError):
                    return int((directory / name).read_text())
    return None


def parse_stage(line: str) -> str | None:
    """The health stage a create progress line reports passed (``waiting for X: OK``), else None."""
    line = line.strip()
    if line.startswith("waiting for ") and line.endswith(": OK"):
        return line.removeprefix("waiting for ").removesuffix(": OK")
    return None


def create(home: Path, state: Path, cidr: str, stages: list[tuple[str, float]], *, controlplanes: int = 1,
           workers: int = 1) -> float:  # fmt: skip
    """Wall seconds of ``cluster create`` with local Kubernetes images; each health stage's "OK"
    appended to ``stages`` with its time since create started, and :data:`API_ANSWERS` at the first
    line of :data:`API_STAGE` that no longer says :data:`API_DOWN`."""
    args = [PY, "-m", "ichor", "cluster", "create", "--provisioner", "container", "--name", NAME, "--state",
            str(state), "--cidr", cidr, "--controlplanes", str(controlplanes), "--workers", str(workers),
            "--kubernetes-images", "local", "--wait-timeout", "10m"]  # fmt: skip
    start = time.perf_counter()
    log = []
    with subprocess.Popen(args, env=_env(home), cwd=home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as child:  # fmt: skip
        assert child.stdout is not None
        try:
            for line in child.stdout:
                log.append(line)
                if (stage := parse_stage(line)) is not None:
                    stages.append((stage, time.perf_counter() - start))
                elif (line.startswith(f"waiting for {API_STAGE}: ") and API_DOWN not in line
                      and not any(name == API_ANSWERS for name, _ in stages)):  # fmt: skip
                    stages.append((API_ANSWERS, time.perf_counter() - start))
                if time.perf_counter() - start > CREATE_TIMEOUT:
                    child.terminate()
        except BaseException:
            # Interrupted: end create (it may ignore SIGINT, as a background job does) before destroy.
            with shielded():
                child.terminate()
                try:
                    child.wait(30)
                except subprocess.TimeoutExpired:
                    child.kill()
            raise
        code = child.wait()
    if code != 0:
        raise RuntimeError(f"cluster create failed ({code}):\n{''.join(log)[-4000:]}")
    return time.perf_counter() - start


def destroy(home: Path, state: Path, cidr: str, nodes: Sequence[str]) -> None:
    """Destroy the cluster, then remove by PID and by name whatever destroy left, the route last.
    Each step runs whatever the one before it did (a destroy cut short leaves the rest to the sweep)."""
    try:
        done = _talosctl(
            home, "cluster", "destroy", "--name", NAME, "--state", str(state), "--force", timeout=180
        )
        if done.returncode != 0 and "not found" not in done.stderr:
            print(f"warning: cluster destroy failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
    except (OSError, subprocess.SubprocessError) as err:
        print(f"warning: cluster destroy did not run: {err}", file=sys.stderr)
    sweep(NAME, state, cidr, links=[veth_name(NAME, f"{NAME}-{node}", 1) for node in nodes])


def sweep(name: str, state: Path, cidr: str, *, links: list[str] | tuple[str, ...] = ()) -> None:
    """What a destroy of cluster ``name`` left: its processes by PID, then ``links``, its bridge,
    its firewall table and blackhole route, and its cgroups (a benchmark's cleanup after destroy)."""
    signal_and_wait([p.id for p in find((state / name).resolve())], signal.SIGKILL, 10)
    bridge = bridge_name(name)
    for command in (*(["ip", "link", "del", link] for link in links), ["ip", "link", "del", bridge],
                    ["nft", "delete", "table", "inet", firewall_table(bridge)],
                    ["ip", "route", "del", "blackhole", cidr, "metric", str(BLACKHOLE_METRIC)]):  # fmt: skip
        subprocess.run(command, capture_output=True, check=False)
    try:
        cgroups.remove(cgroups.cluster_dirs(cgroups.current(), name))
    except MachineryError as err:
        print(f"warning: {err}", file=sys.stderr)


def _launcher_pids(state_dir: Path) -> dict[str, int]:
    """Node name -> its PID 1 (host PID), from ``<node>.launcher.json``."""
    found = {}
    for record in sorted(state_dir.glob("*.launcher.json")):
        found[record.name.removesuffix(".launcher.json")] = int(json.loads(record.read_text())["node_pid"])
    return found


def _mib(value: int | None) -> str:
    return "-" if not value else f"{value / (1 << 20):.1f}"


def memory_table(nodes: Mapping[str, Mapping[str, int]], usage: Mapping[str, int | None],
                 floor: Mapping[str, int]) -> Iterator[str]:  # fmt: skip
    """The memory table's lines: one row per component, RSS MiB per node, then the floor's."""
    names = list(nodes)
    width = max([12, *(len(n) + 2 for n in names)])
    yield f"{'component (RSS MiB)':<26}" + "".join(f"{n:>{width}}" for n in names) + f"{'floor':>10}"
    for row in (*ROWS, "other"):
        if not any(row in per for per in nodes.values()) and row not in floor:
            continue
        cells = "".join(f"{_mib(nodes[n].get(row)):>{width}}" for n in names)
        yield f"{ROW_LABELS.get(row, row):<26}{cells}{_mib(floor.get(row)):>10}"
    sums = "".join(f"{_mib(sum(nodes[n].values())):>{width}}" for n in names)
    yield f"{'sum of RSS':<26}{sums}{_mib(sum(floor.values())):>10}"
    yield f"{'node memory cgroup':<26}" + "".join(f"{_mib(usage[n]):>{width}}" for n in names)


def _interrupt(signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--controlplanes", type=int, default=1, help="control planes per cluster (default 1)")
    parser.add_argument("--workers", type=int, default=1, help="workers per cluster (default 1)")
    parser.add_argument("--runs", type=int, default=1, help="clusters created one after another (default 1)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print(
            "benchmarks/kubernetes.py: container nodes and the floor's namespaces need root", file=sys.stderr
        )
        sys.exit(2)
    if args.controlplanes < 1 or args.workers < 0 or not 1 <= args.runs <= 10:
        parser.error("--controlplanes >= 1, --workers >= 0 and --runs 1..10")
    signal.signal(signal.SIGTERM, _interrupt)
    artifacts = ensure_built()
    size = f"{args.controlplanes}+{args.workers}"
    nodes = node_names(args.controlplanes, args.workers)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average at start "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="ichor-bench-kube-") as tmp:
        root = Path(tmp) / "floor"
        root.mkdir()
        with Floor(root, artifacts) as floor:
            floor_seconds = floor.run()
            # The floor's one containerd is the CRI one (Ichor's "cri"; its system containerd has no peer).
            floor_rss = {"cri" if n == "containerd" else n: _rss(pid) for n, pid in floor.pids().items()}
        print(f"floor: node Ready after {floor_seconds:.2f} s ({floor.describe()})")
        for run in range(1, args.runs + 1):
            home, state = Path(tmp) / f"home{run}", Path(tmp) / f"clusters{run}"
            home.mkdir()
            cidr = _free_cidr("container", 0)
            stages: list[tuple[str, float]] = []
            try:
                created = create(
                    home, state, cidr, stages, controlplanes=args.controlplanes, workers=args.workers
                )
                cp = cidr.rsplit(".", 1)[0] + ".2"
                start = time.perf_counter()
                health = _talosctl(home, "-n", cp, "health", "--wait-timeout", "5m", timeout=HEALTH_TIMEOUT)
                health_seconds = time.perf_counter() - start
                if health.returncode != 0:
                    raise RuntimeError(f"talosctl health failed after create:\n{health.stderr[-3000:]}")
                pids = _launcher_pids((state / NAME).resolve())
                memory = {name: node_memory(pid) for name, pid in pids.items()}
                usage = {name: cgroup_usage(NAME, name) for name in pids}
            finally:
                with shielded():
                    start = time.perf_counter()
                    destroy(home, state, cidr, nodes)
                    destroyed = time.perf_counter() - start
            runs.append(phases_of(stages, created))
            print(f"run {run}: cluster create {size} with Kubernetes, every health stage passed, after "
                  f"{created:.2f} s; talosctl health on the healthy cluster {health_seconds:.2f} s; "
                  f"destroy {destroyed:.2f} s")  # fmt: skip
            for stage, at in stages:
                print(f"  {at:7.2f} s  {stage}")
    print()
    for line in phase_table(runs, dict(floor.phases)):
        print(line)
    median = statistics.median(r[CREATE] for r in runs)
    print(f"ratio Ichor create {size} (median of {len(runs)}) / floor node Ready: {median / floor_seconds:.2f}x "
          f"(floor {floor_seconds:.2f} s, Ichor {median:.2f} s)")  # fmt: skip
    print(f"load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("memory of the last run's nodes, once healthy:")
    for line in memory_table(memory, usage, floor_rss):
        print(line)


if __name__ == "__main__":
    main()
