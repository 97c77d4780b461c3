"""The ``syslogd`` service: Talos 1.7's syslog receiver on the node's ``/dev/log`` (004:724-728);
``talosctl logs syslogd`` shows what it received, one JSON line per message. An early service: it
runs before the config (maintenance mode included), so extension services started early log to it."""

from __future__ import annotations

from typing import IO

from ichor.machined.platform import Layout
from ichor.machined.services import HealthCheck, RestartPolicy, Service, goroutine

__all__ = ["SYSLOG_SOCKET", "syslogd_service"]

SYSLOG_SOCKET = "/dev/log"
"""Talos's ``constants.SyslogListenSocketPath``."""


def syslogd_service(layout: Layout) -> Service:
    path = layout.socket(SYSLOG_SOCKET)

    async def run(log_file: IO[str]) -> None:
        from ichor.machined import syslogd

        await syslogd.serve(path, log_file)

    async def bound() -> None:
        if not path.is_socket():
            raise RuntimeError(f"{SYSLOG_SOCKET} is not bound")

    return Service(
        "syslogd", goroutine(run), description="Syslog receiver", restart=RestartPolicy.FOREVER, health_check=HealthCheck(bound, startup_period=0.2),
    )  # fmt: skip
