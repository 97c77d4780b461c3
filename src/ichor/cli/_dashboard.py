"""``talosctl dashboard``: flags and checks; the dashboard itself is :mod:`ichor.cli.dashboard`.

Everything that can be wrong before the screen opens (the interval, no terminal, the
talosconfig, no endpoints) is reported as ``error:``/``hint:`` on a normal terminal, not inside it.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ichor.cli._nodecmd import global_options, parse_duration

HELP = """Cluster dashboard with real-time metrics

Provide quick UI to navigate through node real-time metrics.

\b
Keyboard shortcuts:
 - F1, F2, F3, F4: Summary, Monitor, Network, Config URL screens
 - h, <Left>: switch one node to the left
 - l, <Right>: switch one node to the right
 - [, ]: show the log of the previous / next service
 - j, <Down>: scroll process list down
 - k, <Up>: scroll process list up
 - q, <C-c>: quit
"""


@click.command("dashboard", help=HELP, short_help="Cluster dashboard with real-time metrics")
@click.option("-d", "--update-interval", default="3s", show_default=True, help="interval between updates")
def dashboard(update_interval: str) -> None:
    from ichor.machinery.errors import MachineryError

    interval = parse_duration(update_interval, flag="--update-interval").total_seconds()
    if interval <= 0:
        raise click.BadParameter(
            f"{update_interval!r} is not a positive duration (examples: 1s, 500ms, 3s)",
            param_hint="--update-interval",
        )
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise MachineryError(
            "the dashboard needs a terminal: standard input and output are not one",
            hint="run it in an interactive terminal; for a script use `talosctl services`, "
            "`talosctl memory`, `talosctl processes` or `talosctl logs <service>`",
        )
    from ichor.client import Client

    opts = global_options()
    # Talosconfig and endpoint problems are reported here, before the screen takes the terminal.
    Client.from_options(opts).close()
    app = make_app(opts, interval)
    app.run()


def make_app(opts: Any, interval: float) -> Any:
    """The dashboard app for the global options (``-n`` nodes, else the context's, else the endpoint)."""
    from ichor.cli.dashboard._app import DashboardApp
    from ichor.cli.dashboard._data import NodeSource
    from ichor.client import Client

    def connect() -> tuple[Any, list[NodeSource]]:
        client = Client.from_options(opts)
        if client.nodes:
            return client, [NodeSource(client.with_node(node), node) for node in client.nodes]
        return client, [NodeSource(client.without_nodes(), client.endpoints[0].host)]

    return DashboardApp(connect, interval=interval)
