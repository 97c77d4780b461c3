"""``talosctl image``: only ``image default`` works without a node.

``talosctl images`` (Talos's alias of ``image``) run alone prints the default image list, what the
Air-gapped guide's ``for image in `talosctl images`; do ...`` loops expect; ``talosctl image``
alone prints the group's help and exits 0, as Talos does. ``image ls`` prints Talos's columns
(``NODE IMAGE DIGEST SIZE CREATED``, CREATED as Go's RFC 3339 in UTC), ``l``/``ls`` and ``p`` are
Talos's aliases of ``list`` and ``pull``.
"""

from __future__ import annotations

from typing import Any

import click

from ichor.cli._lazy import LazyGroup
from ichor.machinery.constants import DEFAULT_KUBERNETES_VERSION


@click.group(cls=LazyGroup, help="Manage CRI container images", invoke_without_command=True)
@click.pass_context
def image(ctx: click.Context) -> None:
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


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


@click.group(
    "images", cls=LazyGroup, hidden=True, invoke_without_command=True, help="Manage CRI container images"
)
@click.pass_context
def images(ctx: click.Context) -> None:
    """``image`` under Talos's alias; alone it lists the default images."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(image_default)


_NAMESPACES = {"cri": 2, "system": 1}
"""``--namespace`` to ``common.ContainerdNamespace`` (NS_CRI, NS_SYSTEM)."""


def _bytes(size: int) -> str:
    """go-humanize ``Bytes`` (SI units), as Talos prints an image's size."""
    if size < 10:
        return f"{size} B"
    units = ["B", "kB", "MB", "GB", "TB", "PB", "EB"]
    value, unit = float(size), 0
    while value >= 1000 and unit < len(units) - 1:
        value, unit = value / 1000, unit + 1
    rounded = round(value * 10) / 10
    return f"{rounded:.0f} {units[unit]}" if rounded >= 10 else f"{rounded:.1f} {units[unit]}"


def rfc3339(stamp: Any) -> str:
    """A ``google.protobuf.Timestamp`` as Talos prints CREATED: Go's ``AsTime().Format(time.RFC3339)``
    (UTC, whole seconds, ``Z``); an unset one is the Unix epoch, as Go's ``AsTime`` of nil gives."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(stamp.seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_namespace_option = click.option(
    "--namespace", type=click.Choice(list(_NAMESPACES)), default="cri", show_default=True,
    help="namespace to use: `system` (etcd and kubelet images) or `cri` for all Kubernetes workloads",
)  # fmt: skip


@image.command("list", help="List CRI images")
@_namespace_option
def image_list(namespace: str) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.cli._nodecmd import node_error, run
    from ichor.client import message_error, render_table

    async def work(client: Any) -> None:
        rows = [["NODE", "IMAGE", "DIGEST", "SIZE", "CREATED"]]
        async with client.machine.ImageList.open() as call:
            await call.send_message(machine_pb2.ImageListRequest(namespace=_NAMESPACES[namespace]), end=True)
            async for message in call:
                error = message_error(message, client.peer_host)
                if error is not None:
                    node_error(error)
                    continue
                node = message.metadata.hostname or client.peer_host
                rows.append(
                    [node, message.name, message.digest, _bytes(message.size), rfc3339(message.created_at)]
                )
        click.echo(render_table(rows), nl=False)

    run(work)


image.add_alias("ls", "list")
image.add_alias("l", "list")


@image.command("pull", help="Pull an image into CRI")
@_namespace_option
@click.argument("reference")
def image_pull(namespace: str, reference: str) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.cli._nodecmd import replies, run

    async def work(client: Any) -> None:
        request = machine_pb2.ImagePullRequest(namespace=_NAMESPACES[namespace], reference=reference)
        response = await client.machine.ImagePull(request)
        replies(client, response, f"error pulling image {reference}")

    run(work)


image.add_alias("p", "pull")

for _name, _command in image.commands.items():
    images.add_command(_command, _name)
assert isinstance(images, LazyGroup)
images.add_alias("ls", "list")
images.add_alias("l", "list")
images.add_alias("p", "pull")
