"""``talosctl cluster create|show|destroy`` with the ``process`` provisioner (node processes)."""

from __future__ import annotations

from pathlib import Path

import click

from ichor.cli._lazy import CobraCommand, LazyGroup


@click.group(
    cls=LazyGroup,
    help="A collection of commands for managing local clusters whose nodes are processes on this machine "
    "(provisioner 'process': a machined per node, each on its own loopback address; containers are not "
    "supported yet)",
)
def cluster() -> None:
    pass


_NAME = click.option("--name", default="talos-default", show_default=True, help="the name of the cluster")
_STATE = click.option(
    "--state", default="~/.talos/clusters", show_default=True, help="directory path to store cluster state"
)
_PROVISIONER = click.option("--provisioner", default="process", show_default=True, type=click.Choice(["process"]),
                            help="Talos cluster provisioner to use (Ichor runs nodes as local processes)")  # fmt: skip


def _talosconfig_path() -> Path:
    from ichor.machinery.clientconfig import find_talosconfig

    root = click.get_current_context().find_root().obj
    return find_talosconfig(getattr(root, "talosconfig", None)).path


@cluster.command("create", cls=CobraCommand, help="Creates a local cluster of Talos node processes")
@_NAME
@_STATE
@_PROVISIONER
@click.option(
    "--controlplanes",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="the number of controlplanes to create",
)
@click.option(
    "--workers", default=1, show_default=True, type=click.IntRange(0), help="the number of workers to create"
)
@click.option(
    "--cidr",
    default="127.5.0.0/24",
    show_default=True,
    help="CIDR of the cluster network (loopback: each node owns one address)",
)
@click.option(
    "--config-patch",
    multiple=True,
    help="patch generated machineconfigs (applied to all node types), use @file to read a patch from file",
)
@click.option(
    "--config-patch-control-plane",
    multiple=True,
    help="patch generated machineconfigs (applied to 'controlplane' type)",
)
@click.option(
    "--config-patch-worker", multiple=True, help="patch generated machineconfigs (applied to 'worker' type)"
)
@click.option("--wait/--no-wait", default=True, help="wait for the cluster to be ready before returning")
@click.option(
    "--wait-timeout", default="20m", show_default=True, help="timeout to wait for the cluster to be ready"
)
def create(name: str, state: str, provisioner: str, controlplanes: int, workers: int, cidr: str,
           config_patch: tuple[str, ...], config_patch_control_plane: tuple[str, ...], config_patch_worker: tuple[str, ...],
           wait: bool, wait_timeout: str) -> None:  # fmt: skip
    from ichor.cli._nodecmd import parse_duration
    from ichor.provision._cluster import create as create_cluster

    timeout = parse_duration(wait_timeout, flag="--wait-timeout")
    create_cluster(
        name=name, cidr=cidr, controlplanes=controlplanes, workers=workers, state=Path(state),
        talosconfig=_talosconfig_path(), config_patches=config_patch, cp_patches=config_patch_control_plane,
        worker_patches=config_patch_worker, wait_timeout=timeout.total_seconds(), wait=wait,
        progress=lambda line: click.echo(line, err=True),
    )  # fmt: skip


@cluster.command("show", help="Shows info about a local provisioned cluster")
@_NAME
@_STATE
@_PROVISIONER
def show(name: str, state: str, provisioner: str) -> None:
    from ichor.client import render_table
    from ichor.provision._teardown import show as show_cluster

    click.echo(render_table(show_cluster(Path(state), name)), nl=False)


@cluster.command("destroy", help="Destroys a local provisioned cluster")
@_NAME
@_STATE
@_PROVISIONER
@click.option(
    "-f",
    "--force",
    is_flag=True,
    help="force deletion of cluster directory if there were errors (a process that survived is still reported)",
)
def destroy(name: str, state: str, provisioner: str, force: bool) -> None:
    from ichor.provision._teardown import destroy as destroy_cluster

    destroy_cluster(Path(state), name, progress=lambda line: click.echo(line, err=True), force=force)
