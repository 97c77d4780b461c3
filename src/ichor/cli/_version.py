"""``talosctl version``."""

from __future__ import annotations

import platform

import click

from ichor import __version__
from ichor.machinery.constants import TALOS_VERSION


def client_version_text() -> str:
    return (
        "Client:\n"
        f"\tTag:         {TALOS_VERSION}\n"
        f"\tSHA:         ichor-{__version__}\n"
        f"\tBuilt:       \n"
        f"\tGo version:  python{platform.python_version()}\n"
        f"\tOS/Arch:     {platform.system().lower()}/{_arch()}\n"
    )


def _arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


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
