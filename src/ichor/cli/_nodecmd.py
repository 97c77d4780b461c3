"""Shared plumbing for commands that talk to nodes: build a client, run async, print per node.

A node that answers with an error does not stop the others: the command prints what the nodes that
answered sent, reports each failed node with :func:`node_error` (``error: <node>: ...`` on stderr),
and :func:`run` then ends the command with a non-zero exit status, as talosctl does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import click

from ichor.machinery import goduration
from ichor.machinery.errors import DurationError

T = TypeVar("T")


def parse_duration(text: str, *, flag: str) -> timedelta:
    """A Go duration (``30s``, ``1m``, ``1h30m``, ``500ms``) from ``flag``; a usage error if it is not one."""
    try:
        return goduration.parse(text, what=flag)
    except DurationError:
        raise click.BadParameter(
            f"invalid duration {text!r} (examples: 30s, 1m, 1h30m)", param_hint=flag
        ) from None


def _empty() -> Any:
    from google.protobuf import empty_pb2

    return empty_pb2.Empty()


def global_options() -> Any:
    return click.get_current_context().find_root().obj


_NODE_ERRORS = "ichor.node_errors"


def _reported() -> list[Any]:
    errors: list[Any] = click.get_current_context().meta.setdefault(_NODE_ERRORS, [])
    return errors


def node_error(error: object, *, line: str | None = None) -> None:
    """Print one node's error (``error: <node>: ...``, or ``line`` where Talos prints another) and
    make the command's exit status non-zero."""
    click.echo(f"error: {error}" if line is None else line, err=True)
    _reported().append(error)


def _fail_if_nodes_failed() -> None:
    errors = _reported()
    if not errors:
        return
    from ichor.client import errors_hint

    hint = errors_hint(errors)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    raise click.exceptions.Exit(1)


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

    result = asyncio.run(main())
    _fail_if_nodes_failed()
    return result


def run_talos(
    work: Callable[[Any], Awaitable[T]], *, insecure: bool = False, fingerprints: tuple[str, ...] = ()
) -> T:
    """Like :func:`run`, with the SDK: ``work(talos)`` gets an :class:`ichor.client.Talos`."""
    from ichor.client import Talos

    async def main() -> T:
        async with Talos.from_options(
            global_options(), insecure=insecure, cert_fingerprints=fingerprints
        ) as talos:
            return await work(talos)

    result = asyncio.run(main())
    _fail_if_nodes_failed()
    return result


def report(results: Any) -> Any:
    """An SDK call's results, after reporting each node that failed (see :func:`node_error`)."""
    for error in results.errors:
        node_error(error)
    return results


def replies(client: Any, response: Any, what: str) -> list[tuple[str, Any]]:
    """``(node, message)`` pairs; per-node errors are reported (see :func:`node_error`), all-failed raises."""
    from ichor.client import node_replies

    result = node_replies(response, fallback_node=client.peer_host)
    result.check(what)  # every node failed: one error listing them all
    for error in result.errors:
        node_error(error)
    return list(result)
