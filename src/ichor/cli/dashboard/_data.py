"""The dashboard's data: what one poll of a node returns, and the poller that asks for it.

A :class:`NodeSource` asks one node for everything the screens show, through the same Talos API
calls ``talosctl version/services/memory/processes/logs/get`` make, and returns a
:class:`NodeSnapshot`. A call that fails leaves its part of the snapshot empty and its error in
``snapshot.errors[<part>]``, so one broken part never hides the others. Facts the node's API does
not serve are :class:`Unavailable` with the reason, never a made-up number.

This module knows nothing of textual; the screens (``_app``) only render snapshots.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

HISTORY = 60
"""Samples of CPU and memory load kept for the monitor's graphs."""

LOG_LINES = 200
"""Lines of a service's log the logs panel shows (the newest)."""


@dataclass(frozen=True)
class Unavailable:
    """A fact this node does not serve, and why; shown as ``n/a (<why>)``."""

    why: str

    def __str__(self) -> str:
        return f"n/a ({self.why})"


NO_SMBIOS = Unavailable("a process node has no SMBIOS")
NO_KUBERNETES = Unavailable("the node runs no kubelet; process nodes run no Kubernetes")
NO_SYSTEM_STAT = Unavailable("the node serves no SystemStat/CPUInfo")

_UNIMPLEMENTED = 12
_SECTOR = 512
"""Bytes per sector in /proc/diskstats, whatever the device's own sector size."""
NO_LINKS = Unavailable("a process node shares the host's links and routes")
NO_CONFIG_URL = Unavailable("a process node has no kernel command line (talos.config)")


@dataclass(frozen=True)
class Service:
    id: str
    state: str
    health: str
    """``OK``, ``Fail`` or ``?`` as ``talosctl services`` prints it."""
    last_event: str


@dataclass(frozen=True)
class Process:
    pid: int
    state: str
    threads: int
    cpu_time: float
    cpu_percent: float | None
    """Share of one core since the previous poll; None on the first poll of this process."""
    virtual_memory: int
    resident_memory: int
    command: str


@dataclass(frozen=True)
class Member:
    hostname: str
    machine_type: str
    addresses: list[str]
    operating_system: str


@dataclass(frozen=True)
class Address:
    link: str
    address: str
    family: str
    scope: str
    flags: str


@dataclass(frozen=True)
class Memory:
    total: int
    """Bytes."""
    available: int

    @property
    def used(self) -> int:
        return self.total - self.available

    @property
    def percent(self) -> float:
        return 100 * self.used / self.total if self.total else 0.0


@dataclass(frozen=True)
class Rates:
    """Bytes per second between two polls."""

    received: float
    sent: float


@dataclass(frozen=True)
class SystemFacts:
    """What SystemStat, CPUInfo, LoadAvg, NetworkDeviceStats and DiskStats said. CPU, load and disk
    are the kernel's, so on a node sharing the host's kernel they are the host's; the network
    devices are those of the node's network namespace (the host's on a process node)."""

    cores: int
    model: str
    load: tuple[float, float, float]
    cpu_busy: float | None
    """Percent of all cores busy (host-wide) since the previous poll; None on the first."""
    links: list[str]
    network: Rates | None
    """All links together, received and sent; None on the first poll."""
    disk: Rates | None
    """All block devices together, read (``received``) and written (``sent``); None on the first poll."""


@dataclass(frozen=True)
class ConfigInfo:
    version: str
    updated: datetime | None
    acquired: bool


@dataclass
class NodeSnapshot:
    """Everything one poll learned about a node; parts that failed are empty and named in ``errors``."""

    node: str
    hostname: str = ""
    version: str = ""
    platform: str = ""
    booted: datetime | None = None
    stage: str = ""
    ready: bool | None = None
    unmet: list[str] = field(default_factory=list)
    machine_type: str = ""
    cluster_name: str = ""
    kubernetes: str = ""
    """The Kubernetes version the node's kubelet runs (its image's tag), empty without a kubelet."""
    members: list[Member] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)
    address_statuses: list[Address] = field(default_factory=list)
    time_synced: bool | None = None
    services: list[Service] = field(default_factory=list)
    memory: Memory | None = None
    processes: list[Process] = field(default_factory=list)
    cpu_percent: float | None = None
    """The node's processes together, in percent of one core (as ``top`` counts)."""
    config: ConfigInfo | None = None
    system: SystemFacts | None = None
    errors: dict[str, str] = field(default_factory=dict)

    def service(self, service_id: str) -> Service | None:
        return next((s for s in self.services if s.id == service_id), None)

    def uptime(self, now: datetime) -> timedelta | None:
        return now - self.booted if self.booted is not None else None


def _spec(resource: Any) -> Any:
    from ichor.machinery.yamlio import load_documents, to_plain

    docs = load_documents(resource.spec.yaml_spec or "{}", source=resource.metadata.type)
    return to_plain(docs[0]) if docs else {}


def _timestamp(ts: Any) -> datetime:
    return datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, UTC)


def _health(info: Any) -> str:
    if info.health.unknown:
        return "?"
    return "OK" if info.health.healthy else "Fail"


class NodeSource:
    """Polls one node (a client view bound to it) and remembers what CPU load needs between polls.

    ``monotonic`` is the clock CPU shares are measured against (injectable for tests).
    """

    def __init__(self, client: Any, node: str, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.node = node
        self._monotonic = monotonic
        self._cpu_times: dict[int, float] = {}
        self._sampled_at: float | None = None
        self.cpu_history: deque[float] = deque(maxlen=HISTORY)
        self.memory_history: deque[float] = deque(maxlen=HISTORY)
        self._counters: tuple[float, tuple[float, float], tuple[int, int], tuple[int, int]] | None = None
        """At the previous SystemStat poll: when, (busy, all) CPU seconds, network and disk bytes."""
        self._cpu_model: tuple[int, str] | None = None

    async def poll(self) -> NodeSnapshot:
        snap = NodeSnapshot(node=self.node)
        parts: dict[str, Callable[[NodeSnapshot], Awaitable[None]]] = {
            "version": self._version,
            "services": self._services,
            "memory": self._memory,
            "processes": self._processes,
            "status": self._status,
            "cluster": self._cluster,
            "network": self._network,
            "config": self._config,
            "system": self._system,
        }
        await asyncio.gather(*(self._attempt(name, part, snap) for name, part in parts.items()))
        if len(snap.errors) == len(parts):  # nothing answered: one error for the node, not one per part
            snap.errors = {"node": snap.errors["version"]}
        if snap.cpu_percent is not None:
            self.cpu_history.append(snap.cpu_percent)
        if snap.memory is not None:
            self.memory_history.append(snap.memory.percent)
        return snap

    async def _attempt(
        self, name: str, part: Callable[[NodeSnapshot], Awaitable[None]], snap: NodeSnapshot
    ) -> None:
        from ichor.client import ClientError
        from ichor.machinery.errors import MachineryError

        try:
            await part(snap)
        except ClientError as exc:
            snap.errors[name] = str(exc).splitlines()[0]
        except MachineryError as exc:  # a resource spec that is not YAML
            snap.errors[name] = str(exc)

    async def _resources(self, namespace: str, rtype: str) -> list[Any]:
        return list(await self.client.list_resources(namespace, rtype))

    async def _resource(self, namespace: str, rtype: str) -> Any:
        """The spec of the first (only) resource of a type, or None when the node has none."""
        found = await self._resources(namespace, rtype)
        return (_spec(found[0]), found[0]) if found else (None, None)

    async def _version(self, snap: NodeSnapshot) -> None:
        from google.protobuf import empty_pb2

        reply = await self.client.machine.Version(empty_pb2.Empty())
        message = reply.messages[0]
        snap.version = message.version.tag
        snap.platform = message.platform.name

    async def _services(self, snap: NodeSnapshot) -> None:
        from google.protobuf import empty_pb2

        reply = await self.client.machine.ServiceList(empty_pb2.Empty())
        for info in reply.messages[0].services:
            events = list(info.events.events)
            snap.services.append(
                Service(info.id, info.state, _health(info), events[-1].msg if events else "")
            )
            # machined's first event is when this boot of the node started: its uptime.
            if info.id == "machined" and events:
                snap.booted = _timestamp(events[0].ts)

    async def _memory(self, snap: NodeSnapshot) -> None:
        from google.protobuf import empty_pb2

        reply = await self.client.machine.Memory(empty_pb2.Empty())
        info = reply.messages[0].meminfo
        snap.memory = Memory(total=info.memtotal * 1024, available=info.memavailable * 1024)

    async def _processes(self, snap: NodeSnapshot) -> None:
        from google.protobuf import empty_pb2

        reply = await self.client.machine.Processes(empty_pb2.Empty())
        now = self._monotonic()
        elapsed = now - self._sampled_at if self._sampled_at is not None else None
        seen: dict[int, float] = {}
        total: float | None = 0.0 if elapsed else None
        for p in reply.messages[0].processes:
            seen[p.pid] = p.cpu_time
            previous = self._cpu_times.get(p.pid)
            share = None
            if elapsed and previous is not None:
                share = max(0.0, 100 * (p.cpu_time - previous) / elapsed)
                total = (total or 0.0) + share
            snap.processes.append(
                Process(
                    p.pid,
                    p.state,
                    p.threads,
                    p.cpu_time,
                    share,
                    p.virtual_memory,
                    p.resident_memory,
                    p.args or p.command,
                )
            )
        self._cpu_times, self._sampled_at = seen, now
        snap.cpu_percent = total

    async def _status(self, snap: NodeSnapshot) -> None:
        status, _ = await self._resource("runtime", "MachineStatuses.runtime.talos.dev")
        if status is not None:
            snap.stage = str(status.get("stage", ""))
            ready = (status.get("status") or {}).get("ready")
            snap.ready = bool(ready) if ready is not None else None
            snap.unmet = [
                f"{c.get('name', '')}: {c.get('reason', '')}"
                for c in (status.get("status") or {}).get("unmetConditions") or []
            ]
        machine_type, _ = await self._resource("config", "MachineTypes.config.talos.dev")
        snap.machine_type = str(machine_type or "")
        synced, _ = await self._resource("runtime", "TimeStatuses.v1alpha1.talos.dev")
        snap.time_synced = bool(synced.get("synced")) if synced else None

    async def _cluster(self, snap: NodeSnapshot) -> None:
        info, _ = await self._resource("cluster", "Infos.cluster.talos.dev")
        snap.cluster_name = str((info or {}).get("clusterName", ""))
        kubelet, _ = await self._resource("k8s", "KubeletSpecs.kubernetes.talos.dev")
        image = str((kubelet or {}).get("image", "")).rsplit("/", 1)[-1]
        snap.kubernetes = image.rsplit(":", 1)[1] if ":" in image else ""
        for resource in await self._resources("cluster", "Members.cluster.talos.dev"):
            m = _spec(resource)
            snap.members.append(
                Member(
                    str(m.get("hostname", resource.metadata.id)),
                    str(m.get("machineType", "")),
                    [str(a) for a in m.get("addresses") or []],
                    str(m.get("operatingSystem", "")),
                )
            )

    async def _network(self, snap: NodeSnapshot) -> None:
        hostname, _ = await self._resource("network", "HostnameStatuses.net.talos.dev")
        snap.hostname = str((hostname or {}).get("hostname", ""))
        for resource in await self._resources("network", "NodeAddresses.net.talos.dev"):
            if resource.metadata.id == "current":
                snap.addresses = [str(a) for a in _spec(resource).get("addresses") or []]
        for resource in await self._resources("network", "AddressStatuses.net.talos.dev"):
            a = _spec(resource)
            snap.address_statuses.append(
                Address(
                    str(a.get("linkName", "")),
                    str(a.get("address", "")),
                    str(a.get("family", "")),
                    str(a.get("scope", "")),
                    str(a.get("flags", "")),
                )
            )

    async def _system(self, snap: NodeSnapshot) -> None:
        from google.protobuf import empty_pb2

        from ichor.client import RPCError

        empty = empty_pb2.Empty()
        try:
            stat = (await self.client.machine.SystemStat(empty)).messages[0]
        except RPCError as exc:
            if exc.code == _UNIMPLEMENTED:  # an older node: the screens say it serves none
                return
            raise
        load = (await self.client.machine.LoadAvg(empty)).messages[0]
        net = (await self.client.machine.NetworkDeviceStats(empty)).messages[0]
        disk = (await self.client.machine.DiskStats(empty)).messages[0].total
        if self._cpu_model is None:
            cpus = (await self.client.machine.CPUInfo(empty)).messages[0].cpu_info
            self._cpu_model = (len(cpus), cpus[0].model_name if cpus else "")
        t = stat.cpu_total
        busy = t.user + t.nice + t.system + t.irq + t.soft_irq + t.steal
        counters = (
            self._monotonic(),
            (busy, busy + t.idle + t.iowait),
            (net.total.rx_bytes, net.total.tx_bytes),
            (disk.read_sectors * _SECTOR, disk.write_sectors * _SECTOR),
        )
        cpu_busy = network = disk_rates = None
        if self._counters is not None:
            elapsed = counters[0] - self._counters[0]
            cpu_all = counters[1][1] - self._counters[1][1]
            if cpu_all > 0:
                cpu_busy = 100 * (counters[1][0] - self._counters[1][0]) / cpu_all
            if elapsed > 0:
                network = Rates(
                    *(
                        (now - then) / elapsed
                        for now, then in zip(counters[2], self._counters[2], strict=True)
                    )
                )
                disk_rates = Rates(
                    *(
                        (now - then) / elapsed
                        for now, then in zip(counters[3], self._counters[3], strict=True)
                    )
                )
        self._counters = counters
        cores, model = self._cpu_model
        snap.system = SystemFacts(
            cores=cores or len(stat.cpu), model=model, load=(load.load1, load.load5, load.load15),
            cpu_busy=cpu_busy, links=[d.name for d in net.devices], network=network, disk=disk_rates,
        )  # fmt: skip

    async def _config(self, snap: NodeSnapshot) -> None:
        configs = await self._resources("config", "MachineConfigs.config.talos.dev")
        acquired, _ = await self._resource("runtime", "AcquireConfigStatuses.v1alpha1.talos.dev")
        # Only the metadata is shown: the spec is the whole config, secrets included.
        current = next((c for c in configs if c.metadata.id == "v1alpha1"), None)
        snap.config = ConfigInfo(
            version=current.metadata.version if current is not None else "",
            updated=_timestamp(current.metadata.updated) if current is not None else None,
            acquired=acquired is not None,
        )

    async def logs(self, service: str, lines: int = LOG_LINES) -> list[str]:
        """The last ``lines`` lines of a service's log (``talosctl logs <service> --tail N``)."""
        from ichor.api.gen.machine import machine_pb2

        request = machine_pb2.LogsRequest(namespace="system", id=service, tail_lines=lines)
        chunks = []
        async with self.client.machine.Logs.open() as call:
            await call.send_message(request, end=True)
            async for data in call:
                chunks.append(data.bytes)
        text = b"".join(chunks).decode(errors="replace")
        return text.splitlines()[-lines:]
