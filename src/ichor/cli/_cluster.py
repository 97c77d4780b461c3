"""``talosctl cluster create|show|destroy``: provisioners ``container`` (root) and ``process``."""

from __future__ import annotations

import signal
from pathlib import Path

import click

from ichor.cli._lazy import CobraCommand, LazyGroup
from ichor.machinery.constants import DEFAULT_KUBERNETES_VERSION


@click.group(
    cls=LazyGroup,
    help="Manages local clusters whose nodes are processes on this machine: provisioner 'container' (the "
    "default as root) runs each node in namespaces of its own on a bridge, a container without a container "
    "engine; provisioner 'process' runs a machined per node, each on its own loopback address",
)
def cluster() -> None:
    pass


_NAME = click.option("--name", default="talos-default", show_default=True, help="the name of the cluster")
_STATE = click.option(
    "--state", default="~/.talos/clusters", show_default=True, help="directory path to store cluster state"
)
_PROVISIONER = click.option("--provisioner", type=click.Choice(["container", "process"]),
                            help="Talos cluster provisioner to use (default: container as root, else process)")  # fmt: skip


def _talosconfig_path() -> Path:
    from ichor.machinery.clientconfig import find_talosconfig

    root = click.get_current_context().find_root().obj
    return find_talosconfig(getattr(root, "talosconfig", None)).path


def _choose_provisioner(asked: str | None) -> tuple[str, str]:
    """The provisioner, and why (create says it)."""
    import os

    if asked:
        return asked, "as asked with --provisioner"
    if os.geteuid() == 0:
        return "container", "running as root; pass --provisioner process for node processes on the loopback"
    return "process", "not running as root, which container nodes need for their namespaces"


@cluster.command("create", cls=CobraCommand, help="Creates a local cluster of Talos nodes")
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
    help="CIDR of the cluster network (default 10.5.0.0/24 for container nodes, 127.5.0.0/24 for process "
    "nodes, which each own one loopback address)",
)
@click.option(
    "--extra-cidr",
    default="",
    help="Ichor's own, for multihoming tests (container nodes only): CIDR of a second network every node joins "
    "as eth1, on a bridge of its own, addressed by DHCP without a default route (e.g. 10.6.0.0/24)",
)
@click.option("--mtu", default=1500, show_default=True, type=int, help="MTU of the cluster network")
@click.option(
    "--nameservers",
    default="",
    help="list of nameservers to use (container nodes: addresses inside --cidr only, default the "
    "cluster's gateway, whose DNS server answers the nodes' hostnames and nothing else; unlike Talos's "
    "8.8.8.8,1.1.1.1,... default, a container node never sends anything off this machine)",
)
@click.option(
    "--registry-mirror",
    multiple=True,
    help="list of registry mirrors to use in format: <registry host>=<mirror URL>",
)
@click.option(
    "--with-registry",
    metavar="HOSTS",
    help="(Ichor) run an image registry (docker-registry, plain http) on the cluster network's gateway, port "
    "5000, and mirror these registries to it (comma-separated, e.g. docker.io,ghcr.io): the Air-gapped guide's "
    "internal registry; destroy stops it",
)
@click.option(
    "--kubernetes-images",
    type=click.Choice(["local", "upstream"]),
    default="local",
    show_default=True,
    help="(Ichor) container nodes: 'local' builds Kubernetes, CoreDNS, flannel and pause from their Go modules "
    "(once, cached; the first build takes many minutes and shows progress), serves them from the cluster's own "
    "registry and mirrors registry.k8s.io and ghcr.io to it (the Air-gapped guide); 'upstream' leaves the nodes "
    "to pull the public images",
)
@click.option(
    "--kubernetes-version",
    default=DEFAULT_KUBERNETES_VERSION,
    show_default=True,
    help="desired kubernetes version to run",
)
@click.option(
    "--static-addresses/--no-static-addresses",
    default=False,
    hidden=True,
    help="container nodes get eth0's address from their machine config instead of the cluster's DHCP server",
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
@click.option(
    "--extension",
    multiple=True,
    help="a system extension to layer into every container node (repeatable): a directory (manifest.yaml + "
    "rootfs/), an OCI image of one (oci:<dir>[:tag], oci-archive:<file>) or an image in a loopback or "
    "cluster-network registry (127.0.0.1:5000/<repository>:<tag>)",
)
@click.option("--wait/--no-wait", default=True, help="wait for the cluster to be ready before returning")
@click.option(
    "--wait-timeout", default="20m", show_default=True, help="timeout to wait for the cluster to be ready"
)
def create(name: str, state: str, provisioner: str | None, controlplanes: int, workers: int, cidr: str | None,
           extra_cidr: str, mtu: int, nameservers: str, registry_mirror: tuple[str, ...], with_registry: str | None, static_addresses: bool,
           config_patch: tuple[str, ...], config_patch_control_plane: tuple[str, ...], config_patch_worker: tuple[str, ...],
           extension: tuple[str, ...], wait: bool, wait_timeout: str, kubernetes_images: str,
           kubernetes_version: str) -> None:  # fmt: skip
    from ichor.cli._nodecmd import parse_duration
    from ichor.provision._cluster import create as create_cluster

    timeout = parse_duration(wait_timeout, flag="--wait-timeout")
    # A shell starts a background job with SIGINT ignored; `kill -INT` must still undo the create.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    chosen, why = _choose_provisioner(provisioner)
    click.echo(f"provisioner {chosen} ({why})", err=True)
    create_cluster(
        name=name, cidr=cidr or ("10.5.0.0/24" if chosen == "container" else "127.5.0.0/24"),
        controlplanes=controlplanes, workers=workers, state=Path(state),
        talosconfig=_talosconfig_path(), config_patches=config_patch, cp_patches=config_patch_control_plane,
        worker_patches=config_patch_worker, wait_timeout=timeout.total_seconds(), wait=wait,
        progress=lambda line: click.echo(line, err=True), provisioner=chosen, mtu=mtu,
        nameservers=[n.strip() for n in nameservers.split(",") if n.strip()], registry_mirrors=registry_mirror,
        static_addresses=static_addresses, with_registry=with_registry, extensions=extension, extra_cidr=extra_cidr,
        kubernetes_images=kubernetes_images, kubernetes_version=kubernetes_version,
    )  # fmt: skip


@cluster.command("show", help="Shows info about a local provisioned cluster")
@_NAME
@_STATE
@_PROVISIONER
def show(name: str, state: str, provisioner: str | None) -> None:
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
def destroy(name: str, state: str, provisioner: str | None, force: bool) -> None:
    from ichor.provision._teardown import destroy as destroy_cluster

    destroy_cluster(Path(state), name, progress=lambda line: click.echo(line, err=True), force=force)
