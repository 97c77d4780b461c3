"""Maintenance mode: the insecure API on ``<address>:50000`` that waits for a machine config.

Served with a per-boot self-signed certificate (``maintenance-service.talos.dev``) and a fixed
reader role: anyone may ``talosctl apply-config --insecure`` (API spec §6) and read resources; the
admin RPCs answer "not implemented in maintenance mode". :func:`serve_until_configured` returns the
config once one was applied and its reply has left.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from datetime import datetime
from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.api.limits import limit_requests
from ichor.machined import _certs
from ichor.machined.configstore import ConfigStore, LoadedConfig
from ichor.machined.cosi import State, clear_wait, publish_wait
from ichor.machined.platform import Layout
from ichor.machined.server._codec import grpc_server
from ichor.machined.server._cosi import StateService, fixed_roles
from ichor.machined.server._machine import UnimplementedMachineService
from ichor.machined.server._storage import StorageService
from ichor.machinery import pki

__all__ = ["MaintenanceService", "serve_until_configured"]

WAIT_ID = "machine-config"


class MaintenanceService(UnimplementedMachineService):  # type: ignore[misc,valid-type]
    """The maintenance-mode subset (API spec §6): ApplyConfiguration for anyone, admin RPCs refused."""

    def __init__(self, store: ConfigStore) -> None:
        self._store = store
        self.replied = asyncio.Event()

    async def ApplyConfiguration(self, stream: Any) -> None:
        request = await stream.recv_message()
        try:
            reply = await self._store.apply(request)
            await stream.send_message(machine_pb2.ApplyConfigurationResponse(messages=[reply]))
        finally:
            self.replied.set()

    async def _admin_only(self, stream: Any) -> None:
        raise GRPCError(Status.UNIMPLEMENTED, "API is not implemented in maintenance mode")

    Version = Upgrade = Reset = MetaWrite = MetaDelete = _admin_only


async def serve_until_configured(
    layout: Layout,
    state: State,
    store: ConfigStore,
    *,
    hostname: str,
    say: Callable[[str], None],
    clock: Callable[[], datetime],
) -> LoadedConfig:
    """Serve the maintenance API until a valid config arrives; returns it.

    The console says how to apply one as Talos's does, less Talos's interactive installer line:
    Ichor has no installer, and a hint must work as printed."""
    applied = store.await_maintenance_config()
    cert = await asyncio.to_thread(_certs.maintenance_certificate, address=layout.address, hostname=hostname)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    pki.load_into_ssl_context(ctx, cert.crt, cert.key)
    ctx.set_alpn_protocols(["h2"])
    maintenance = MaintenanceService(store)
    # Anyone can reach this port: no request may make it buffer more than one bounded message.
    server = grpc_server(
        limit_requests(
            [maintenance, StateService(state, roles_of=fixed_roles("os:reader")), StorageService(layout)]
        )
    )
    await server.start(layout.address, 50000, ssl=ctx)
    fingerprint = pki.spki_fingerprint(cert.crt)
    apply = f"talosctl apply-config --insecure --nodes {layout.address}"
    publish_wait(state, WAIT_ID, owner="", waiting_for="a machine config",
                 reason=f"maintenance mode: apply one with `{apply} --file <config.yaml>`", now=clock())  # fmt: skip
    say(
        "entering maintenance service\n"
        f"this machine is reachable at:\n\t{layout.address}\n"
        f"server certificate issued, fingerprint: {fingerprint}\n"
        "upload configuration using talosctl:\n"
        f"\t{apply} --file <config.yaml>\n"
        "optionally with node fingerprint check:\n"
        f"\t{apply} --cert-fingerprint '{fingerprint}' --file <config.yaml>"
    )
    try:
        loaded = await applied
    finally:
        # Closing the server cancels calls in flight: let the ApplyConfiguration reply leave first
        # (only when a config arrived; a shutdown in maintenance mode has no reply to wait for).
        # (cancelling this coroutine cancels the awaited future too: that is a shutdown, not a config)
        if applied.done() and not applied.cancelled():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await maintenance.replied.wait()
            await asyncio.sleep(0.05)
        server.close()
        await server.wait_closed()
        store.end_maintenance()
    clear_wait(state, WAIT_ID, owner="")
    say("configuration applied in maintenance mode")
    return loaded
