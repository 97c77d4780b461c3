"""``talosctl version``."""

from __future__ import annotations

import click

from ichor.cli._fast import client_version_text
from ichor.machinery.constants import TALOS_VERSION


@click.command(help="Prints the version")
@click.option("--client", is_flag=True, help="Print client version only")
@click.option("--short", is_flag=True, help="Print the short version")
@click.option("-i", "--insecure", is_flag=True, help="use Talos maintenance mode API")
def version(client: bool, short: bool, insecure: bool) -> None:
    if short:
        click.echo(f"Client {TALOS_VERSION}")
    else:
        click.echo(client_version_text(), nl=False)
    if client:
        return
    from ichor.cli._node_basic import server_version

    server_version(short, insecure)
