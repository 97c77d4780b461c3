"""``talosctl image``: only ``image default`` works without a node."""

from __future__ import annotations

import click

from ichor.cli._lazy import LazyGroup
from ichor.machinery.constants import DEFAULT_KUBERNETES_VERSION


@click.group(cls=LazyGroup, help="Manage CRI container images")
def image() -> None:
    pass


@image.command("default", help="List the default images used by Talos")
@click.option(
    "--kubernetes-version",
    default=DEFAULT_KUBERNETES_VERSION,
    show_default=True,
    help="the Kubernetes version the images are for",
)
def image_default(kubernetes_version: str) -> None:
    from ichor.machinery.constants import Images

    for name in Images(kubernetes_version=kubernetes_version.removeprefix("v")).default_list():
        click.echo(name)
