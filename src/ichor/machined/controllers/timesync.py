"""Area ``time``: ``time.SyncController`` on a node with a network namespace of its own.

TimeServerStatus ``timeservers`` + ``machine.time.disabled`` + NodeAddresses ``current`` ->
TimeStatus ``node``. The servers are asked in order with SNTP (:mod:`ichor.machined.sntp`) until one
answers; the status is ``synced`` from the first good answer on, and the servers are asked again
every :data:`POLL_INTERVAL`. A change of the node's addresses asks again at once: at boot the first
round runs before DHCP has given the node an address, fails with "network is unreachable", and
waiting :data:`RETRY_INTERVAL` after the lease came would hold back everything that waits for time
sync (trustd, etcd) by that much. Any input change (the config arriving with
``machine.time.disabled``, an address, other servers) cancels a round under way and starts over: a
round that asks servers by name while DNS does not answer took ~18 s on a VM's every boot, all the
while its etcd waited for time sync although the config, active a second in, disables it. The
clock is never set: every node shares the host's kernel clock (Talos in a container does the same),
so the offset is only logged. While no server answers, a wait says which servers failed and why.
With ``machine.time.disabled`` the status is synced with sync disabled, as on a process node (whose
controller is :func:`~ichor.machined.controllers.runtime.time_status_controller`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ichor.machined import sntp
from ichor.machined.controllers.config import ACTIVE_CONFIG
from ichor.machined.controllers.network.config import config_or_none
from ichor.machined.cosi import Controller, ControllerContext, Input, Output
from ichor.machined.resources import (
    NODE_ADDRESS_CURRENT_ID,
    NODE_ADDRESSES,
    TIME_SERVER_ID,
    TIME_SERVER_STATUSES,
    TIME_STATUS_ID,
    TIME_STATUSES,
    TimeStatusSpec,
)
from ichor.machinery.aio import race

__all__ = ["POLL_INTERVAL", "RETRY_INTERVAL", "TimeSyncController"]

POLL_INTERVAL = 64.0
"""Seconds between queries once synced (NTP's minimum poll interval)."""
RETRY_INTERVAL = 10.0
"""Seconds between rounds while no server answers (and the node's addresses do not change)."""

Query = Callable[[str], Awaitable[sntp.Sample]]


class TimeSyncController(Controller):
    name = "time.SyncController"
    inputs = (
        ACTIVE_CONFIG,
        Input(TIME_SERVER_STATUSES, id=TIME_SERVER_ID),
        Input(NODE_ADDRESSES, id=NODE_ADDRESS_CURRENT_ID),
    )
    outputs = (Output(TIME_STATUSES),)
    reads = "(NTP servers, SNTP)"

    def __init__(self, query: Query = sntp.query) -> None:
        self._query = query

    async def run(self, ctx: ControllerContext) -> None:
        synced = False
        wait: float | None = None
        while True:
            await ctx.changed(timeout=wait)
            config = config_or_none(ctx)
            time = config.machine.time if config is not None and config.machine is not None else None
            if time is not None and time.disabled:
                ctx.modify(TIME_STATUSES, TIME_STATUS_ID, TimeStatusSpec(synced=True, sync_disabled=True))
                ctx.clear_waiting()
                wait = None
                continue
            status = ctx.get_or_none(TIME_SERVER_STATUSES, TIME_SERVER_ID)
            servers = status.spec.time_servers if status is not None else ()
            failures: list[str] = []
            changed, found = await race(self._round(servers, failures), ctx.until_changed())
            if changed:
                # An input changed during the round (the config arrived with machine.time.disabled,
                # the node got its address, other servers): start over with it at once. A round
                # that asks servers by name can take many seconds when DNS does not answer yet.
                wait = None
                continue
            answered = found is not None
            if found is not None:
                server, sample = found
                if not synced:
                    ctx.logger.info("time synced", server=server, offset=f"{sample.offset:.6f}s",
                                    delay=f"{sample.delay:.6f}s", stratum=sample.stratum)  # fmt: skip
                synced = True
            if answered:
                ctx.clear_waiting()
            else:
                reason = "; ".join(failures) or "no time servers (machine.time.servers)"
                ctx.waiting("time sync", reason, retry_after=RETRY_INTERVAL)
            ctx.modify(TIME_STATUSES, TIME_STATUS_ID, TimeStatusSpec(synced=synced, sync_disabled=False))
            wait = POLL_INTERVAL if synced else RETRY_INTERVAL

    async def _round(self, servers: tuple[str, ...], failures: list[str]) -> tuple[str, sntp.Sample] | None:
        """Ask ``servers`` in order; the first that answers and its sample, else None (each
        failure appended to ``failures``)."""
        for server in servers:
            try:
                return server, await self._query(server)
            except (sntp.SNTPError, OSError, TimeoutError) as err:
                failures.append(f"{server}: {str(err) or type(err).__name__}")
        return None
