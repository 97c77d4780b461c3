"""``cluster show`` and ``cluster destroy``: a cluster's processes as they are, and ending them all.

Processes are found by the marks every process of the cluster carries (:mod:`._processes`), not
only by the PIDs ``cluster.yaml`` recorded, so a machined whose launcher died, or an etcd whose
machined died, is shown and stopped too. Destroy deletes the state directory only once every one
of them has gone.
"""

from __future__ import annotations

import hashlib
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ichor.machinery.errors import MachineryError
from ichor.provision._container import remove_network
from ichor.provision._network import BLACKHOLE_METRIC
from ichor.provision._processes import ClusterProcess, ProcessId, find, signal_and_wait
from ichor.provision._record import (
    WAITING,
    ClusterRecord,
    LauncherState,
    NodeRecord,
    cluster_flags,
    launcher_state_file,
)

STOP_SIGNALS: tuple[tuple[int, float], ...] = ((signal.SIGTERM, 40.0), (signal.SIGKILL, 5.0))
"""Destroy's escalation: each signal, and how long to wait after it for every process to end."""


def show(state: Path, name: str, now: Callable[[], float] = time.time) -> list[list[str]]:
    record = ClusterRecord.load(state, name)
    state_dir = Path(record.state_dir)
    processes = _processes(record, state_dir)
    rows = [["NAME", "TYPE", "IP", "PID", "STATE"]]
    for node in record.nodes:
        mine = [p for p in processes if p.node == node.name]
        launcher = LauncherState.read(launcher_state_file(state_dir, node.name))
        rows.append(
            [node.name, node.type, node.address, str(node.launcher_pid), _node_state(mine, launcher, now())]
        )
    return rows


def _node_state(processes: list[ClusterProcess], launcher: LauncherState | None, now: float) -> str:
    launchers = [p.id.pid for p in processes if p.role == "launcher"]
    if launchers:
        # The state file counts only while the launcher that wrote it runs.
        if launcher is not None and launcher.launcher_pid in launchers and launcher.state == WAITING:
            left = max(0.0, launcher.restart_at - now)
            return (
                f"crashed (exit code {launcher.last_exit}), restarting in {left:.0f}s "
                f"(crash {launcher.crashes} in a row)"
            )
        return "running"
    if not processes:
        return "stopped"
    return "launcher gone, " + ", ".join(f"{p.role} running (PID {p.id.pid})" for p in processes)


def _recorded_launcher(node: NodeRecord) -> ClusterProcess | None:
    """The launcher cluster.yaml names, if that very process still runs."""
    identity = ProcessId(node.launcher_pid, node.launcher_start)
    if node.launcher_start and identity.alive():
        return ClusterProcess(identity, node.name, ("ichor.provision.launcher",))
    return None


def _processes(record: ClusterRecord | None, state_dir: Path) -> list[ClusterProcess]:
    found = {p.id: p for p in find(state_dir)}
    for node in record.nodes if record else ():
        launcher = _recorded_launcher(node)
        if launcher is not None:
            found.setdefault(launcher.id, launcher)
    return sorted(found.values(), key=lambda p: p.id.pid)


def stop_all(
    record: ClusterRecord | None,
    state_dir: Path,
    progress: Callable[[str], None],
    signals: Sequence[tuple[int, float]] = STOP_SIGNALS,
) -> list[ClusterProcess]:
    """End every process of the cluster; returns those still running after the last signal.

    Launchers go first: a launcher stops its node as a power-off, and machined stops its etcd.
    Then whatever remains (a node whose launcher died, the discovery service) gets each signal in
    turn.
    """
    launchers = [p for p in _processes(record, state_dir) if p.role == "launcher"]
    if launchers and signals:
        sig, timeout = signals[0]
        for p in launchers:
            progress(f"stopping {p.describe()}")
        signal_and_wait([p.id for p in launchers], sig, timeout)
    left: list[ClusterProcess] = []
    for sig, timeout in signals:
        left = _processes(record, state_dir)
        if not left:
            return []
        for p in left:
            verb = "stopping" if sig == signal.SIGTERM else f"sending {signal.Signals(sig).name} to"
            progress(f"{verb} {p.describe()}")
        signal_and_wait([p.id for p in left], sig, timeout)
    return _processes(record, state_dir)


def destroy(
    state: Path,
    name: str,
    progress: Callable[[str], None] = print,
    signals: Sequence[tuple[int, float]] = STOP_SIGNALS,
    *,
    force: bool = False,
) -> None:
    """Stop every process of the cluster and remove its state (and the context create merged);
    with ``force`` the state goes even when a process survives (still an error)."""
    state_dir = state.expanduser() / name
    record: ClusterRecord | None = None
    if state_dir.is_dir() and not (state_dir / "cluster.yaml").exists():
        # A create that stopped before it wrote cluster.yaml: its processes carry the same marks.
        progress(f"{state_dir} has no cluster.yaml (a create that did not finish): removing what is there")
    else:
        record = ClusterRecord.load(state, name)
    tagged_dir = Path(record.state_dir) if record else state_dir.resolve()
    survivors = stop_all(record, tagged_dir, progress, signals)
    if survivors and not force:
        sent = ", ".join(signal.Signals(sig).name for sig, _ in signals)
        raise MachineryError(
            f"{', '.join(p.describe() for p in survivors)} of cluster {name!r} still running after "
            f"{sent}; kept the state directory {state_dir}",
            hint="a process that outlives SIGKILL is stuck in the kernel (state D in "
            f"`ps -o pid,stat,cmd -p {survivors[0].id.pid}`); once it has gone, run "
            f"`talosctl cluster destroy {cluster_flags(state, name)}` again (--force removes the "
            "state directory anyway)",
        )
    if record is not None:
        forget_context(record, progress)
        if not survivors:
            remove_network(record, progress)
    shutil.rmtree(state_dir, ignore_errors=True)
    if survivors:
        pids = " ".join(str(p.id.pid) for p in survivors)
        network = _kept_network(record)
        raise MachineryError(
            f"{', '.join(p.describe() for p in survivors)} of cluster {name!r} still running; removed "
            f"the state directory {state_dir} anyway (--force){network}",
            hint=f"end them yourself once they can be ended: `kill -9 {pids}`"
            + (", then remove the network as shown" if network else ""),
        )
    progress(f"destroyed cluster {name!r}")


def _kept_network(record: ClusterRecord | None) -> str:
    """While a node may still send, its network stays, the blackhole above all: how to remove it."""
    if record is None or not (record.bridge or record.blackhole):
        return ""
    steps = [f"ip link del {bridge}" for bridge in (record.extra_bridge, record.bridge) if bridge]
    if record.firewall:
        steps.append(f"nft delete table inet {record.firewall}")
    for cidr in (record.extra_blackhole, record.blackhole):
        if cidr:
            steps.append(f"ip route del blackhole {cidr} metric {BLACKHOLE_METRIC}")
    return "; kept its network: remove it with `" + " && ".join(steps) + "`"


def context_digest(ca: str) -> str:
    return hashlib.sha256(ca.encode()).hexdigest()


def forget_context(record: ClusterRecord, progress: Callable[[str], None]) -> None:
    """Remove the context create merged into the talosconfig, while it still holds this cluster's
    CA (its credentials are worth nothing once the cluster is gone), so the next create of the same
    name is not renamed ``<name>-1``. If it was current, the context that was current before create
    is current again (or none is)."""
    from ichor.machinery.clientconfig import TalosConfig
    from ichor.machinery.errors import ClientConfigError

    if not record.talosconfig or not record.context:
        return
    path = Path(record.talosconfig)
    try:
        config = TalosConfig.load(path)
    except ClientConfigError as exc:
        progress(f"left the talosconfig alone: {exc}")
        return
    context = config.contexts.get(record.context)
    if context is None:
        return
    if context_digest(context.ca) != record.context_ca:
        progress(f"kept context {record.context!r} in {path}: it no longer holds this cluster's CA")
        return
    del config.contexts[record.context]
    note = ""
    if config.context == record.context:
        if record.previous_context in config.contexts:
            config.context = record.previous_context
            note = f"; the current context is {record.previous_context!r} again"
        else:
            config.context = None
            note = " (it was the current context: choose another with `talosctl config context <name>`)"
    config.save(path)
    progress(f"removed context {record.context!r} from {path}{note}")
