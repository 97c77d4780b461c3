"""``talosctl rotate-ca``: rotate the Talos API CA and the Kubernetes API CA, as Talos 1.7 does.

Talos's flags and defaults: ``--dry-run`` is **on** unless ``--dry-run=false`` is given (the steps
are printed, nothing changes), ``--talos`` and ``--kubernetes`` both on, ``--output`` the file the new
talosconfig is written to (``talosconfig`` in the current directory), ``--with-docs`` and
``--with-examples`` how each patched machine config is re-encoded, ``--init-node``,
``--control-plane-nodes`` and ``--worker-nodes`` the cluster's nodes (else the discovered members of
the one ``-n`` node, as ``health``), ``--k8s-endpoint`` instead of the kubeconfig's server. The steps
are :mod:`ichor.client.rotate_ca`'s; the new CAs are made here, as Talos's ``secrets.NewBundle``
makes them (Talos: Ed25519, Kubernetes: ECDSA P-256), and printed with their keys: keep the output.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import run_talos

LONG_HELP = """The command can rotate both Talos and Kubernetes root CAs (for the API).
By default both CAs are rotated, but you can choose to rotate just one or another.
The command starts by generating new CAs, and gracefully applying it to the cluster.

For Kubernetes, the command only rotates the API server issuing CA, and other Kubernetes
PKI can be rotated by applying machine config changes to the controlplane nodes."""
DRY_RUN_DONE = "> Dry-run mode enabled, no changes were made to the cluster, re-run with `--dry-run=false` to apply the changes."


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _log(line: str) -> None:
    """A retried error, as Go's ``log.Printf`` writes it (stderr, local time)."""
    click.echo(f"{datetime.now().strftime('%Y/%m/%d %H:%M:%S')} {line}", err=True)


@click.command("rotate-ca", cls=CobraCommand, short_help="Rotate cluster CAs (Talos and Kubernetes APIs).",
               help=LONG_HELP)  # fmt: skip
@click.option("--init-node", default="", help="specify IPs of init node")
@click.option("--control-plane-nodes", multiple=True, help="specify IPs of control plane nodes")
@click.option("--worker-nodes", multiple=True, help="specify IPs of worker nodes")
@click.option("--k8s-endpoint", default="", help="use endpoint instead of kubeconfig default")
@click.option("--with-examples/--no-with-examples", default=True, show_default=True,
              help="patch all machine configs with the commented examples")  # fmt: skip
@click.option("--with-docs/--no-with-docs", default=True, show_default=True,
              help="patch all machine configs adding the documentation for each field")  # fmt: skip
@click.option("-o", "--output", default="talosconfig", show_default=True, metavar="talosconfig",
              help="path to the output new `talosconfig`")  # fmt: skip
@click.option(
    "--dry-run/--no-dry-run", default=True, show_default=True, help="dry-run mode (no changes to the cluster)"
)
@click.option("--talos/--no-talos", default=True, show_default=True, help="rotate Talos API CA")
@click.option(
    "--kubernetes/--no-kubernetes", default=True, show_default=True, help="rotate Kubernetes API CA"
)
def rotate_ca(
    init_node: str,
    control_plane_nodes: tuple[str, ...],
    worker_nodes: tuple[str, ...],
    k8s_endpoint: str,
    with_examples: bool,
    with_docs: bool,
    output: str,
    dry_run: bool,
    talos: bool,
    kubernetes: bool,
) -> None:
    from ichor.client import Client
    from ichor.client.health import ClusterInfo
    from ichor.client.rotate_ca import RotateError, rotate_kubernetes_ca, rotate_talos_ca
    from ichor.machinery import pki
    from ichor.machinery.secrets import CA_VALIDITY

    # Talos's order: the init node first, then the control planes, then the workers.
    planes = ([init_node] if init_node else []) + _split(control_plane_nodes)
    given = ClusterInfo.from_flags(list(dict.fromkeys(planes)), _split(worker_nodes))
    style = {"with_docs": with_docs, "with_examples": with_examples, "dry_run": dry_run}

    async def work(current: Any) -> None:
        current.client.require_single_node("rotate-ca")
        cluster = given if given is not None else await current.discover()
        talos_ca = pki.new_ed25519_ca(organization="talos", ttl=CA_VALIDITY)
        kubernetes_ca = pki.new_ecdsa_ca(organization="kubernetes", ttl=CA_VALIDITY)
        client = current.client
        endpoints = [e.raw for e in client.endpoints]
        context = current.context or ""
        replaced: Any = None
        if talos:
            try:
                new_config = await rotate_talos_ca(
                    client, cluster=cluster, new_ca=talos_ca, context_name=context, endpoints=endpoints,
                    printf=click.echo, log=_log, **style,
                )  # fmt: skip
            except RotateError as exc:
                raise RotateError(f"error rotating Talos CA: {exc}", hint=exc.hint) from None
            if dry_run:
                click.echo(DRY_RUN_DONE)
            else:
                click.echo(f'> Writing new talosconfig to "{output}"')
                new_config.save(output)
                # The rest goes through the new PKI, as Talos re-creates its client.
                replaced = Client.from_context(
                    new_config.contexts[context], name=context, endpoints=endpoints
                )
                client = replaced
        try:
            if kubernetes:
                try:
                    await rotate_kubernetes_ca(
                        client, cluster=cluster, new_ca=kubernetes_ca, k8s_endpoint=k8s_endpoint, printf=click.echo,
                        log=_log, **style,
                    )  # fmt: skip
                except RotateError as exc:
                    raise RotateError(f"error rotating Kubernetes CA: {exc}", hint=exc.hint) from None
                if dry_run:
                    click.echo(DRY_RUN_DONE)
                else:
                    click.echo(
                        "> Kubernetes CA rotation done, new 'kubeconfig' can be fetched with `talosctl kubeconfig`."
                    )
        finally:
            if replaced is not None:
                await replaced.aclose()

    run_talos(work)
