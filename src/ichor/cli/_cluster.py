"""``talosctl cluster create|show|destroy``: provisioners ``container`` (root; ``docker``, the name Talos's
docs use, is served by it), ``process`` and ``qemu`` (root: VMs booting Ichor's image).

create takes Talos 1.7's flags (its ``create.go``) where they mean something for nodes on this machine's
kernel, and refuses the others naming why (:mod:`._cluster_flags`).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import click

from ichor.cli._cluster_flags import MASTERS_DEPRECATED, refuse_unsupported, refused_help
from ichor.cli._lazy import CobraCommand, LazyGroup
from ichor.machinery.constants import DEFAULT_DNS_DOMAIN, DEFAULT_KUBERNETES_VERSION, KUBEPRISM_PORT


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
_PROVISIONER = click.option("--provisioner", type=click.Choice(["container", "docker", "process", "qemu"]),
                            help="Talos cluster provisioner to use (default: container as root, else process; "
                            "'docker', Talos's default, is served by Ichor's container provisioner; 'qemu' "
                            "runs each node as a QEMU VM booting Ichor's image, as root)")  # fmt: skip
DOCKER_NOTE = (
    "'docker', the name Talos's docs use: Ichor's container provisioner serves it, each node in namespaces of "
    "its own on a bridge as Talos's docker nodes are containers on one; no Docker involved"
)
NO_KUBERNETES_NOTE = (
    "Kubernetes runs only on container nodes, which need root (namespaces, a bridge, routes): this process "
    "cluster gives Talos's API, etcd, discovery and every talosctl command on node processes, but no kubelet, "
    "so there is no Kubernetes for kubectl; run create as root for container nodes with Kubernetes"
)


class CreateCommand(CobraCommand):
    """Refuses Talos's flags Ichor does not take before click parses (:mod:`._cluster_flags`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, refuse_unsupported(args))


def _talosconfig_path() -> Path:
    from ichor.machinery.clientconfig import find_talosconfig

    root = click.get_current_context().find_root().obj
    return find_talosconfig(getattr(root, "talosconfig", None)).path


def _choose_provisioner(asked: str | None) -> tuple[str, str]:
    """The provisioner, and why (create says it)."""
    import os

    if asked == "docker":
        return "container", DOCKER_NOTE
    if asked:
        return asked, "as asked with --provisioner"
    if os.geteuid() == 0:
        return "container", "running as root; pass --provisioner process for node processes on the loopback"
    return (
        "process",
        "not running as root, which container nodes need for their namespaces. " + NO_KUBERNETES_NOTE,
    )


def _limits(
    cpus: str | None, cpus_workers: str | None, memory: int | None, memory_workers: int | None
) -> tuple[dict[str, str], dict[str, int]]:
    """``--cpus``/``--memory`` (control planes) and ``--cpus-workers``/``--memory-workers``, by node type;
    a type without a flag gets no limit."""
    cpu_limits = {k: v for k, v in (("controlplane", cpus), ("worker", cpus_workers)) if v}
    memory_limits = {k: v for k, v in (("controlplane", memory), ("worker", memory_workers)) if v}
    return cpu_limits, memory_limits


@cluster.command(
    "create", cls=CreateCommand, help="Creates a local cluster of Talos nodes", epilog=refused_help()
)
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
    "--masters",
    type=click.IntRange(1),
    hidden=True,
    help="the number of masters to create (deprecated: use --controlplanes)",
)
@click.option(
    "--workers", default=1, show_default=True, type=click.IntRange(0), help="the number of workers to create"
)
@click.option(
    "--cidr",
    help="CIDR of the cluster network (default 10.5.0.0/24 for container and VM nodes, 127.5.0.0/24 for "
    "process nodes, which each own one loopback address)",
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
@click.option(
    "--skip-boot-phase-finished-check/--no-skip-boot-phase-finished-check",
    default=False,
    help="skip waiting for node to finish boot phase (wait for Talos's pre-boot-sequence stages only)",
)
@click.option(
    "--skip-k8s-node-readiness-check/--no-skip-k8s-node-readiness-check",
    default=False,
    help="skip k8s node readiness checks (Talos 1.8's: wait for the control plane, not for every Node Ready)",
)
@click.option(
    "--skip-kubeconfig/--no-skip-kubeconfig",
    default=False,
    help="skip merging kubeconfig from the created cluster (else merged into ~/.kube/config, or "
    "$KUBECONFIG's first file, once the waits passed; container nodes only, as process nodes run no Kubernetes)",
)
@click.option(
    "--talos-version",
    default="",
    help="the desired Talos version to generate config for (v1.7 or later: container-mode nodes need its "
    "host DNS; default: this Talos, 1.7)",
)
@click.option(
    "--dns-domain", default=DEFAULT_DNS_DOMAIN, show_default=True, help="the dns domain to use for cluster"
)
@click.option(
    "--kubeprism-port",
    default=KUBEPRISM_PORT,
    show_default=True,
    type=int,
    help="KubePrism port (set to 0 to disable)",
)
@click.option(
    "--custom-cni-url",
    default="",
    help="install custom CNI from the URL (Talos cluster); container nodes reach only the cluster "
    "network, so serve it there (e.g. on the gateway)",
)
@click.option(
    "--with-cluster-discovery/--no-with-cluster-discovery",
    default=True,
    help="enable cluster discovery (through the cluster's own discovery service, never the public one)",
)
@click.option(
    "--with-debug/--no-with-debug",
    default=False,
    help="enable debug in Talos config to send service logs to the console",
)
@click.option(
    "--install-image",
    default="",
    help="the installer image to use (machine.install.image; container nodes install nothing)",
)
@click.option(
    "--registry-insecure-skip-verify",
    multiple=True,
    help="list of registry hostnames to skip TLS verification for",
)
@click.option(
    "--use-vip/--no-use-vip",
    default=False,
    help="use a virtual IP for the controlplane endpoint instead of the loadbalancer (container nodes: "
    "the CIDR's 50th address, shared by the control planes on eth0)",
)
@click.option(
    "--endpoint",
    default="",
    help="use endpoint instead of provider defaults (the talosconfig's "
    "endpoint, added to the certificates' SANs)",
)
@click.option(
    "--init-node-as-endpoint/--no-init-node-as-endpoint",
    default=False,
    help="use init node as endpoint instead of any load balancer endpoint (the first control plane)",
)
@click.option(
    "-i",
    "--input-dir",
    default="",
    help="location of pre-generated config files (controlplane.yaml, "
    "worker.yaml, talosconfig, as `talosctl gen config` writes them)",
)
@click.option(
    "--cpus",
    default=None,
    help="the share of CPUs as fraction (each control plane): a CFS quota on "
    "the container node's cgroup (Talos's default 2.0; Ichor sets none unless asked)",
)
@click.option("--cpus-workers", default=None, help="the share of CPUs as fraction (each worker)")
@click.option(
    "--memory",
    default=None,
    type=int,
    help="the limit on memory usage in MB (each control plane): "
    "the container node's cgroup memory limit (Talos's default 2048; Ichor sets none unless asked)",
)
@click.option(
    "--memory-workers", default=None, type=int, help="the limit on memory usage in MB (each worker)"
)
@click.option(
    "--vmlinuz-path",
    default="",
    help="the compressed kernel image to use (qemu; default: the imager's vmlinuz-amd64, built if missing)",
)
@click.option(
    "--initrd-path",
    default="",
    help="initramfs image to use (qemu; default: the imager's initramfs-amd64.xz, built if missing)",
)
@click.option("--iso-path", default="", help="the ISO path to use for the initial boot (VM only)")
@click.option(
    "--disk", default=6 * 1024, show_default=True, type=int, help="default limit on disk size in MB (each VM)"
)
@click.option(
    "--extra-disks",
    default=0,
    show_default=True,
    type=int,
    help="number of extra disks to create for each VM",
)
@click.option(
    "--extra-disks-size",
    default=5 * 1024,
    show_default=True,
    type=int,
    help="default limit on disk size in MB (each VM)",
)
@click.option(
    "--with-bootloader/--no-with-bootloader",
    default=True,
    help="enable bootloader to load kernel and initramfs from disk image after install (qemu)",
)
@click.option(
    "--with-uefi/--no-with-uefi", default=True, help="enable UEFI on x86_64 architecture (qemu: OVMF)"
)
@click.option(
    "--with-apply-config/--no-with-apply-config",
    default=False,
    help="enable apply config when the VM is starting in maintenance mode (else the VM fetches it: talos.config=)",
)
@click.option(
    "--extra-boot-kernel-args",
    default="",
    help="add extra kernel args to the initial boot from vmlinuz and initramfs (QEMU only)",
)
@click.option(
    "--with-nics",
    default=1,
    show_default=True,
    type=int,
    help="(Ichor) NICs per VM, each a tap device on the cluster bridge (qemu; 2 for bonds)",
)
def create(name: str, state: str, provisioner: str | None, controlplanes: int, workers: int, cidr: str | None,
           extra_cidr: str, mtu: int, nameservers: str, registry_mirror: tuple[str, ...], with_registry: str | None, static_addresses: bool,
           config_patch: tuple[str, ...], config_patch_control_plane: tuple[str, ...], config_patch_worker: tuple[str, ...],
           extension: tuple[str, ...], wait: bool, wait_timeout: str, kubernetes_images: str,
           kubernetes_version: str, masters: int | None, **flags: Any) -> None:  # fmt: skip
    from ichor.cli._kubeconfig import default_kubeconfig_path
    from ichor.cli._nodecmd import parse_duration
    from ichor.provision._cluster import create as create_cluster

    timeout = parse_duration(wait_timeout, flag="--wait-timeout")
    if masters is not None:
        click.echo(MASTERS_DEPRECATED, err=True)
        controlplanes = masters
    _refuse_gen_flags_with_input_dir(flags["input_dir"])
    # A shell starts a background job with SIGINT ignored; `kill -INT` must still undo the create.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    chosen, why = _choose_provisioner(provisioner)
    click.echo(f"provisioner {chosen} ({why})", err=True)
    vm_flags = _vm_flags(chosen, flags)
    cpus, memory_mb = _limits(
        flags.pop("cpus"), flags.pop("cpus_workers"), flags.pop("memory"), flags.pop("memory_workers")
    )
    kubeconfig = None if flags.pop("skip_kubeconfig") else default_kubeconfig_path()
    create_cluster(
        name=name, cidr=cidr or ("127.5.0.0/24" if chosen == "process" else "10.5.0.0/24"),
        controlplanes=controlplanes, workers=workers, state=Path(state),
        talosconfig=_talosconfig_path(), config_patches=config_patch, cp_patches=config_patch_control_plane,
        worker_patches=config_patch_worker, wait_timeout=timeout.total_seconds(), wait=wait,
        progress=lambda line: click.echo(line, err=True), provisioner=chosen, mtu=mtu,
        nameservers=[n.strip() for n in nameservers.split(",") if n.strip()], registry_mirrors=registry_mirror,
        static_addresses=static_addresses, with_registry=with_registry, extensions=extension, extra_cidr=extra_cidr,
        kubernetes_images=kubernetes_images, kubernetes_version=kubernetes_version,
        talos_version=flags["talos_version"], dns_domain=flags["dns_domain"], kube_prism_port=flags["kubeprism_port"],
        custom_cni_url=flags["custom_cni_url"], discovery=flags["with_cluster_discovery"], debug=flags["with_debug"],
        install_image=flags["install_image"], registry_insecure=flags["registry_insecure_skip_verify"],
        use_vip=flags["use_vip"], endpoint=flags["endpoint"], init_node_as_endpoint=flags["init_node_as_endpoint"],
        input_dir=flags["input_dir"], cpus=cpus, memory_mb=memory_mb, kubeconfig=kubeconfig,
        skip_boot_phase_finished=flags["skip_boot_phase_finished_check"],
        skip_node_readiness=flags["skip_k8s_node_readiness_check"], vm_flags=vm_flags,
    )  # fmt: skip


_VM_OPTIONS = {
    "vmlinuz_path": "vmlinuz_path", "initrd_path": "initrd_path", "iso_path": "iso_path", "disk": "disk_mb",
    "extra_disks": "extra_disks", "extra_disks_size": "extra_disks_size_mb", "with_bootloader": "with_bootloader",
    "with_uefi": "with_uefi", "with_apply_config": "with_apply_config",
    "extra_boot_kernel_args": "extra_boot_kernel_args", "with_nics": "nics",
}  # fmt: skip
"""create's VM options -> the qemu provisioner's names (:class:`ichor.provision._qemu.VMOptions`)."""


def _vm_flags(chosen: str, flags: dict[str, Any]) -> dict[str, Any]:
    """The VM flags, taken out of ``flags``: every one for qemu nodes (with ``--cpus``/``--memory``
    as the VM's size, taken out too); for other nodes only those given, which create refuses."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    values = {ours: flags.pop(name) for name, ours in _VM_OPTIONS.items()}
    if chosen != "qemu":
        given = {
            name for name in _VM_OPTIONS if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
        }
        return {ours: values[ours] for name, ours in _VM_OPTIONS.items() if name in given}
    sizes = {
        "cpus": "cpus",
        "cpus_workers": "cpus_workers",
        "memory": "memory_mb",
        "memory_workers": "memory_workers_mb",
    }
    for name, ours in sizes.items():
        if flags[name] is not None:
            values[ours] = flags[name]
        flags[name] = None
    for key in ("vmlinuz_path", "initrd_path", "iso_path"):
        if values[key]:
            values[key] = str(Path(values[key]).expanduser().resolve())
    return values


_GEN_FLAGS = (
    "install_image", "with_debug", "dns_domain", "with_cluster_discovery", "registry_mirror",
    "registry_insecure_skip_verify", "mtu", "nameservers", "custom_cni_url", "talos_version", "use_vip",
    "endpoint", "kubeprism_port",
)  # fmt: skip
"""Talos's ``checkForDefinedGenFlag`` list (the flags Ichor takes of it). ``--with-registry`` stays: its
mirrors are the cluster's own plumbing, patched into ``--input-dir``'s configs too."""


def _refuse_gen_flags_with_input_dir(input_dir: str) -> None:
    """Talos refuses a config-generation flag with ``--input-dir``: the configs are not generated."""
    from click.core import ParameterSource

    if not input_dir:
        return
    ctx = click.get_current_context()
    for name in _GEN_FLAGS:
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            flag = name.replace("_", "-")
            raise click.UsageError(f"flag --{flag} is not supported with generated configs (--input-dir)")


@cluster.command("show", help="Shows info about a local provisioned cluster")
@_NAME
@_STATE
@_PROVISIONER
def show(name: str, state: str, provisioner: str | None) -> None:
    from ichor.client import render_table
    from ichor.provision._teardown import show as show_cluster
    from ichor.provision._teardown import show_more

    click.echo(render_table(show_cluster(Path(state), name)), nl=False)
    if more := show_more(Path(state), name):
        click.echo("")
        click.echo(render_table(more), nl=False)


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
