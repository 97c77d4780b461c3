"""``network.VIPOperatorController``: the Layer 2 shared IP (``machine.network.interfaces[].vip.ip``).

Every control plane with a ``vip/<link>`` OperatorSpec campaigns in etcd for the shared IP, as
Talos's VIP operator does: under the prefix ``talos:v1:vip:election:<ip>`` each candidate writes
``<prefix>/<lease id in hex>`` = its hostname with a lease of :data:`LEASE_TTL` seconds (one
create-if-absent transaction); the candidate whose key has the lowest create revision leads, the
others wait for the key just ahead of theirs to go. The leader publishes an operator-layer AddressSpec
``<ip>/32`` on the link (``vip/<link>/<link>/<ip>/32``) and announces the IP with gratuitous ARP so
the neighbours' caches move to its MAC.

A leader that dies stops renewing its lease; etcd deletes its key when the lease expires and the next
candidate takes over (failover within about :data:`LEASE_TTL`). A leader that loses etcd for longer
than the lease drops the IP on its own, so two nodes never keep announcing it. When the campaign
stops (etcd stops or turns unhealthy here, the spec goes, the node shuts down) the lease is revoked,
so the next candidate takes over at once.

Must not: campaign before this node's etcd is running and healthy, or keep the IP after its key is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ichor.etcd import EtcdError, RangeResult
from ichor.machined.cosi import Controller, ControllerContext, Input, Output, OutputKind, Phase
from ichor.machined.resources import (
    ADDRESS_SPECS,
    HOSTNAME_STATUSES,
    LINK_STATUSES,
    NETWORK_CONFIG_NAMESPACE,
    OPERATOR_SPECS,
    SERVICES,
    AddressSpecSpec,
    ConfigLayer,
    LinkStatusSpec,
    OperatorSpecSpec,
)

__all__ = [
    "ANNOUNCEMENTS",
    "ELECTION_PREFIX",
    "LEASE_TTL",
    "ElectionStore",
    "VIPOperatorController",
    "gratuitous_arp",
    "send_gratuitous_arp",
    "wait_for_turn",
]

ELECTION_PREFIX = "talos:v1:vip:election:"
LEASE_TTL = 10
"""Seconds: how long a dead leader keeps the IP (etcd expires its key after this)."""
RETRY_AFTER = 1.0
"""Seconds before a failed campaign starts again (Talos: the campaign retry interval)."""
ANNOUNCEMENTS = 3
ANNOUNCE_INTERVAL = 1.0
_WATCH_TIMEOUT = 24 * 3600.0
_RELEASE_TIMEOUT = 3.0


class ElectionStore(Protocol):
    """The etcd calls an election needs (:class:`ichor.etcd.EtcdClient` has them)."""

    async def lease_grant(self, ttl: int, *, timeout: float | None = None) -> int: ...
    async def lease_keepalive(self, lease: int, *, timeout: float | None = None) -> int: ...
    async def lease_revoke(self, lease: int, *, timeout: float | None = None) -> None: ...
    async def create(
        self, key: str | bytes, value: str | bytes, *, lease: int = 0, timeout: float | None = None
    ) -> int | None: ...
    async def get(self, key: str | bytes, *, prefix: bool = False) -> RangeResult: ...
    async def wait_deleted(self, key: str | bytes, *, after: int, timeout: float | None = None) -> int: ...


StoreFactory = Callable[[], AbstractAsyncContextManager[ElectionStore]]


async def wait_for_turn(
    store: ElectionStore, prefix: str, created: int, *, timeout: float | None = None
) -> None:
    """Return once no key under ``prefix/`` was created before ``created`` (etcd's election and mutex
    order: each waits for the newest key ahead of it to go)."""
    while True:
        found = await store.get(f"{prefix}/", prefix=True)
        ahead = [kv for kv in found.kvs if kv.create_revision < created]
        if not ahead:
            return
        holder = max(ahead, key=lambda kv: kv.create_revision)
        await store.wait_deleted(holder.key, after=found.revision, timeout=timeout)


Announce = Callable[[str, bytes, ipaddress.IPv4Address], Awaitable[None]]


class _LeaseLost(Exception):
    pass


def gratuitous_arp(mac: bytes, ip: ipaddress.IPv4Address) -> bytes:
    """An Ethernet frame announcing ``ip`` at ``mac``: a broadcast ARP request for its own address."""
    header = b"\xff" * 6 + mac + b"\x08\x06"
    arp = b"\x00\x01\x08\x00\x06\x04\x00\x01" + mac + ip.packed + b"\x00" * 6 + ip.packed
    return header + arp


async def send_gratuitous_arp(link: str, mac: bytes, ip: ipaddress.IPv4Address) -> None:
    """Send :func:`gratuitous_arp` out of ``link`` over a raw packet socket (needs ``CAP_NET_RAW``)."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind((link, 0))
        sock.send(gratuitous_arp(mac, ip))


def _link_ready(spec: OperatorSpecSpec, link: LinkStatusSpec | None) -> bool:
    if link is None or not link.hardware_addr:
        return False
    return not spec.require_up or "UP" in link.flags.split(",")


def _address_id(spec: OperatorSpecSpec) -> str:
    return f"{spec.id}/{spec.link_name}/{spec.vip.ip}/32"


class VIPOperatorController(Controller):
    name = "network.VIPOperatorController"
    inputs = (Input(OPERATOR_SPECS), Input(LINK_STATUSES), Input(SERVICES), Input(HOSTNAME_STATUSES))
    outputs = (Output(ADDRESS_SPECS, OutputKind.SHARED, NETWORK_CONFIG_NAMESPACE),)
    reads = "(etcd: the election key talos:v1:vip:election:<ip>)"

    def __init__(
        self,
        store: StoreFactory,
        announce: Announce = send_gratuitous_arp,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._store = store
        self._announce = announce
        self._clock = clock
        self._sleep = sleep

    async def run(self, ctx: ControllerContext) -> None:
        leading: dict[str, OperatorSpecSpec] = {}
        running: dict[str, tuple[OperatorSpecSpec, asyncio.Task[None]]] = {}
        try:
            while True:
                await ctx.changed()
                links = {r.id: r.spec for r in ctx.list(LINK_STATUSES)}
                etcd = next((r.spec for r in ctx.list(SERVICES) if r.id == "etcd"), None)
                hostnames = [r.spec for r in ctx.list(HOSTNAME_STATUSES)]
                hostname = hostnames[0].hostname if hostnames else ""
                ready = etcd is not None and etcd.running and etcd.healthy and bool(hostname)
                wanted = {
                    r.id: r.spec for r in ctx.list(OPERATOR_SPECS)
                    if ready and r.metadata.phase is Phase.RUNNING and r.spec.operator == "vip"
                    and r.spec.vip.ip and _link_ready(r.spec, links.get(r.spec.link_name))
                }  # fmt: skip
                for id, (spec, task) in list(running.items()):
                    if wanted.get(id) != spec or task.done():
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)
                        del running[id]
                        ctx.logger.info("stopped campaign", id=id)
                for id, spec in wanted.items():
                    if id not in running:
                        mac = bytes.fromhex(links[spec.link_name].hardware_addr.replace(":", ""))
                        task = asyncio.create_task(self._campaign_forever(ctx, spec, mac, hostname, leading))
                        running[id] = (spec, task)
                        ctx.logger.info("started campaign", id=id, ip=spec.vip.ip)
                published = {
                    _address_id(spec): AddressSpecSpec(
                        address=f"{spec.vip.ip}/32", link_name=spec.link_name, family="inet4",
                        announce_with_arp=spec.vip.gratuitous_arp, layer=ConfigLayer.OPERATOR,
                    )
                    for spec in leading.values()
                }  # fmt: skip
                for id, value in published.items():
                    ctx.modify(ADDRESS_SPECS, id, value, namespace=NETWORK_CONFIG_NAMESPACE)
                ctx.clean_up_outputs(ADDRESS_SPECS, set(published), namespace=NETWORK_CONFIG_NAMESPACE)
        finally:
            for _, task in running.values():
                task.cancel()
            await asyncio.gather(*(task for _, task in running.values()), return_exceptions=True)

    async def _campaign_forever(self, ctx: ControllerContext, spec: OperatorSpecSpec, mac: bytes, hostname: str,
                                leading: dict[str, OperatorSpecSpec]) -> None:  # fmt: skip
        while True:
            try:
                await self._campaign(ctx, spec, mac, hostname, leading)
            except (EtcdError, OSError, _LeaseLost) as err:
                ctx.logger.warning(f"VIP campaign for {spec.vip.ip}: {err}", id=spec.id)
            except Exception as err:  # a bug here must not end the campaign for good
                ctx.logger.error(f"VIP campaign for {spec.vip.ip} failed: {err!r}", id=spec.id)
            await self._sleep(RETRY_AFTER)

    async def _campaign(self, ctx: ControllerContext, spec: OperatorSpecSpec, mac: bytes, hostname: str,
                        leading: dict[str, OperatorSpecSpec]) -> None:  # fmt: skip
        prefix = f"{ELECTION_PREFIX}{spec.vip.ip}"
        async with self._store() as store:
            lease = await store.lease_grant(LEASE_TTL)
            keepalive = asyncio.create_task(self._keep_alive(store, lease))
            try:
                key = f"{prefix}/{lease:x}"
                created = await store.create(key, hostname, lease=lease)
                if created is None:
                    raise _LeaseLost(f"election key {key} already exists")
                body = asyncio.create_task(self._lead(ctx, store, spec, mac, prefix, key, created, leading))
                done, _ = await asyncio.wait({body, keepalive}, return_when=asyncio.FIRST_COMPLETED)
                body.cancel()
                await asyncio.gather(body, return_exceptions=True)
                for task in done:
                    task.result()
            finally:
                keepalive.cancel()
                await asyncio.gather(keepalive, return_exceptions=True)
                if leading.pop(spec.id, None) is not None:
                    ctx.logger.info("removing shared IP", ip=spec.vip.ip, link=spec.link_name)
                    ctx.wake()
                with contextlib.suppress(EtcdError, OSError, TimeoutError):
                    await store.lease_revoke(lease, timeout=_RELEASE_TIMEOUT)

    async def _lead(self, ctx: ControllerContext, store: ElectionStore, spec: OperatorSpecSpec, mac: bytes,
                    prefix: str, key: str, created: int, leading: dict[str, OperatorSpecSpec]) -> None:  # fmt: skip
        await wait_for_turn(store, prefix, created, timeout=_WATCH_TIMEOUT)
        leading[spec.id] = spec
        ctx.logger.info("enabled shared IP", ip=spec.vip.ip, link=spec.link_name)
        ctx.wake()
        # Announcing never fails (it logs), so it runs beside the watch and ends with it; an etcd error
        # from the watch stays an EtcdError for the campaign loop.
        announcing = (
            asyncio.create_task(self._announce_all(ctx, spec, mac)) if spec.vip.gratuitous_arp else None
        )
        try:
            await store.wait_deleted(key, after=created, timeout=_WATCH_TIMEOUT)
        finally:
            if announcing is not None:
                announcing.cancel()
                await asyncio.gather(announcing, return_exceptions=True)
        raise _LeaseLost(f"election key {key} was deleted")

    async def _announce_all(self, ctx: ControllerContext, spec: OperatorSpecSpec, mac: bytes) -> None:
        ip = ipaddress.IPv4Address(spec.vip.ip)
        for n in range(ANNOUNCEMENTS):
            if n:
                await self._sleep(ANNOUNCE_INTERVAL)
            try:
                await self._announce(spec.link_name, mac, ip)
            except OSError as err:
                ctx.logger.warning(f"gratuitous ARP for {ip} on {spec.link_name}: {err}", id=spec.id)

    async def _keep_alive(self, store: ElectionStore, lease: int) -> None:
        """Renew the lease every third of its TTL; raise once it is gone or could not be renewed in time."""
        renewed = self._clock()
        while True:
            await self._sleep(LEASE_TTL / 3)
            try:
                ttl = await store.lease_keepalive(lease, timeout=LEASE_TTL / 3)
            except EtcdError:
                ttl = -1
            if ttl == 0:
                raise _LeaseLost(f"lease {lease:x} expired")
            if ttl > 0:
                renewed = self._clock()
            elif self._clock() - renewed >= LEASE_TTL:
                raise _LeaseLost(f"lease {lease:x} not renewed for {LEASE_TTL}s")
