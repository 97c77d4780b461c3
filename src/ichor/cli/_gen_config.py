"""``talosctl gen config``."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import click

from ichor.cli._lazy import CobraCommand
from ichor.machinery.constants import DEFAULT_DNS_DOMAIN, DEFAULT_INSTALL_DISK, DEFAULT_KUBERNETES_VERSION

_ALL_TYPES = "controlplane,worker,talosconfig"


def _split(values: tuple[str, ...]) -> list[str]:
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


@click.command(
    "config",
    cls=CobraCommand,
    help="Generates a set of configuration files for Talos cluster\n\n"
    "The cluster endpoint is the URL of the Kubernetes API server, for example https://192.168.0.2:6443.",
)
@click.argument("cluster_name")
@click.argument("cluster_endpoint")
@click.option(
    "--with-secrets", "with_secrets", metavar="FILE", help="use a secrets file generated using 'gen secrets'"
)
@click.option(
    "--kubernetes-version",
    default=DEFAULT_KUBERNETES_VERSION,
    show_default=True,
    help="desired kubernetes version to run",
)
@click.option(
    "--talos-version",
    default=None,
    help="the desired Talos version to generate config for (backwards compatibility, e.g. v0.8)",
)
@click.option(
    "--install-disk", default=DEFAULT_INSTALL_DISK, show_default=True, help="the disk to install to"
)
@click.option("--install-image", default=None, help="the image used to perform an installation")
@click.option(
    "--additional-sans",
    multiple=True,
    metavar="LIST",
    help="additional Subject-Alt-Names for the APIServer certificate",
)
@click.option(
    "--dns-domain", default=DEFAULT_DNS_DOMAIN, show_default=True, help="the dns domain to use for cluster"
)
@click.option(
    "--registry-mirror",
    multiple=True,
    metavar="HOST=URL",
    help="list of registry mirrors to use in format: <registry host>=<mirror URL>",
)
@click.option(
    "--with-docs/--no-with-docs",
    default=True,
    show_default=True,
    help="renders all machine configs adding the documentation for each field",
)
@click.option(
    "--with-examples/--no-with-examples",
    default=True,
    show_default=True,
    help="renders all machine configs with the commented examples",
)
@click.option(
    "--with-cluster-discovery/--no-with-cluster-discovery",
    default=True,
    show_default=True,
    help="enable cluster discovery feature",
)
@click.option(
    "--with-kubespan/--no-with-kubespan", default=False, show_default=True, help="enable KubeSpan feature"
)
@click.option(
    "-p",
    "--config-patch",
    "config_patch",
    multiple=True,
    metavar="PATCH",
    help="patch generated machineconfigs (applied to all node types), use @file to read a patch from file",
)
@click.option(
    "--config-patch-control-plane",
    multiple=True,
    metavar="PATCH",
    help="patch generated machineconfigs (applied to 'controlplane' type)",
)
@click.option(
    "--config-patch-worker",
    multiple=True,
    metavar="PATCH",
    help="patch generated machineconfigs (applied to 'worker' type)",
)
@click.option(
    "-t",
    "--output-types",
    "output_types",
    multiple=True,
    metavar="LIST",
    help=f"types of outputs to be generated. valid types are: [{_ALL_TYPES}]",
)
@click.option(
    "-o",
    "--output",
    default=None,
    help="destination to output generated files. when multiple output types are specified, it must be a directory. for a single output type, it must either be a file path, or '-' for stdout",
)
@click.option("--force/--no-force", default=False, help="will overwrite existing files")
@click.option(
    "--debug/--no-debug",
    default=False,
    help="only enable this if you know what you are doing; it generates configs with debug logging",
)
@click.option(
    "--persist/--no-persist", default=True, show_default=True, help="the desired persist value for configs"
)
@click.option(
    "--version",
    "config_version",
    default="v1alpha1",
    show_default=True,
    help="the desired machine config version to generate",
)
def gen_config(
    cluster_name: str,
    cluster_endpoint: str,
    with_secrets: str | None,
    kubernetes_version: str,
    talos_version: str | None,
    install_disk: str,
    install_image: str | None,
    additional_sans: tuple[str, ...],
    dns_domain: str,
    registry_mirror: tuple[str, ...],
    with_docs: bool,
    with_examples: bool,
    with_cluster_discovery: bool,
    with_kubespan: bool,
    config_patch: tuple[str, ...],
    config_patch_control_plane: tuple[str, ...],
    config_patch_worker: tuple[str, ...],
    output_types: tuple[str, ...],
    output: str | None,
    force: bool,
    debug: bool,
    persist: bool,
    config_version: str,
) -> None:
    from ichor.machinery.compatibility import KubernetesVersionError, check_kubernetes_version
    from ichor.machinery.constants import TALOS_VERSION
    from ichor.machinery.contract import CURRENT_CONTRACT, VersionContract
    from ichor.machinery.files import check_writable, write_atomic
    from ichor.machinery.generate import GenOptions, OutputType, generate, validate_endpoint
    from ichor.machinery.patch import load_patches
    from ichor.machinery.secrets import SecretsBundle

    if config_version != "v1alpha1":
        raise click.BadParameter(
            f"unknown config version {config_version!r}: only v1alpha1 exists", param_hint="--version"
        )
    validate_endpoint(cluster_endpoint)

    types: list[OutputType] = []
    for name in _split(output_types) or _ALL_TYPES.split(","):
        try:
            kind = OutputType(name)
        except ValueError:
            raise click.BadParameter(
                f"unknown output type {name!r}; valid types are: {_ALL_TYPES}", param_hint="-t/--output-types"
            ) from None
        if kind not in types:
            types.append(kind)

    mirrors: list[tuple[str, str]] = []
    for spec in registry_mirror:
        host, eq, url = spec.partition("=")
        if not eq or not host or not url:
            raise click.BadParameter(
                f"invalid registry mirror spec {spec!r}: expected <registry host>=<mirror URL>",
                param_hint="--registry-mirror",
            )
        mirrors.append((host, url))

    contract = VersionContract.parse(talos_version) if talos_version else CURRENT_CONTRACT
    try:
        kubernetes_version = check_kubernetes_version(kubernetes_version)
    except KubernetesVersionError as err:
        raise click.BadParameter(
            f"{err}; Talos 1.7 runs Kubernetes 1.25.0 to 1.30.x (default 1.30.3)",
            param_hint="--kubernetes-version",
        ) from None
    patches = load_patches(list(config_patch), flag="--config-patch")
    cp_patches = load_patches(list(config_patch_control_plane), flag="--config-patch-control-plane")
    worker_patches = load_patches(list(config_patch_worker), flag="--config-patch-worker")

    # Decide every destination before generating anything: an existing file without --force
    # must stop us before a single byte is written.
    to_stdout = output == "-"
    if to_stdout and len(types) != 1:
        raise click.BadParameter(
            "'-' (stdout) works only with a single output type", param_hint="-o/--output"
        )
    destinations: dict[OutputType, Path] = {}
    if not to_stdout:
        if len(types) == 1 and output is not None:
            destinations[types[0]] = Path(output)
        else:
            directory = Path(output or ".")
            if directory.exists() and not directory.is_dir():
                raise click.BadParameter(
                    f"{str(directory)!r} is not a directory; with several output types -o names a directory",
                    param_hint="-o/--output",
                )
            destinations = {kind: directory / kind.file_name for kind in types}
        for path in destinations.values():
            check_writable(path, force=force)

    if with_secrets:
        bundle = SecretsBundle.load(with_secrets)
    else:
        click.echo("generating PKI and tokens", err=True)
        bundle = SecretsBundle.generate(contract)

    opts = GenOptions(
        cluster_name=cluster_name,
        endpoint=cluster_endpoint,
        kubernetes_version=kubernetes_version,
        talos_version=TALOS_VERSION,
        contract=contract,
        install_disk=install_disk,
        install_image=install_image,
        additional_sans=tuple(_split(additional_sans)),
        dns_domain=dns_domain,
        registry_mirrors=tuple(mirrors),
        discovery_enabled=with_cluster_discovery,
        kubespan=with_kubespan,
        debug=debug,
        persist=persist,
    )
    root = click.get_current_context().find_root().obj
    endpoints = list(getattr(root, "endpoints", []) or [])
    result = generate(
        bundle,
        opts,
        output_types=types,
        patches=patches,
        controlplane_patches=cp_patches,
        worker_patches=worker_patches,
        with_docs=with_docs,
        with_examples=with_examples,
        talosconfig_endpoints=endpoints,
    )
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)

    if to_stdout:
        sys.stdout.write(result.outputs[types[0]])
        return
    for kind in types:
        path = write_atomic(destinations[kind], result.outputs[kind], mode=0o600, force=force)
        click.echo(f"Created {path}", err=True)
    if OutputType.TALOSCONFIG in types and not endpoints:
        tc = destinations[OutputType.TALOSCONFIG]
        click.echo(
            "\nnote: the talosconfig has no endpoints yet, so talosctl cannot reach the cluster with it.\n"
            "      Endpoints must be control plane node addresses (not a VIP or load balancer in front of\n"
            "      the Kubernetes API). Set them with:\n"
            f"        talosctl --talosconfig {tc} config endpoint <control plane IP> [<IP>...]",
            err=True,
        )


# `talosctl machineconfig gen`: the same command under Talos's second name (gen.NewConfigCmd("gen"))
machineconfig_gen = copy.copy(gen_config)
machineconfig_gen.name = "gen"
