"""What each screen shows, as rich renderables made from a :class:`NodeSnapshot` (no textual here).

Kept apart from the widgets so a screen's content can be checked without a terminal.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from rich.table import Table
from rich.text import Text

from ichor.cli._etcd import humanize_bytes
from ichor.cli.dashboard._data import (
    NO_CONFIG_URL,
    NO_KUBERNETES,
    NO_LINKS,
    NO_SMBIOS,
    NO_SYSTEM_STAT,
    NodeSnapshot,
    Process,
)

SCREENS = {"summary": "Summary", "monitor": "Monitor", "network": "Network", "config": "Config URL"}
"""Screen ids and titles, in their F-key order (F1 = summary)."""

KEYS = "F1-F4: screens   h/←, l/→: node   [ / ]: log service   j/k: processes   q: quit"


def uptime_text(uptime: timedelta | None) -> str:
    from ichor.machinery import goduration

    if uptime is None:
        return "n/a"
    return goduration.format(timedelta(seconds=int(max(uptime.total_seconds(), 0))))


def header(snap: NodeSnapshot | None, node: str, now: datetime) -> Text:
    """Talos's header line: ``<hostname> (<version>): uptime ..., PROCS n, CPU x%, RAM y%``."""
    if snap is None:
        return Text(f"{node}: connecting...")
    if "node" in snap.errors:
        return Text(f"{node}: {snap.errors['node']}", style="red")
    name = snap.hostname or node
    parts = [f"uptime {uptime_text(snap.uptime(now))}"]
    if "processes" not in snap.errors:
        parts.append(f"PROCS {len(snap.processes)}")
        parts.append(f"CPU {snap.cpu_percent:.1f}%" if snap.cpu_percent is not None else "CPU measuring")
    if snap.memory is not None:
        parts.append(f"RAM {snap.memory.percent:.1f}% of {humanize_bytes(snap.memory.total)}")
    text = Text()
    text.append(name, style="bold")
    text.append(f" ({snap.version or 'version n/a'}): " + ", ".join(parts))
    return text


def tabs(active: str, nodes: list[str], selected: int) -> Text:
    """The screen bar (``[F1: Summary]``...) and the node list, the selected one bracketed."""
    text = Text()
    for number, (screen, title) in enumerate(SCREENS.items(), start=1):
        label = f"F{number}: {title}"
        text.append(
            f"[{label}]" if screen == active else f" {label} ", style="reverse" if screen == active else ""
        )
        text.append(" ")
    text.append("  nodes: ")
    for i, node in enumerate(nodes):
        text.append(
            f"[{node}]" if i == selected else f" {node} ", style="bold reverse" if i == selected else ""
        )
        text.append(" ")
    return text


def _grid(title: str) -> Table:
    table = Table.grid(padding=(0, 2))
    table.title = title
    table.title_justify = "left"
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    return table


def _error_rows(table: Table, snap: NodeSnapshot, *parts: str) -> None:
    for part in parts:
        if part in snap.errors:
            table.add_row("ERROR", Text(f"{part}: {snap.errors[part]}", style="red"))


def _service_state(snap: NodeSnapshot, service_id: str) -> str:
    service = snap.service(service_id)
    if service is None:
        return "n/a (not a service of this node)"
    health = {"OK": "healthy", "Fail": "unhealthy", "?": "health unknown"}[service.health]
    return f"{service.state}, {health}"


def summary(snap: NodeSnapshot) -> Table:
    """F1's machine table (Talos's UUID, CLUSTER, STAGE, READY, TYPE, ... rows)."""
    table = _grid("Summary")
    table.add_row("UUID", str(NO_SMBIOS))
    table.add_row("CLUSTER", snap.cluster_name or "n/a (the machine config names none)")
    table.add_row("STAGE", snap.stage.capitalize() or "n/a")
    ready = "n/a" if snap.ready is None else str(snap.ready)
    if snap.unmet:
        ready += " (" + "; ".join(snap.unmet) + ")"
    table.add_row("READY", ready)
    table.add_row("TYPE", snap.machine_type or "n/a")
    table.add_row("MEMBERS", str(len(snap.members)) if snap.members else "n/a (none discovered)")
    table.add_row("KUBERNETES", snap.kubernetes or str(NO_KUBERNETES))
    table.add_row("ETCD", _service_state(snap, "etcd"))
    table.add_row("", "")
    table.add_row("HOST", snap.hostname or "n/a")
    table.add_row("IP", ", ".join(snap.addresses) or "n/a")
    table.add_row(
        "TIME", "n/a" if snap.time_synced is None else ("synced" if snap.time_synced else "not synced")
    )
    table.add_row("", "")
    for service in snap.services:
        table.add_row(service.id.upper(), f"{service.state} [{service.health}]")
    _error_rows(table, snap, "version", "status", "cluster", "network", "services")
    return table


def monitor_facts(snap: NodeSnapshot) -> Table:
    """F2's load lines above the graphs, with what a process node cannot report."""
    table = _grid("Monitor")
    if snap.cpu_percent is not None:
        table.add_row(
            "CPU", f"{snap.cpu_percent:.1f}% of one core, by the node's {len(snap.processes)} processes"
        )
    else:
        table.add_row("CPU", "measuring (shown from the second update on)")
    if snap.memory is not None:
        m = snap.memory
        table.add_row(
            "RAM",
            f"{humanize_bytes(m.used)} used of {humanize_bytes(m.total)} ({m.percent:.1f}%), host memory",
        )
    _system_rows(table, snap)
    _error_rows(table, snap, "processes", "memory", "system")
    return table


HOST_WIDE = "host-wide: the node shares the host's kernel"


def _rate(rates_per_second: float) -> str:
    return f"{humanize_bytes(int(rates_per_second))}/s"


def _system_rows(table: Table, snap: NodeSnapshot) -> None:
    """CPU, load, network and disk from SystemStat & co., each saying whose figures they are."""
    facts = snap.system
    if facts is None:
        if "system" not in snap.errors:
            table.add_row("CORES / LOAD", str(NO_SYSTEM_STAT))
            table.add_row("NET / DISK I/O", str(NO_SYSTEM_STAT))
        return
    load = " ".join(f"{v:.2f}" for v in facts.load)
    cores = f"{facts.cores} x {facts.model}" if facts.model else f"{facts.cores}"
    table.add_row("CORES / LOAD", f"{cores}, load {load} ({HOST_WIDE})")
    busy = (
        "measuring (shown from the second update on)"
        if facts.cpu_busy is None
        else f"{facts.cpu_busy:.1f}% busy"
    )
    table.add_row("HOST CPU", f"{busy} ({HOST_WIDE})")
    whose = (
        "the host's links: a process node shares its network"
        if snap.platform == "process"
        else "the node's own links"
    )
    if facts.network is None:
        table.add_row("NET I/O", f"measuring ({', '.join(facts.links)}; {whose})")
    else:
        net = facts.network
        table.add_row(
            "NET I/O", f"rx {_rate(net.received)} tx {_rate(net.sent)} ({', '.join(facts.links)}; {whose})"
        )
    if facts.disk is None:
        table.add_row("DISK I/O", f"measuring ({HOST_WIDE})")
    else:
        table.add_row(
            "DISK I/O",
            f"read {_rate(facts.disk.received)} write {_rate(facts.disk.sent)} (every block device, {HOST_WIDE})",
        )


_BLOCKS = " ▁▂▃▄▅▆▇█"


def graph(values: list[float], width: int, height: int = 3) -> str:
    """A bar graph of percentages on a fixed 0-100 scale (higher when a value is above 100), newest
    on the right, one column per sample, ``height`` rows of eight steps each."""
    shown = values[-width:] if width > 0 else []
    top = max([100.0, *shown])
    steps = [math.ceil(max(v, 0.0) / top * height * 8) for v in shown]  # any load shows
    rows = []
    for row in range(height - 1, -1, -1):  # top row first
        cells = (_BLOCKS[min(max(step - row * 8, 0), 8)] for step in steps)
        rows.append("".join(cells).rjust(width))
    return "\n".join(rows)


PROCESS_COLUMNS = ("PID", "STATE", "THREADS", "CPU%", "CPU-TIME", "VIRT", "RES", "COMMAND")


def process_rows(snap: NodeSnapshot) -> list[tuple[str, ...]]:
    """The process table, busiest first (CPU share, then resident memory)."""

    def key(p: Process) -> tuple[float, int]:
        return (p.cpu_percent or 0.0, p.resident_memory)

    return [
        (
            str(p.pid),
            p.state,
            str(p.threads),
            "-" if p.cpu_percent is None else f"{p.cpu_percent:.1f}",
            f"{p.cpu_time:.2f}",
            humanize_bytes(p.virtual_memory),
            humanize_bytes(p.resident_memory),
            p.command,
        )
        for p in sorted(snap.processes, key=key, reverse=True)
    ]


def network(snap: NodeSnapshot) -> Any:
    """F3: the node's names and addresses, and the cluster members it discovered."""
    from rich.console import Group

    ident = _grid("Network")
    ident.add_row("HOSTNAME", snap.hostname or "n/a")
    ident.add_row("ADDRESSES", ", ".join(snap.addresses) or "n/a")
    ident.add_row("LINKS / ROUTES", str(NO_LINKS))
    _error_rows(ident, snap, "network", "cluster")

    addresses = Table(title="Addresses", title_justify="left", box=None, padding=(0, 2))
    for column in ("LINK", "ADDRESS", "FAMILY", "SCOPE", "FLAGS"):
        addresses.add_column(column, no_wrap=True)
    for a in snap.address_statuses:
        addresses.add_row(a.link, a.address, a.family, a.scope, a.flags)

    members = Table(title="Members", title_justify="left", box=None, padding=(0, 2))
    for column in ("HOSTNAME", "TYPE", "ADDRESSES", "OS"):
        members.add_column(column, no_wrap=True)
    for m in snap.members:
        members.add_row(m.hostname, m.machine_type, ", ".join(m.addresses), m.operating_system)
    return Group(ident, Text(""), addresses, Text(""), members)


def config(snap: NodeSnapshot, node: str) -> Table:
    """F4: where this node's machine config comes from, and how to give it a new one."""
    table = _grid("Config URL")
    table.add_row("CONFIG URL", str(NO_CONFIG_URL))
    table.add_row("PLATFORM", snap.platform or "n/a")
    info = snap.config
    if info is None:
        table.add_row("MACHINE CONFIG", "n/a")
    elif info.version:
        updated = info.updated.strftime("%Y-%m-%d %H:%M:%S UTC") if info.updated else "n/a"
        table.add_row(
            "MACHINE CONFIG", f"loaded from STATE (/system/state/config.yaml), version {info.version}"
        )
        table.add_row("UPDATED", updated)
        table.add_row("ACQUIRED", "yes" if info.acquired else "no (waiting for a config)")
        table.add_row("CHANGE IT", f"talosctl -n {node} apply-config --file <config.yaml>")
    else:
        table.add_row("MACHINE CONFIG", "none: the node is in maintenance mode")
        table.add_row("GIVE IT ONE", f"talosctl apply-config --insecure -n {node} --file <controlplane.yaml>")
    _error_rows(table, snap, "config", "version")
    return table
