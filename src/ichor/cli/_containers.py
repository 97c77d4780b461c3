"""``talosctl containers [-k]``: the containers of the node's system (or, with ``-k``, CRI) containerd,
in Talos's table (``NODE NAMESPACE ID IMAGE PID STATUS``; a pod's containers under its sandbox)."""

from __future__ import annotations

from typing import Any

import click

from ichor.cli._nodecmd import replies, run


@click.command("containers", help="List containers")
@click.option("-k", "--kubernetes", is_flag=True, help="use the k8s.io containerd namespace")
@click.option("-c", "--use-cri", is_flag=True, help="use the CRI driver")
def containers(kubernetes: bool, use_cri: bool) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import render_table

    request = machine_pb2.ContainersRequest(
        namespace="k8s.io" if kubernetes else "system", driver=1 if use_cri else 0
    )

    async def work(client: Any) -> None:
        response = await client.machine.Containers(request)
        rows = [["NODE", "NAMESPACE", "ID", "IMAGE", "PID", "STATUS"]]
        for node, message in replies(client, response, "error getting container list"):
            for c in sorted(message.containers, key=lambda c: (c.pod_id, c.id != c.pod_id, c.id)):
                shown = c.id if c.id == c.pod_id else f"└─ {c.id}"
                rows.append([node, c.namespace, shown, c.image, str(c.pid), c.status])
        click.echo(render_table(rows), nl=False)

    run(work)


@click.command("restart", help="Restart a process")
@click.argument("container_id", metavar="<id>")
@click.option("-k", "--kubernetes", is_flag=True, help="use the k8s.io containerd namespace")
@click.option("--use-cri", is_flag=True, hidden=True, help="use the CRI driver")
def restart(container_id: str, kubernetes: bool, use_cri: bool) -> None:
    """SIGTERM to the container's task; its owner (an extension service's supervisor) or, for a CRI
    task, the node starts it again. Prints nothing when every node did it, as Talos."""
    from ichor.api.gen.machine import machine_pb2

    request = machine_pb2.RestartRequest(
        namespace="k8s.io" if kubernetes else "system", driver=1 if kubernetes else 0, id=container_id
    )

    async def work(client: Any) -> None:
        replies(client, await client.machine.Restart(request), "error restarting process")

    run(work)
