"""The hidden commands Talos 1.7 keeps for old scripts: each only points to its replacement.

The texts are Talos's own (``cmd/talosctl/cmd/talos/{crashdump,interfaces,routes}.go``); like
Talos they fail (exit 1) and accept the flags they once had.
"""

from __future__ import annotations

import click

CRASHDUMP = "`talosctl crashdump` is deprecated, please use `talosctl support` instead"
INTERFACES = "`talosctl interfaces` is deprecated, please use `talosctl get addresses` and `talosctl get links` instead"
ROUTES = "`talosctl routes` is deprecated, please use `talosctl get routes` instead"


@click.command("crashdump", hidden=True, help="Dump debug information about the cluster")
@click.option("--init-node", default="", help="specify IPs of init node")
@click.option("--control-plane-nodes", multiple=True, help="specify IPs of control plane nodes")
@click.option("--worker-nodes", multiple=True, help="specify IPs of worker nodes")
def crashdump(init_node: str, control_plane_nodes: tuple[str, ...], worker_nodes: tuple[str, ...]) -> None:
    raise click.ClickException(CRASHDUMP)


@click.command("interfaces", hidden=True, help="List network interfaces")
def interfaces() -> None:
    raise click.ClickException(INTERFACES)


@click.command("routes", hidden=True, help="List network routes")
def routes() -> None:
    raise click.ClickException(ROUTES)
