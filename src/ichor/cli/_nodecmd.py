"""Shared plumbing for commands that talk to nodes: build a client, run async, print per node."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import click

T = TypeVar("T")


def parse_duration(text: str, *, flag: str) -> timedelta:
    """A Go-style duration (``30s``, ``1m``, ``1h30m``, ``500ms``); a usage error names ``flag``."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise click.BadParameter(f"invalid duration {text!r} (examples: 30s, 1m, 1h30m)", param_hint=flag)
    return timedelta(seconds=sum(float(number) * units[unit] for number, unit in parts))


def global_options() -> Any:
    return click.get_current_context().find_root().obj


def run(
    work: Callable[[Any], Awaitable[T]], *, insecure: bool = False, fingerprints: tuple[str, ...] = ()
) -> T:
    """Open a client from the global flags, run ``work(client)``, close it."""
    from ichor.client import Client

    async def main() -> T:
        async with Client.from_options(
            global_options(), insecure=insecure, cert_fingerprints=fingerprints
        ) as client:
            return await work(client)

    return asyncio.run(main())


def replies(client: Any, response: Any, what: str) -> list[tuple[str, Any]]:
    """``(node, message)`` pairs; per-node errors are printed, all-failed raises."""
    from ichor.client import node_replies

    result = node_replies(response, fallback_node=client.peer_host)
    result.check(what)  # every node failed: one error listing them all
    for error in result.errors:
        click.echo(f"error: {error}", err=True)
    return list(result)
