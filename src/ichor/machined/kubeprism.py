"""KubePrism: the node-local TCP load balancer in front of the Kubernetes API servers.

Talos 1.7 listens on ``127.0.0.1:<machine.features.kubePrism.port>`` (7445) in every node and
forwards each connection, unchanged, to one healthy upstream API server. Upstreams are scored as
siderolabs/go-loadbalancer scores them:

* a new upstream starts at score +1 in tier 0; the score stays within [-3, +3];
* a health check (a TCP connect, every :data:`HEALTH_INTERVAL` with :data:`HEALTH_TIMEOUT`) that
  fails lowers the score by 1 and keeps the tier; one that succeeds raises it by 1 and sets the tier
  from the connect latency (< 1 ms: 0, < 10 ms: 2, < 100 ms: 3, else 4);
* a failed dial for a client connection lowers the score by 1 too;
* an upstream is used while its score is >= 0: the lowest tier first, round robin inside a tier;
* while none is usable, rounds come every :data:`RECOVERY_INTERVAL` instead, also when failed client
  dials (not a round) made the last one unusable in the middle of an interval.

What this balancer must not do: buffer without bound (each direction reads at most
``buffer_size`` bytes and waits for the peer to take them before reading more), hold more than
``max_connections`` client connections (one more is closed at once, and says so in the log), drop
established connections when the upstream list changes, or run CPU-heavy work on the event loop
(it only moves bytes). ``on_health_change`` is called whenever :meth:`Balancer.healthy` flips. Entries of the upstream list that are not ``host:port`` are ignored with the
reason logged. Time (health intervals, latency) is injectable, so tests run without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType

from ichor.machinery.aio import race

__all__ = [
    "DIAL_TIMEOUT",
    "HEALTH_INTERVAL",
    "HEALTH_TIMEOUT",
    "Balancer",
    "Log",
    "Upstream",
    "parse_upstream",
]

HEALTH_INTERVAL = 20.0
"""Seconds between health check rounds (Talos's ``KubePrismHealthCheckInterval``)."""
HEALTH_TIMEOUT = 15.0
"""Seconds a health check connect may take (``KubePrismHealthCheckTimeout``)."""
RECOVERY_INTERVAL = 1.0
"""Seconds between health check rounds while no upstream may be used: an API server that comes
back (a restart, the first start) is used again within seconds, not after three 20 s rounds."""
DIAL_TIMEOUT = 15.0
"""Seconds a client connection's upstream dial may take (``KubePrismDialTimeout``)."""

_LOW_SCORE, _HIGH_SCORE, _INITIAL_SCORE = -3.0, 3.0, 1.0
_MAX_TIER = 4
_TIER_FLOORS = (0.0, 0.001, 0.001, 0.010, 0.100, 1.0)
"""Latency floors of tiers 0..5 (go-loadbalancer's table; tier 1 is never reached, 5 clips to 4)."""
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")

Sleep = Callable[[float], Awaitable[None]]
Monotonic = Callable[[], float]
Log = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class Upstream:
    """One API server: a host name or IP address and a TCP port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_upstream(host: str, port: object) -> Upstream:
    """An :class:`Upstream`, or ValueError saying what is wrong with ``host``/``port``."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port {port!r} is not a TCP port (1-65535)")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not isinstance(host, str) or not _HOSTNAME.match(host):
            raise ValueError(f"host {host!r} is neither an IP address nor a DNS name") from None
    return Upstream(host, port)


def _tier(latency: float) -> int:
    tier = max(i for i, floor in enumerate(_TIER_FLOORS) if latency >= floor)
    return min(tier, _MAX_TIER)


@dataclasses.dataclass
class _Node:
    upstream: Upstream
    score: float = _INITIAL_SCORE
    tier: int = 0

    def up(self, tier: int) -> None:
        self.score = min(self.score + 1, _HIGH_SCORE)
        self.tier = tier

    def down(self) -> None:
        self.score = max(self.score - 1, _LOW_SCORE)


class Balancer:
    """Listen on ``host:port`` and forward every connection to a healthy upstream.

    Use as ``async with Balancer(...) as lb``: entering binds the listener (OSError if it cannot)
    and starts the health checks; leaving stops both and closes every proxied connection.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        max_connections: int = 1024,
        buffer_size: int = 64 * 1024,
        health_interval: float = HEALTH_INTERVAL,
        health_timeout: float = HEALTH_TIMEOUT,
        dial_timeout: float = DIAL_TIMEOUT,
        sleep: Sleep = asyncio.sleep,
        monotonic: Monotonic = time.monotonic,
        log: Log = lambda _message: None,
        on_health_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.host = host
        self.port = port
        self.max_connections = max_connections
        self.buffer_size = buffer_size
        self.health_interval = health_interval
        self.health_timeout = health_timeout
        self.dial_timeout = dial_timeout
        self._sleep = sleep
        self._monotonic = monotonic
        self._log = log
        self._on_health_change = on_health_change
        self._was_healthy = False
        self._nodes: list[_Node] = []
        self._current = -1
        self._problems: list[str] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._health_task: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()
        """Set when the last usable upstream stops being usable (wakes the health loop)."""

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind the listener (OSError if it cannot) and start the health checks."""
        self._server = await asyncio.start_server(self._accept, self.host, self.port, limit=self.buffer_size)
        self.port = self._server.sockets[0].getsockname()[1]
        self._health_task = asyncio.get_running_loop().create_task(self._health_loop())

    async def __aenter__(self) -> Balancer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [t for t in (self._health_task, *self._connections) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        self._health_task = None

    @property
    def endpoint(self) -> str:
        return str(Upstream(self.host, self.port))

    @property
    def connections(self) -> int:
        """Client connections being proxied (or waiting for their upstream dial) now."""
        return len(self._connections)

    # -- upstreams ---------------------------------------------------------------------------

    def set_upstreams(self, upstreams: Iterable[tuple[str, object]]) -> list[str]:
        """Replace the upstream list, keeping the scores of upstreams that stay; established
        connections are not touched. Entries that are not ``(host, port)`` are ignored, each with
        its reason logged and returned."""
        wanted: list[Upstream] = []
        problems: list[str] = []
        for entry in upstreams:
            try:
                host, port = entry
                upstream = parse_upstream(host, port)
            except (TypeError, ValueError) as err:
                problems.append(f"upstream {entry!r} ignored: {err}")
                continue
            if upstream not in wanted:
                wanted.append(upstream)
        if wanted != self.upstreams or problems != self._problems:
            for problem in problems:
                self._log(problem)
        self._problems = problems
        known = {node.upstream: node for node in self._nodes}
        self._nodes = [known.get(upstream) or _Node(upstream) for upstream in wanted]
        self._current = min(self._current, len(self._nodes) - 1)
        self._health_changed()
        return problems

    @property
    def upstreams(self) -> list[Upstream]:
        return [node.upstream for node in self._nodes]

    def healthy(self) -> bool:
        """True while at least one upstream may be used (score >= 0)."""
        return any(node.score >= 0 for node in self._nodes)

    def pick(self) -> Upstream | None:
        """The next upstream to use: the lowest tier with a usable upstream, round robin in it."""
        node = self._pick_node(exclude=())
        return node.upstream if node is not None else None

    def _pick_node(self, exclude: Iterable[_Node]) -> _Node | None:
        skip = {id(n) for n in exclude}
        count = len(self._nodes)
        for tier in range(_MAX_TIER + 1):
            for step in range(count):
                i = (self._current + 1 + step) % count
                node = self._nodes[i]
                if node.tier == tier and node.score >= 0 and id(node) not in skip:
                    self._current = i
                    return node
        return None

    # -- health ------------------------------------------------------------------------------

    async def check_health(self) -> None:
        """One round: connect to every upstream at once, score each by the outcome and latency."""
        nodes = list(self._nodes)
        results = await asyncio.gather(*(self._probe(node.upstream) for node in nodes))
        for node, (latency, error) in zip(nodes, results, strict=True):
            usable = node.score >= 0
            if latency is None:
                node.down()
                if usable and node.score < 0:
                    self._log(f"upstream {node.upstream} is unhealthy: health check failed: {error}")
            else:
                node.up(_tier(latency))
                if not usable and node.score >= 0:
                    self._log(f"upstream {node.upstream} is healthy again")
        self._health_changed()

    def _health_changed(self) -> None:
        if self.healthy() != self._was_healthy:
            self._was_healthy = not self._was_healthy
            if not self._was_healthy:
                self._lost.set()
            self._on_health_change()

    async def _probe(self, upstream: Upstream) -> tuple[float | None, str]:
        start = self._monotonic()
        try:
            async with asyncio.timeout(self.health_timeout):
                _reader, writer = await asyncio.open_connection(upstream.host, upstream.port)
        except (OSError, TimeoutError) as err:
            return None, str(err) or type(err).__name__
        latency = self._monotonic() - start
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return latency, ""

    async def _health_loop(self) -> None:
        while True:
            await self.check_health()
            if not self.healthy():
                await self._sleep(min(self.health_interval, RECOVERY_INTERVAL))
                continue
            # A full interval, cut short when failed dials leave no upstream usable: the next
            # rounds then come every second (a kubelet that starts before its API server fails its
            # first dials; waiting out 20 s here kept it from its client certificate).
            self._lost.clear()
            lost, _ = await race(self._sleep(self.health_interval), self._lost)
            if lost:
                await self._sleep(min(self.health_interval, RECOVERY_INTERVAL))

    # -- proxying ----------------------------------------------------------------------------

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= self.max_connections:
            self._log(f"{self.max_connections} connections are open already: closing the new one")
            writer.close()
            return
        task = asyncio.get_running_loop().create_task(self._proxy(reader, writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _proxy(self, client_reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        try:
            opened = await self._dial()
            if opened is None:
                return
            upstream_reader, upstream = opened
            try:
                async with asyncio.TaskGroup() as group:
                    group.create_task(self._pump(client_reader, upstream))
                    group.create_task(self._pump(upstream_reader, client))
            except* (OSError, asyncio.IncompleteReadError):
                pass  # a reset on either side ends the connection: both sides close below
            finally:
                upstream.close()
        finally:
            client.close()

    async def _dial(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """Connect to the best upstream; on failure lower its score and try the next one."""
        tried: list[_Node] = []
        while (node := self._pick_node(exclude=tried)) is not None:
            tried.append(node)
            try:
                async with asyncio.timeout(self.dial_timeout):
                    return await asyncio.open_connection(
                        node.upstream.host, node.upstream.port, limit=self.buffer_size
                    )
            except (OSError, TimeoutError) as err:
                node.down()
                self._health_changed()
                self._log(f"error dialing upstream {node.upstream}: {str(err) or type(err).__name__}")
        if not tried:
            self._log("no upstreams available, closing the connection")
        return None

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy one direction with at most ``buffer_size`` bytes in flight; pass a half-close on."""
        while data := await reader.read(self.buffer_size):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof() and not writer.is_closing():
            writer.write_eof()
