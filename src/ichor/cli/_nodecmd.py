"""Shared plumbing for commands that talk to nodes: build a client, run async, print per node."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

T = TypeVar("T")


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
    for error in result.errors:
        click.echo(f"error: {error}", err=True)
    result.check(what)
    return list(result)
