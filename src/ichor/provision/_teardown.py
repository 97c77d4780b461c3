"""``cluster show`` and ``cluster destroy``: a cluster's processes as they are, and ending them all.

Processes are found by the marks every process of the cluster carries (:mod:`._processes`), not
only by the PIDs ``cluster.yaml`` recorded, so a machined whose launcher died, or an etcd whose
machined died, is shown and stopped too. Destroy removes what the cluster holds on the host
(:mod:`._remains`, from its record and from its name) only once every one of them has gone, and its
state directory, ``cluster.yaml`` last, only once nothing of it is left on the host: so a rerun of
an interrupted destroy finds and completes whatever remains.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ichor.machinery.errors import MachineryError
from ichor.provision import _remains
from ichor.provision._network import BLACKHOLE_METRIC
from ichor.provision._processes import ClusterProcess, ProcessId, find, signal_and_wait
from ichor.provision._provisioner import ProvisionerName, provisioner_for
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


def show_more(state: Path, name: str) -> list[list[str]]:
    """The provisioner's own table for ``cluster show`` (a VM's PID, disks, console log, monitor
    socket), the header first; empty when it has none."""
    record = ClusterRecord.load(state, name)
    return provisioner_for(record.provisioner).show_rows(record)


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
    host: _remains.Host | None = None,
) -> None:
    """Stop every process of the cluster, remove what it holds on the host (the blackhole route
    last), then its state, ``cluster.yaml`` last; with ``force`` the state goes even when a process
    survives (still an error). Each step leaves what the next needs, so a destroy that was
    interrupted, at any point, is completed by running it again; and it says "destroyed" only once
    nothing of the cluster is left. A first SIGINT/SIGTERM lets it finish; a second stops it."""
    with _interrupts_deferred(progress, cluster_flags(state, name)):
        _destroy(state, name, progress, signals, force, host or _remains.LinuxHost())


def _destroy(
    state: Path,
    name: str,
    progress: Callable[[str], None],
    signals: Sequence[tuple[int, float]],
    force: bool,
    host: _remains.Host,
) -> None:
    state_dir = state.expanduser() / name
    flags = cluster_flags(state, name)
    record: ClusterRecord | None = None
    if state_dir.is_dir() and not (state_dir / "cluster.yaml").exists():
        # A create that stopped before it wrote cluster.yaml, or a destroy interrupted by an older
        # Ichor: its processes carry the same marks, and the name derives what it made.
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
            f"`talosctl cluster destroy {flags}` again (--force removes the "
            "state directory anyway)",
        )
    if record is not None:
        forget_context(record, progress)
    if not survivors:
        # Without a record the provisioner is unknown: the qemu one's parts are the widest (the
        # container one's network, and taps).
        provider = provisioner_for(record.provisioner if record else ProvisionerName.QEMU)
        found = provider.host_parts(record, name, state_dir, host)
        kept: MachineryError | None = None
        try:
            _remains.remove(found, host, progress)
        except MachineryError as exc:
            kept = exc
        if remains := _remains.left(found, host):
            raise MachineryError(
                f"cluster {name!r} is not destroyed: left on this machine {'; '.join(remains)}"
                + (f" ({kept})" if kept else "")
                + f"; kept its state directory {state_dir}",
                hint=f"run `talosctl cluster destroy {flags}` again; if that leaves the same, remove "
                "each by hand with the command shown (the blackhole route last)",
            )
    _remove_state(state_dir)
    if state_dir.exists():
        raise MachineryError(
            f"cluster {name!r}: its host resources are gone but its state directory {state_dir} is left",
            hint=f"see what holds it (`findmnt -R {state_dir}`, `lsof +D {state_dir}`), then run "
            f"`talosctl cluster destroy {flags}` again",
        )
    if survivors:
        pids = " ".join(str(p.id.pid) for p in survivors)
        network = _kept_network(record)
        raise MachineryError(
            f"{', '.join(p.describe() for p in survivors)} of cluster {name!r} still running; removed "
            f"the state directory {state_dir} anyway (--force){network}",
            hint=f"end them yourself once they can be ended: `kill -9 {pids}`"
            + (", then remove the network as shown" if network else ""),
        )
    if record is not None and record.kubeconfig and record.kube_context:
        from ichor.provision._kubeconfig import removal_hint

        progress(removal_hint(record.kubeconfig, record.kube_context))
    progress(f"destroyed cluster {name!r}")


def _remove_state(state_dir: Path) -> None:
    """Everything in the state directory, then ``cluster.yaml`` (the record of what the host held),
    then the directory: interrupted anywhere, the record is there for the rerun while anything is."""
    if not state_dir.is_dir():
        return
    for entry in state_dir.iterdir():
        if entry.name == "cluster.yaml":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if not [e for e in state_dir.iterdir() if e.name != "cluster.yaml"]:
        (state_dir / "cluster.yaml").unlink(missing_ok=True)
        state_dir.rmdir()


@contextlib.contextmanager
def _interrupts_deferred(progress: Callable[[str], None], flags: str) -> Iterator[None]:
    """While destroy runs, a first SIGINT or SIGTERM is noted and destroy finishes; a second raises
    KeyboardInterrupt (the state left is one a rerun completes)."""
    got: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        got.append(signum)
        if len(got) > 1:
            raise KeyboardInterrupt
        progress(
            f"{signal.Signals(signum).name}: finishing the destroy first (again to stop it now; "
            f"`talosctl cluster destroy {flags}` then completes it)"
        )

    try:
        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: no signal reaches us
        yield
        return
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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
