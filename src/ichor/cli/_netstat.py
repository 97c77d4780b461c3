"""``talosctl netstat``, ``stats`` and ``cgroups``: sockets, container stats and the cgroup tree of a node.

``netstat`` prints Talos's table (``Proto Recv-Q Send-Q Local Address Foreign Address State`` plus
the columns ``-x``, ``-p``, ``-k``, ``-o`` add) from the ``Netstat`` RPC. On a process node the
sockets are those held by the node's own processes (see ``ichor.machined.server._netstat``).
``--pods`` adds the sockets of the pods' own network namespaces, each named by its pod from
``containers -k``, as Talos's client does. ``stats`` prints ``NODE NAMESPACE ID MEMORY(MB) CPU`` from ``Stats``; a process node answers that it
runs no containers. ``cgroups`` reads the node's ``/sys/fs/cgroup`` as Talos does; a process node
has none of its own (it lives in the host's cgroup), and the command says so.
"""

from __future__ import annotations

from typing import Any

import click

from ichor.cli._nodecmd import replies, run

CGROUP_PRESETS = ("cpu", "cpuset", "io", "memory", "process", "psi", "swap")


NETSTAT_FLAGS = (
    ("-v", "--verbose", "display sockets of all supported transport protocols"),
    ("-x", "--extend", "show detailed socket information"),
    ("-p", "--programs", "show process using socket"),
    ("-o", "--timers", "display timers"),
    ("-l", "--listening", "display listening server sockets"),
    ("-a", "--all", "display all sockets states (default: connected)"),
    ("-k", "--pods", "show sockets used by Kubernetes pods"),
    ("-t", "--tcp", "display only TCP sockets"),
    ("-u", "--udp", "display only UDP sockets"),
    ("-U", "--udplite", "display only UDPLite sockets"),
    ("-w", "--raw", "display only RAW sockets"),
    ("-4", "--ipv4", "display only ipv4 sockets"),
    ("-6", "--ipv6", "display only ipv6 sockets"),
)
"""talosctl 1.7's netstat flags (``-x`` for extend: ``-e`` is the endpoints flag)."""


def _netstat_flags(command: Any) -> Any:
    for short, name, text in reversed(NETSTAT_FLAGS):
        command = click.option(short, name, is_flag=True, help=text)(command)
    return command


@click.command("netstat", help="Show network connections and sockets.\n\nYou can pass an optional argument "
               "to view a specific pod's connections. To do this, format the argument as \"namespace/pod\". "
               "If you don't pass an argument, the command will show host connections.",
               short_help="Show network connections and sockets")  # fmt: skip
@click.argument("pod", required=False)
@_netstat_flags
def netstat(pod: str | None, **flags: bool) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import render_table

    if pod is not None:
        if flags["pods"]:
            raise click.UsageError("cannot use --pods and specify a pod")
        raise click.ClickException(
            f"pod {pod}: Ichor does not show a pod's connections yet; "
            "run `talosctl netstat` without a pod for the node's own sockets, or `kubectl exec` into the pod"
        )
    request = netstat_request(flags)

    async def work(client: Any) -> None:
        pods = await _pod_netns(client) if flags["pods"] else {}
        response = await client.machine.Netstat(request)
        state_names = machine_pb2.ConnectRecord.State.Name
        timer_names = machine_pb2.ConnectRecord.TimerActive.Name
        rows: list[list[str]] = []
        good = replies(client, response, "error getting netstat")
        named = any(m.HasField("metadata") and m.metadata.hostname for _, m in good)
        for node, message in good:
            for r in message.connectrecord:
                cells = [r.l4proto, str(r.rxqueue), str(r.txqueue), f"{r.localip}:{r.localport}",
                         f"{r.remoteip}:{r.remoteport or '*'}", "" if r.state == 7 else state_names(r.state)]  # fmt: skip
                if flags["extend"]:
                    cells += [str(r.uid), str(r.inode)]
                if flags["programs"]:
                    cells.append(f"{r.process.pid}/{r.process.name}" if r.process.pid else "-")
                if flags["pods"]:
                    cells.append(pods.get((node, r.netns), "-") if r.netns else "-")
                if flags["timers"]:
                    cells.append(
                        f"{timer_names(r.tr).lower()} ({r.timerwhen / 100:.2f}/{r.retrnsmt}/{r.timeout})"
                    )
                rows.append([node, *cells] if named else cells)
        if rows:
            header = ["Proto", "Recv-Q", "Send-Q", "Local Address", "Foreign Address", "State"]
            header += [*(["Uid", "Inode"] if flags["extend"] else []), *(["PID/Program name"] if flags["programs"] else []),
                       *(["Pod"] if flags["pods"] else []), *(["Timer"] if flags["timers"] else [])]  # fmt: skip
            click.echo(render_table([["NODE", *header] if named else header, *rows]), nl=False)

    run(work)


async def _pod_netns(client: Any) -> dict[tuple[str, str], str]:
    """(node, network namespace) -> the pod in it, from ``containers -k``'s running sandboxes, as
    Talos's client names the pods of ``netstat --pods``."""
    from ichor.api.gen.common import common_pb2
    from ichor.api.gen.machine import machine_pb2

    request = machine_pb2.ContainersRequest(namespace="k8s.io", driver=common_pb2.ContainerDriver.CRI)
    response = await client.machine.Containers(request)
    return {
        (node, c.network_namespace): c.id
        for node, message in replies(client, response, "error getting container list")
        for c in message.containers
        if c.network_namespace and c.pid and c.id == c.pod_id
    }


def netstat_request(flags: dict[str, bool]) -> Any:
    """Talos's request for the flags: CONNECTED unless -a/-l; tcp+udp (v4 and v6) unless narrowed."""
    from ichor.api.gen.machine import machine_pb2

    request = machine_pb2.NetstatRequest()
    request.feature.pid = flags["programs"]
    request.netns.hostnetwork = True
    request.netns.allnetns = flags["pods"]
    families = {"tcp": flags["tcp"], "udp": flags["udp"], "udplite": flags["udplite"], "raw": flags["raw"]}
    if flags["verbose"] or not any(families.values()):
        families = {k: flags["verbose"] or k in ("tcp", "udp") for k in families}
    for family, on in families.items():
        setattr(request.l4proto, family, on and not (flags["ipv6"] and not flags["ipv4"]))
        setattr(request.l4proto, family + "6", on and not (flags["ipv4"] and not flags["ipv6"]))
    if flags["all"]:
        request.filter = machine_pb2.NetstatRequest.ALL
    elif flags["listening"]:
        request.filter = machine_pb2.NetstatRequest.LISTENING
    else:
        request.filter = machine_pb2.NetstatRequest.CONNECTED
    return request


@click.command("stats", help="Get container stats")
@click.option("-k", "--kubernetes", is_flag=True, help="use the k8s.io containerd namespace")
@click.option("-c", "--use-cri", is_flag=True, help="use the CRI driver")
def stats(kubernetes: bool, use_cri: bool) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import render_table

    request = machine_pb2.StatsRequest(
        namespace="k8s.io" if kubernetes else "system", driver=1 if use_cri else 0
    )

    async def work(client: Any) -> None:
        response = await client.machine.Stats(request)
        rows = [["NODE", "NAMESPACE", "ID", "MEMORY(MB)", "CPU"]]
        for node, message in replies(client, response, "error getting stats"):
            for s in sorted(message.stats, key=lambda s: s.id):
                shown = s.id if s.id == s.pod_id else f"└─ {s.id}"
                rows.append([node, s.namespace, shown, f"{s.memory_usage * 1e-6:.2f}", str(s.cpu_usage)])
        click.echo(render_table(rows), nl=False)

    run(work)


@click.command("cgroups", help="Retrieve cgroups usage information\n\nThe cgroups command fetches control "
               "group v2 (cgroupv2) usage details from the machine. Several presets are available to focus "
               f"on specific cgroup subsystems: {', '.join(CGROUP_PRESETS)}.",
               short_help="Retrieve cgroups usage information")  # fmt: skip
@click.option("--preset", type=click.Choice(CGROUP_PRESETS), help="preset name")
@click.option(
    "--schema-file", type=click.Path(dir_okay=False, exists=True), help="path to the columns schema file"
)
@click.option("--skip-cri-resolve", is_flag=True, help="do not resolve cgroup names via a request to CRI")
def cgroups(preset: str | None, schema_file: str | None, skip_cri_resolve: bool) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import RPCError, message_error

    if preset and schema_file:
        raise click.UsageError("--preset and --schema-file are mutually exclusive")
    if not preset and not schema_file:
        raise click.UsageError("either schema file or preset must be specified (--preset or --schema-file)")

    async def work(client: Any) -> None:
        node = client.require_single_node("cgroups")
        request = machine_pb2.ListRequest(root="/sys/fs/cgroup")
        found = False
        try:
            async with client.machine.List.open() as call:
                await call.send_message(request, end=True)
                async for info in call:
                    found = found or (message_error(info) is None and not info.error)
        except RPCError:
            found = False
        if not found:
            raise click.ClickException(
                f"{node} has no cgroup tree of its own (/sys/fs/cgroup): a process node runs inside the "
                "host's cgroup, so there are no per-service cgroups to show; `talosctl processes` and "
                "`talosctl memory` show the node's usage"
            )
        raise click.ClickException(f"{node}: printing a cgroup tree is not implemented in Ichor yet")

    run(work)
