"""``talosctl support``: a zip of everything needed to debug the nodes given with ``-n``, offline.

The layout is Talos 1.7.6's (go-talos-support v0.1.0), one folder per node and one for the cluster::

    <node>/dmesg.log                      kernel log (the node's console log on a process node)
    <node>/controller-runtime.log         the controller runtime's log
    <node>/dependencies.dot               the controller graph (`talosctl inspect dependencies`)
    <node>/mounts, processes, summary     tables as talosctl prints them; summary = client + server version
    <node>/io                             ``DiskStats`` as a table (NAME IO_TIME IO_TIME_WEIGHTED
                                          DISK_WRITE_SECTORS DISK_READ_SECTORS); on a shared kernel
                                          the host's disks, as the node's DiskStats says
    <node>/devices                        ``/proc/bus/pci/devices`` read from the node; a node whose
                                          root has no such file (a process node) has no ``devices``
    <node>/resources/<type>.yaml          every resource of every type the node has; the spec of a
                                          sensitive type is "<REDACTED>", as Talos writes it
    <node>/service-logs/<id>.log, .state  each service's log and state (`talosctl service <id>`)
    <node>/kubernetes-logs/kube-system/<container>.log
                                          the log of each kube-system pod container the node's CRI
                                          containerd has (``-exited`` before ``.log`` when it is not
                                          running; sandboxes left out), as `talosctl logs -k` shows it
    kubernetesResources/nodes.yaml        the cluster's Nodes and kube-system Pods, read from the API
    kubernetesResources/systemPods.yaml   server with the admin kubeconfig the endpoint serves, as
                                          client-go's typed lists print as YAML (no apiVersion/kind,
                                          keys sorted); when no API server answers, Talos's "Failed to
                                          create kubernetes client ..." on stderr and no such files

Ichor adds two files Talos users ask for: ``<node>/machineconfig-redacted.yaml`` (the machine config
with its secrets replaced, see :mod:`ichor.machinery.redact`; the ``MachineConfigs`` resource file
only says "<REDACTED>") and, on control planes, ``<node>/etcd-members`` (``talosctl etcd members``).
A node that runs no containerd (a process node) has no kube-system logs and no such folder.

A failing collector does not stop the others: its error is listed at the end ("Processed with
errors"), the bundle is still written, and the exit status is 1. The archive is written to
``<output>.part`` and renamed when complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import zipfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ichor.cli._nodecmd import _empty, run

REDACTED_SPEC = "<REDACTED>\n"
CONFIG_TYPE = "MachineConfigs.config.talos.dev"
CLUSTER = "cluster"
"""The source of the cluster-wide collectors (their files are at the archive's top level)."""
PCI_DEVICES = "/proc/bus/pci/devices"
IO_HEADER = ("NAME", "IO_TIME", "IO_TIME_WEIGHTED", "DISK_WRITE_SECTORS", "DISK_READ_SECTORS")
KUBE_TIMEOUT = 10.0
"""Seconds for each Kubernetes API request of the bundle (the reachability check included)."""


@dataclass
class Collector:
    """One file of the bundle: where it goes and how to get its bytes (None: no file)."""

    node: str
    path: str
    collect: Callable[[], Awaitable[bytes | None]]

    @property
    def archive_path(self) -> str:
        """``<node>/<path>``; a cluster collector's file is at the top level, as in Talos's bundle."""
        return self.path if self.node == CLUSTER else f"{self.node}/{self.path}"


@dataclass
class Outcome:
    written: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)


async def _stream(open_call: Callable[[], Any], request: Any) -> bytes:
    from ichor.client import message_error

    data = bytearray()
    async with open_call() as call:
        await call.send_message(request, end=True)
        async for message in call:
            error = message_error(message)
            if error is not None:
                raise click.ClickException(str(error))
            data += message.bytes
    return bytes(data)


def _table(rows: list[list[str]]) -> bytes:
    from ichor.client import render_table

    return render_table(rows).encode()


def resources_yaml(resources: list[Any], sensitive: bool) -> bytes | None:
    """Talos's ``resources/<type>.yaml``: ``metadata`` + ``spec`` documents, sensitive specs redacted."""
    from ichor.cli._get import _metadata_yaml

    docs = []
    for resource in resources:
        if sensitive:
            shown = type(resource)()
            shown.CopyFrom(resource)
            shown.spec.yaml_spec = REDACTED_SPEC
            resource = shown
        docs.append(_metadata_yaml("", resource).split("\n", 1)[1])
    return "---\n".join(docs).encode() if docs else None


def service_state(svc: Any) -> bytes:
    """What ``talosctl service <id>`` prints for one service (without the NODE line)."""
    from ichor.cli._node_basic import _ago, _health

    lines = [f"ID       {svc.id}", f"STATE    {svc.state}", f"HEALTH   {_health(svc.health)}"]
    if svc.health.last_message:
        lines.append(f"LAST HEALTH MESSAGE   {svc.health.last_message}")
    for n, event in enumerate(reversed(svc.events.events)):
        lines.append(
            f"{'EVENTS   ' if n == 0 else '         '}[{event.state}]: {event.msg} ({_ago(event.ts)})"
        )
    return ("\n".join(lines) + "\n").encode()


async def node_collectors(client: Any, node: str) -> list[Collector]:
    """Every collector for ``node``; asks the node which resource types and services it has."""
    from ichor.api.gen.machine import machine_pb2
    from ichor.api.gen.v1alpha1 import meta_pb2
    from ichor.cli._get import RD_TYPE

    bound = client.with_node(node)
    machine = bound.machine

    async def dmesg() -> bytes:
        return await _stream(machine.Dmesg.open, machine_pb2.DmesgRequest())

    def logs(service_id: str) -> Callable[[], Awaitable[bytes]]:
        async def collect() -> bytes:
            return await _stream(machine.Logs.open, machine_pb2.LogsRequest(namespace="system", id=service_id,
                                                                             tail_lines=-1))  # fmt: skip

        return collect

    async def dependencies() -> bytes:
        from ichor.cli._inspect import render_dependencies

        reply = await bound.inspect.ControllerRuntimeDependencies(_empty())
        return render_dependencies([e for m in reply.messages for e in m.edges]).encode()

    async def mounts() -> bytes:
        from ichor.cli._node_info import MOUNT_HEADER, mount_cells

        rows = [[*MOUNT_HEADER]]
        for m in (await machine.Mounts(_empty())).messages:
            rows.extend(mount_cells(s) for s in m.stats)
        return _table(rows)

    async def processes() -> bytes:
        from ichor.cli._etcd import humanize_bytes
        from ichor.cli._node_info import PROCESS_HEADER, process_cells

        rows = [[*PROCESS_HEADER]]
        for m in (await machine.Processes(_empty())).messages:
            rows.extend(process_cells(p, humanize_bytes) for p in m.processes)
        return _table(rows)

    async def io() -> bytes:
        return io_table(await machine.DiskStats(_empty()))

    async def devices() -> bytes | None:
        from ichor.client import RPCError

        try:
            return await _stream(machine.Read.open, machine_pb2.ReadRequest(path=PCI_DEVICES))
        except RPCError as err:
            if "no such file or directory" in err.rpc_message:
                return None  # a node whose root has no /proc/bus/pci (a process node)
            raise

    async def summary() -> bytes:
        from ichor.cli._version import client_version_text

        text = client_version_text() + "Server:\n"
        for m in (await machine.Version(_empty())).messages:
            v = m.version
            text += (f"\tTag:         {v.tag}\n\tSHA:         {v.sha}\n\tBuilt:       {v.built}\n"
                     f"\tGo version:  {v.go_version}\n\tOS/Arch:     {v.os}/{v.arch}\n")  # fmt: skip
        return text.encode()

    async def config() -> bytes | None:
        from ichor.machinery.redact import redact_config

        found = await bound.list_resources("config", CONFIG_TYPE)
        texts = [r.spec.yaml_spec for r in found if r.metadata.id == "v1alpha1"]
        return redact_config(texts[0]).encode() if texts else None

    async def etcd_members() -> bytes:
        from ichor.cli._etcd import MEMBER_HEADER, member_cells

        rows = [[*MEMBER_HEADER]]
        reply = await machine.EtcdMemberList(machine_pb2.EtcdMemberListRequest(query_local=True))
        for m in reply.messages:
            rows.extend(member_cells(member) for member in m.members)
        return _table(rows)

    out = [Collector(node, path, collect) for path, collect in (
        ("dmesg.log", dmesg), ("controller-runtime.log", logs("controller-runtime")),
        ("dependencies.dot", dependencies), ("mounts", mounts), ("devices", devices), ("io", io),
        ("processes", processes), ("summary", summary),
        ("machineconfig-redacted.yaml", config),
    )]  # fmt: skip
    for rd in await bound.list_resources("meta", RD_TYPE):
        spec = meta_pb2.ResourceDefinitionSpec()
        spec.ParseFromString(rd.spec.proto_spec)
        sensitive = spec.sensitivity == meta_pb2.ResourceDefinitionSpec.SENSITIVE

        async def one_type(spec: Any = spec, sensitive: bool = sensitive) -> bytes | None:
            found = await bound.list_resources(spec.default_namespace, spec.resource_type)
            return resources_yaml(found, sensitive)

        out.append(Collector(node, f"resources/{rd.metadata.id}.yaml", one_type))
    types = await bound.list_resources("config", "MachineTypes.config.talos.dev")
    if any(t.spec.yaml_spec.strip() in ("controlplane", "init") for t in types):
        out.append(Collector(node, "etcd-members", etcd_members))
    for message in (await machine.ServiceList(_empty())).messages:
        for svc in message.services:

            async def state(svc: Any = svc) -> bytes:
                return service_state(svc)

            out += [Collector(node, f"service-logs/{svc.id}.log", logs(svc.id)),
                    Collector(node, f"service-logs/{svc.id}.state", state)]  # fmt: skip
    return out + await kube_system_collectors(machine, node)


_FAILED_PRECONDITION = 9
KUBE_LOGS = "kubernetes-logs"


def io_table(reply: Any) -> bytes:
    """Talos's ``io`` file: each disk's busy time and sectors moved, from a ``DiskStats`` reply."""
    from ichor.client import message_error

    rows = [[*IO_HEADER]]
    for message in reply.messages:
        error = message_error(message)
        if error is not None:
            raise click.ClickException(str(error))
        rows.extend(
            [d.name, str(d.io_time_ms), str(d.io_time_weighted_ms), str(d.write_sectors), str(d.read_sectors)]
            for d in message.devices
        )
    return _table(rows)


def kubernetes_list_yaml(listed: dict[str, Any]) -> bytes:
    """A Kubernetes list as Talos's bundle writes it: client-go's typed list (``apiVersion`` and
    ``kind`` cleared by its decoder) through the YAML serializer (keys sorted, two-space indent,
    list items not indented)."""
    from ichor.machinery.yamlio import dump_sorted

    shown = {k: v for k, v in listed.items() if k not in ("apiVersion", "kind")}
    return dump_sorted(shown, kubernetes=True).encode()


async def kubernetes_client(client: Any) -> Any:
    """Talos's ``getKubernetesClient``: the admin kubeconfig from the endpoint, checked by reading
    namespace ``kube-system``; None (and Talos's line on stderr) when that fails."""
    from ichor.client.health_k8s import fetch_kubeconfig
    from ichor.kubeapi import KubeAPIError, KubeClient, load_kubeconfig
    from ichor.machinery.errors import MachineryError

    try:
        text = await fetch_kubeconfig(client.without_nodes())
        kube = KubeClient(load_kubeconfig(text, source="kubeconfig from the endpoint"), timeout=KUBE_TIMEOUT)
        await kube.get("/api/v1/namespaces/kube-system")
    except (KubeAPIError, MachineryError) as exc:
        click.echo(f"Failed to create kubernetes client {exc}", err=True)
        return None
    return kube


def kubernetes_collectors(kube: Any) -> list[Collector]:
    """The cluster's files: its Nodes and its kube-system Pods (none without a Kubernetes client)."""
    if kube is None:
        return []

    def listed(path: str) -> Callable[[], Awaitable[bytes]]:
        async def collect() -> bytes:
            return kubernetes_list_yaml(await kube.get(path))

        return collect

    return [
        Collector(CLUSTER, "kubernetesResources/nodes.yaml", listed("/api/v1/nodes")),
        Collector(
            CLUSTER, "kubernetesResources/systemPods.yaml", listed("/api/v1/namespaces/kube-system/pods")
        ),
    ]


async def kube_system_collectors(machine: Any, node: str) -> list[Collector]:
    """One collector per kube-system container of the node's CRI containerd (Talos's
    ``kubernetes-logs/kube-system/<name>[-exited].log``); none on a node without containerd. When the listing fails
    otherwise, one collector that reports why, so the rest of the bundle is still written."""
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import RPCError

    try:
        reply = await machine.Containers(machine_pb2.ContainersRequest(namespace="k8s.io", driver=1))
    except RPCError as err:
        if err.code == _FAILED_PRECONDITION:  # "this node runs no containerd": no Kubernetes here
            return []
        failure = err

        async def failed() -> bytes | None:
            raise failure

        return [Collector(node, f"{KUBE_LOGS}/kube-system/", failed)]

    def log(container_id: str) -> Callable[[], Awaitable[bytes]]:
        async def collect() -> bytes:
            request = machine_pb2.LogsRequest(namespace="k8s.io", driver=1, id=container_id, tail_lines=-1)
            return await _stream(machine.Logs.open, request)

        return collect

    out: list[Collector] = []
    taken: set[str] = set()
    for message in reply.messages:
        for c in message.containers:
            if c.status == "SANDBOX_READY" or c.pod_id.split("/", 1)[0] != "kube-system":
                continue
            name = f"{c.name}{'' if c.pid else '-exited'}"
            if name in taken:  # an earlier run of the same container: tell them apart by id
                name = f"{name}-{c.id.rsplit(':', 1)[-1][:12]}"
            taken.add(name)
            out.append(Collector(node, f"{KUBE_LOGS}/kube-system/{name}.log", log(c.id)))
    return out


class Progress:
    """One bar per node (rich, on stderr) or, with ``-v``, one line per file collected."""

    def __init__(self, totals: dict[str, int], verbose: bool) -> None:
        self.verbose = verbose
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}
        if not verbose:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bars

            self.bar = Bars(
                TimeElapsedColumn(), BarColumn(bar_width=20), MofNCompleteColumn(), TextColumn("{task.description}"),
                console=Console(stderr=True), transient=False,
            )  # fmt: skip
            for node, total in totals.items():
                self.tasks[node] = self.bar.add_task(f"{node}: initializing...", total=total)

    def __enter__(self) -> Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def step(self, collector: Collector, error: str | None) -> None:
        state = f"collect {collector.path.rsplit('/', 1)[-1]}"
        if self.bar is not None:
            self.bar.update(self.tasks[collector.node], advance=1, description=f"{collector.node}: {state}")
        else:
            click.echo(f"{collector.node}: {state}" + (f": error: {error}" if error else ""), err=True)


async def collect_bundle(client: Any, nodes: list[str], archive: zipfile.ZipFile, workers: int,
                         verbose: bool) -> Outcome:  # fmt: skip
    outcome = Outcome()
    per_node: dict[str, list[Collector]] = {}
    cluster = kubernetes_collectors(await kubernetes_client(client))
    if cluster:
        per_node[CLUSTER] = cluster
    for node in nodes:
        try:
            per_node[node] = await node_collectors(client, node)
        except Exception as exc:  # the node is unreachable or refuses: say so, go on with the others
            from ichor.machinery.errors import MachineryError

            if not isinstance(exc, MachineryError | click.ClickException):
                raise
            outcome.errors.append((node, str(exc)))
    with Progress({n: len(c) for n, c in per_node.items()}, verbose) as progress:

        async def run_one(collector: Collector, slots: asyncio.Semaphore) -> None:
            from ichor.kubeapi import KubeAPIError
            from ichor.machinery.errors import MachineryError

            async with slots:
                error = None
                try:
                    data = await collector.collect()
                except (MachineryError, KubeAPIError, click.ClickException) as exc:
                    error, data = str(exc), None
                if data is not None:
                    name = collector.archive_path
                    archive.writestr(zipfile.ZipInfo(name, time.localtime()[:6]), data,
                                     compress_type=zipfile.ZIP_DEFLATED)  # fmt: skip
                    outcome.written.append(name)
                if error is not None:
                    outcome.errors.append((collector.node, f"{collector.path}: {error}"))
                progress.step(collector, error)

        async with asyncio.TaskGroup() as tg:
            for collectors in per_node.values():
                slots = asyncio.Semaphore(workers)
                for collector in collectors:
                    tg.create_task(run_one(collector, slots))
    return outcome


def _default_output() -> str:
    """Talos's name: ``support-<cluster id>.zip`` when the cluster uses discovery, else ``support.zip``."""

    async def work(client: Any) -> str:
        nodes = client.nodes or [client.peer_host]
        with contextlib.suppress(Exception):
            found = await client.with_node(nodes[0]).list_resources(
                "config", "DiscoveryConfigs.cluster.talos.dev"
            )
            for r in found:
                if "discoveryEnabled: true" in r.spec.yaml_spec:
                    for line in r.spec.yaml_spec.splitlines():
                        if line.startswith("serviceClusterID:") and line.split(":", 1)[1].strip():
                            return f"support-{line.split(':', 1)[1].strip()}.zip"
        return "support.zip"

    return run(work)


def _confirm_overwrite(path: Path) -> None:
    if not path.exists():
        return
    click.echo(f"{path} already exists, overwrite? [y/N]: ", nl=False)
    answer = sys.stdin.readline()
    if answer.strip().lower() != "y":
        raise click.ClickException(f"operation aborted: {path} is kept; remove it or pass -O/--output <path>")


@click.command(
    "support",
    short_help="Dump debug information about the cluster",
    help="Dump debug information about the cluster\n\nGenerated bundle contains the following debug "
    "information:\n\n\b\n- For each node:\n  - Kernel logs.\n  - All Talos internal services logs.\n"
    "  - All kube-system pods logs.\n"
    "  - Talos COSI resources without secrets.\n  - COSI runtime state graph.\n  - Processes snapshot.\n"
    "  - IO pressure snapshot.\n  - Mounts list.\n  - PCI devices info.\n  - Talos version.\n"
    "  - The machine config with secrets redacted.\n  - etcd members (control plane nodes).\n\n"
    "\b\n- For the cluster:\n  - Kubernetes nodes and kube-system pods manifests.",
)
@click.option("-O", "--output", default="", help="output file to write support archive to")
@click.option("-w", "--num-workers", default=1, type=click.IntRange(min=1), show_default=True,
              help="number of workers per node")  # fmt: skip
@click.option("-v", "--verbose", is_flag=True, help="verbose output")
def support(output: str, num_workers: int, verbose: bool) -> None:
    from ichor.cli._nodecmd import global_options

    if not global_options().nodes:
        raise click.UsageError(
            "please provide at least a single node to gather the debug information from (-n/--nodes)"
        )
    target = Path(output or _default_output())
    _confirm_overwrite(target)
    part = target.with_name(target.name + ".part")

    async def work(client: Any) -> Outcome:
        with zipfile.ZipFile(part, "w") as archive:
            nodes = list(dict.fromkeys(client.require_nodes()))  # each node once, in the order given
            return await collect_bundle(client, nodes, archive, num_workers, verbose)

    try:
        outcome = run(work)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(target)
    if outcome.errors:
        from ichor.client import render_table

        click.echo("Processed with errors:", err=True)
        rows = [
            ["", "SOURCE", "ERROR"],
            *(["", source, error.splitlines()[0]] for source, error in outcome.errors),
        ]
        click.echo(render_table(rows), err=True, nl=False)
    click.echo(f"Support bundle is written to {target}", err=True)
    if outcome.errors:
        raise click.exceptions.Exit(1)
