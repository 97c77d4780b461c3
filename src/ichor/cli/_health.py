"""``talosctl health``: cluster health, checked on the node (``--server``, default) or from here.

With ``--server`` the node runs the checks (``ClusterService/HealthCheck``) and streams progress,
which is printed to stderr; otherwise :mod:`ichor.client.health` runs them from talosctl.
Without ``--control-plane-nodes``/``--worker-nodes`` the nodes are the cluster members the node
knows from discovery (``talosctl get members``), as in Talos. ``--run-e2e`` is refused: it runs Kubernetes's conformance (e2e) suite in the cluster, whose
image Ichor does not build.
"""

from __future__ import annotations

from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import parse_duration, run_talos


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


@click.command("health", cls=CobraCommand, help="Check cluster health")
@click.option("--init-node", default="", help="specify IPs of init node")
@click.option("--control-plane-nodes", multiple=True, help="specify IPs of control plane nodes")
@click.option("--worker-nodes", multiple=True, help="specify IPs of worker nodes")
@click.option("--wait-timeout", default="20m", help="timeout to wait for the cluster to be ready")
@click.option("--k8s-endpoint", default="", help="use endpoint instead of kubeconfig default")
@click.option("--server/--no-server", default=True, help="run server-side check")
@click.option("--run-e2e/--no-run-e2e", default=False, help="run Kubernetes e2e test")
def health(
    init_node: str,
    control_plane_nodes: tuple[str, ...],
    worker_nodes: tuple[str, ...],
    wait_timeout: str,
    k8s_endpoint: str,
    server: bool,
    run_e2e: bool,
) -> None:
    from ichor.client.health import ClusterInfo
    from ichor.machinery.errors import MachineryError

    timeout = parse_duration(wait_timeout, flag="--wait-timeout")
    if run_e2e:
        raise MachineryError(
            "--run-e2e runs the Kubernetes e2e conformance suite, whose image Ichor does not build",
            hint="drop --run-e2e; `talosctl health` checks the node APIs, etcd and Kubernetes",
        )
    given = ClusterInfo.from_flags(_split(control_plane_nodes), _split(worker_nodes), init_node)

    async def work(talos: Any) -> None:
        info = given
        if not server and info is None:
            talos.client.require_single_node("health")
            info = await talos.discover()
            nodes = " ".join(f'"{n}"' for n in [*info.control_plane_nodes, *info.worker_nodes])
            click.echo(f"discovered nodes: [{nodes}]", err=True)
        async for stage in talos.health(
            cluster=info, timeout=timeout, server=server, k8s_endpoint=k8s_endpoint
        ):
            click.echo(str(stage), err=True)

    run_talos(work)
