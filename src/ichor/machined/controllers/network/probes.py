"""Area ``network``: the first hardware address, DNS upstreams' health and TCP probes.

* ``network.HardwareAddrController``: LinkStatuses -> HardwareAddress ``first``: the name and MAC
  of the first physical link in id order (Talos's ``Physical()``: type ``ether``, no kind); none on
  a node whose links are all virtual (a container node's ``veth``, as on Talos in Docker);
* ``network.DNSUpstreamController``: HostDNSConfig + ResolverStatus -> DNSUpstreams, one per
  resolver the host DNS forwards to while it is enabled, each health-checked as CoreDNS's forwarder
  checks Talos's (a ``. IN NS`` query over UDP; any answer is healthy) on every change and every
  :data:`DNS_HEALTH_INTERVAL` seconds;
* ``network.ProbeController``: ProbeSpecs -> ProbeStatuses: each probe runs on its own interval
  (a TCP connect within its timeout); a probe that succeeded is reported failed only after
  ``failureThreshold`` consecutive failures, as Talos's runner does.

Nothing here changes the node: the probes and health checks only connect and ask.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
from collections.abc import Awaitable, Callable
from datetime import timedelta

from ichor.machined.controllers.network.hostdns import HOST_DNS_ADDRESS
from ichor.machined.cosi import Controller, ControllerContext, Input, Output, TransformController
from ichor.machined.resources import (
    HOST_DNS_CONFIG_ID,
    HOST_DNS_CONFIGS,
    LINK_STATUSES,
    RESOLVER_ID,
    RESOLVER_STATUSES,
)
from ichor.machined.resources._network_probes import (
    DNS_UPSTREAMS,
    FIRST_HARDWARE_ADDR_ID,
    HARDWARE_ADDRESSES,
    PROBE_SPECS,
    PROBE_STATUSES,
    DNSUpstreamSpec,
    HardwareAddrSpec,
    ProbeSpecSpec,
    ProbeStatusSpec,
)

__all__ = [
    "DNS_HEALTH_INTERVAL",
    "DNSUpstreamController",
    "ProbeController",
    "dns_healthcheck",
    "hardware_addr_controller",
    "join_host_port",
    "tcp_probe",
]

DNS_HEALTH_INTERVAL = 30.0
"""Seconds between two health checks of the DNS upstreams."""
_DNS_TIMEOUT = 2.0

HealthCheck = Callable[[str, int, float], Awaitable[str | None]]
"""``(host, port, timeout)`` -> None when healthy, else why not."""
Probe = Callable[[str, float], Awaitable[str | None]]
"""``(host:port, timeout)`` -> None when reachable, else why not."""


def hardware_addr_controller() -> TransformController[HardwareAddrSpec]:
    def derive(ctx: ControllerContext) -> dict[str, HardwareAddrSpec]:
        for link in sorted(ctx.list(LINK_STATUSES), key=lambda r: r.id):
            if link.spec.physical:
                spec = HardwareAddrSpec(name=link.id, hardware_addr=link.spec.hardware_addr)
                return {FIRST_HARDWARE_ADDR_ID: spec}
        return {}

    return TransformController(
        "network.HardwareAddrController", inputs=[Input(LINK_STATUSES)], output=HARDWARE_ADDRESSES,
        map_inputs=derive,
    )  # fmt: skip


def join_host_port(host: str, port: int) -> str:
    """Go's ``net.JoinHostPort``: an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Reply(asyncio.DatagramProtocol):
    def __init__(self, query_id: int) -> None:
        self.query_id = query_id
        self.answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        answers = len(data) >= 12 and struct.unpack_from("!H", data)[0] == self.query_id and data[2] & 0x80
        if answers and not self.answered.done():
            self.answered.set_result(None)

    def error_received(self, exc: Exception) -> None:
        if not self.answered.done():
            self.answered.set_exception(exc)


async def dns_healthcheck(host: str, port: int, timeout: float) -> str | None:
    """Ask ``host:port`` for ``. IN NS`` over UDP; None when it answers (whatever its answer)."""
    query_id = int.from_bytes(os.urandom(2), "big")
    query = struct.pack("!HHHHHH", query_id, 0x0100, 1, 0, 0, 0) + b"\x00" + struct.pack("!HH", 2, 1)
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.create_datagram_endpoint(
            lambda: _Reply(query_id), remote_addr=(host, port)
        )
    except OSError as exc:
        return str(exc)
    try:
        transport.sendto(query)
        async with asyncio.timeout(timeout):
            await protocol.answered
    except TimeoutError:
        return f"no answer in {timeout:g}s"
    except OSError as exc:
        return str(exc) or type(exc).__name__
    finally:
        transport.close()
    return None


class DNSUpstreamController(Controller):
    name = "network.DNSUpstreamController"
    inputs = (Input(HOST_DNS_CONFIGS, id=HOST_DNS_CONFIG_ID), Input(RESOLVER_STATUSES, id=RESOLVER_ID))
    outputs = (Output(DNS_UPSTREAMS),)

    def __init__(
        self, *, check: HealthCheck = dns_healthcheck, port: int = 53, interval: float = DNS_HEALTH_INTERVAL
    ) -> None:
        self._check = check
        self._port = port
        self._interval = interval

    async def run(self, ctx: ControllerContext) -> None:
        while True:
            await ctx.changed(timeout=self._interval)
            config = ctx.get_or_none(HOST_DNS_CONFIGS, HOST_DNS_CONFIG_ID)
            resolvers = ctx.get_or_none(RESOLVER_STATUSES, RESOLVER_ID)
            servers: list[str] = []
            if config is not None and config.spec.enabled and resolvers is not None:
                servers = [s for s in dict.fromkeys(resolvers.spec.dns_servers) if s != HOST_DNS_ADDRESS]
            problems = await asyncio.gather(*(self._check(s, self._port, _DNS_TIMEOUT) for s in servers))
            for server, problem in zip(servers, problems, strict=True):
                if problem is not None:
                    ctx.logger.info("dns upstream unhealthy", addr=server, error=problem)
                healthy = "true" if problem is None else "false"
                ctx.modify(
                    DNS_UPSTREAMS,
                    server,
                    DNSUpstreamSpec(healthy=healthy, addr=join_host_port(server, self._port)),
                )
            ctx.clean_up_outputs(DNS_UPSTREAMS, set(servers))


async def tcp_probe(endpoint: str, timeout: float) -> str | None:
    """Connect to ``host:port`` within ``timeout``; None when it accepts, else why not."""
    host, _, port = endpoint.rpartition(":")
    try:
        async with asyncio.timeout(timeout if timeout > 0 else None):
            _, writer = await asyncio.open_connection(host.strip("[]"), int(port))
    except TimeoutError:
        return f"dial tcp {endpoint}: i/o timeout"
    except OSError as exc:
        # Go's text: "dial tcp 10.5.0.1:6443: connect: connection refused"
        reason = f"connect: {os.strerror(exc.errno).lower()}" if exc.errno else str(exc)
        return f"dial tcp {endpoint}: {reason}"
    except ValueError as exc:
        return f"dial tcp {endpoint}: {exc}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


class ProbeController(Controller):
    name = "network.ProbeController"
    inputs = (Input(PROBE_SPECS),)
    outputs = (Output(PROBE_STATUSES),)

    def __init__(
        self, *, probe: Probe = tcp_probe, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ) -> None:
        self._probe = probe
        self._sleep = sleep

    async def run(self, ctx: ControllerContext) -> None:
        runners: dict[str, tuple[ProbeSpecSpec, asyncio.Task[None]]] = {}
        results: dict[str, ProbeStatusSpec] = {}
        try:
            while True:
                await ctx.changed()
                specs = {r.id: r.spec for r in ctx.list(PROBE_SPECS)}
                for probe_id, (spec, task) in list(runners.items()):
                    if specs.get(probe_id) != spec:
                        task.cancel()
                        del runners[probe_id]
                        results.pop(probe_id, None)
                for probe_id, spec in specs.items():
                    if probe_id not in runners:
                        task = asyncio.get_running_loop().create_task(
                            self._runner(ctx, probe_id, spec, results)
                        )
                        runners[probe_id] = (spec, task)
                for probe_id, status in list(results.items()):
                    ctx.modify(PROBE_STATUSES, probe_id, status)
                ctx.clean_up_outputs(PROBE_STATUSES, set(results))
        finally:
            for _, task in runners.values():
                task.cancel()
            await asyncio.gather(*(task for _, task in runners.values()), return_exceptions=True)

    async def _runner(
        self, ctx: ControllerContext, probe_id: str, spec: ProbeSpecSpec, results: dict[str, ProbeStatusSpec]
    ) -> None:
        interval = (spec.interval or timedelta(seconds=1)).total_seconds()
        failures = 0
        while True:
            if not spec.tcp.endpoint:
                problem: str | None = "no probe type specified"
            else:
                problem = await self._probe(spec.tcp.endpoint, spec.tcp.timeout.total_seconds())
            status: ProbeStatusSpec | None = None
            if problem is None:
                failures = 0
                status = ProbeStatusSpec(success=True)
            else:
                failures += 1
                if failures >= spec.failure_threshold:
                    status = ProbeStatusSpec(success=False, last_error=problem)
            if status is not None and results.get(probe_id) != status:
                results[probe_id] = status
                ctx.wake()
            await self._sleep(interval)
