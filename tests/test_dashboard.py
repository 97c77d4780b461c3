"""``talosctl dashboard`` without a node: its flags and checks, its data layer, its screens' text.

The dashboard against real nodes (headless and in a real terminal) is ``test_e2e_dashboard``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rich.console import Console

from ichor.api.gen.machine import machine_pb2
from ichor.api.gen.v1alpha1 import resource_pb2
from ichor.cli.dashboard import _render
from ichor.cli.dashboard._data import NodeSnapshot, NodeSource
from ichor.client import RPCError


def test_bad_update_interval_is_a_usage_error_naming_the_flag(talosctl: Any) -> None:
    for value in ("0s", "-1s", "soon"):
        result = talosctl("dashboard", "--update-interval", value)
        assert result.exit_code == 2, (value, result.stderr)
        assert "--update-interval" in result.stderr, result.stderr


def test_without_a_terminal_it_says_so_and_what_to_use_instead(talosctl: Any) -> None:
    result = talosctl("-n", "127.0.0.1", "dashboard", "-d", "1s")
    assert result.exit_code == 1
    assert "error: the dashboard needs a terminal" in result.stderr
    assert "hint:" in result.stderr and "talosctl services" in result.stderr


def test_help_lists_the_keys_and_the_interval_flag(talosctl: Any) -> None:
    result = talosctl("dashboard", "--help")
    assert result.exit_code == 0
    assert "-d, --update-interval" in result.stdout and "3s" in result.stdout
    assert "F1, F2, F3, F4" in result.stdout and "switch one node to the right" in result.stdout


def test_the_cli_and_the_command_module_do_not_import_textual_or_grpclib() -> None:
    code = (
        "import sys, ichor.cli._root, ichor.cli._dashboard; "
        "print(sorted(m for m in ('textual', 'grpclib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the data layer against a client that answers from real protos ---------------------------


def _resource(rtype: str, rid: str, yaml_spec: str, version: str = "1") -> Any:
    r = resource_pb2.Resource()
    r.metadata.type, r.metadata.id, r.metadata.version = rtype, rid, version
    r.spec.yaml_spec = yaml_spec
    return r


class _Machine:
    def __init__(self) -> None:
        self.cpu_times = [1.0, 1.5]
        self.memory_error: RPCError | None = None

    async def Version(self, _: Any) -> Any:
        reply = machine_pb2.VersionResponse()
        message = reply.messages.add()
        message.version.tag, message.platform.name = "v1.7.6", "container"
        return reply

    async def ServiceList(self, _: Any) -> Any:
        reply = machine_pb2.ServiceListResponse()
        services = reply.messages.add()
        machined = services.services.add(id="machined", state="Running")
        machined.events.events.add(msg="Starting service").ts.FromDatetime(datetime(2030, 1, 1, 12, 0, 0))
        machined.health.unknown = True
        etcd = services.services.add(id="etcd", state="Running")
        etcd.health.healthy = True
        return reply

    async def Memory(self, _: Any) -> Any:
        if self.memory_error is not None:
            raise self.memory_error
        reply = machine_pb2.MemoryResponse()
        reply.messages.add().meminfo.CopyFrom(machine_pb2.MemInfo(memtotal=1000, memavailable=250))
        return reply

    async def SystemStat(
        self, _: Any
    ) -> Any:  # a node from before SystemStat (test_dashboard_system.py: after)
        raise RPCError(12, "method SystemStat not implemented")

    async def Processes(self, _: Any) -> Any:
        reply = machine_pb2.ProcessesResponse()
        message = reply.messages.add()
        message.processes.add(pid=10, cpu_time=self.cpu_times.pop(0), command="python")
        return reply


class _Client:
    def __init__(self) -> None:
        self.machine = _Machine()
        self.resources = {
            "MachineStatuses.runtime.talos.dev": [
                _resource("MachineStatuses", "machine", "stage: running\nstatus:\n    ready: true\n")
            ],
            "HostnameStatuses.net.talos.dev": [_resource("HostnameStatuses", "hostname", "hostname: cp-1\n")],
            "KubeletSpecs.kubernetes.talos.dev": [
                _resource("KubeletSpecs", "kubelet", "image: 10.5.0.1:5000/siderolabs/kubelet:v1.30.3\n")
            ],
        }

    async def list_resources(self, namespace: str, rtype: str) -> list[Any]:
        return self.resources.get(rtype, [])


def test_a_poll_fills_the_snapshot_and_cpu_is_measured_between_two_polls() -> None:
    client = _Client()
    clock = iter([100.0, 102.0])
    source = NodeSource(client, "10.5.0.2", monotonic=lambda: next(clock))

    first = asyncio.run(source.poll())
    assert (first.hostname, first.version, first.stage, first.ready) == ("cp-1", "v1.7.6", "running", True)
    assert first.kubernetes == "v1.30.3"  # the kubelet image's tag (the registry's port is no tag)
    assert [(s.id, s.health) for s in first.services] == [("machined", "?"), ("etcd", "OK")]
    assert first.memory is not None and first.memory.percent == 75.0
    assert first.cpu_percent is None and first.processes[0].cpu_percent is None  # nothing to compare yet
    assert first.uptime(datetime(2030, 1, 1, 12, 5, 0, tzinfo=UTC)) == timedelta(minutes=5)

    second = asyncio.run(source.poll())
    assert second.cpu_percent == pytest.approx(25.0)  # 0.5 s of CPU in 2 s
    assert list(source.cpu_history) == [pytest.approx(25.0)] and len(source.memory_history) == 2


def test_a_failing_call_empties_only_its_part_and_names_its_error() -> None:
    client = _Client()
    client.machine.memory_error = RPCError(14, "connection refused")
    snap = asyncio.run(NodeSource(client, "10.5.0.2").poll())
    assert snap.memory is None and "connection refused" in snap.errors["memory"]
    assert snap.hostname == "cp-1" and snap.version == "v1.7.6" and len(snap.services) == 2
    text = _text(_render.monitor_facts(snap))
    assert "memory: rpc error: code = Unavailable desc = connection refused" in text


def test_a_node_that_answers_nothing_is_one_error_not_one_per_part() -> None:
    class _Down:
        def __getattr__(self, name: str) -> Any:
            async def fail(*_: Any) -> Any:
                raise RPCError(14, "connection refused")

            return fail

    client = _Client()
    client.machine = _Down()  # type: ignore[assignment]
    client.list_resources = _Down().list_resources  # type: ignore[method-assign]
    snap = asyncio.run(NodeSource(client, "10.5.0.9").poll())
    assert snap.errors == {"node": "rpc error: code = Unavailable desc = connection refused"}
    header = _render.header(snap, "10.5.0.9", datetime.now(UTC)).plain
    assert header == "10.5.0.9: rpc error: code = Unavailable desc = connection refused"


def test_a_spec_that_is_not_yaml_is_an_error_of_its_part() -> None:
    client = _Client()
    client.resources["HostnameStatuses.net.talos.dev"] = [_resource("HostnameStatuses", "hostname", "a: [")]
    snap = asyncio.run(NodeSource(client, "10.5.0.2").poll())
    assert snap.hostname == "" and "network" in snap.errors
    assert snap.stage == "running"


# --- screens -----------------------------------------------------------------------------------


def _text(renderable: Any) -> str:
    console = Console(width=140, record=True, file=None, force_terminal=False)
    with console.capture() as capture:
        console.print(renderable)
    return capture.get()


def test_facts_a_process_node_lacks_are_na_with_the_reason_not_numbers() -> None:
    snap = NodeSnapshot(node="10.5.0.2", hostname="cp-1", stage="running", ready=True)
    summary = _text(_render.summary(snap))
    assert "UUID        n/a (a process node has no SMBIOS)" in summary
    assert "KUBERNETES  n/a (the node runs no kubelet; process nodes run no Kubernetes)" in summary
    assert "KUBERNETES  v1.30.3" in _text(
        _render.summary(NodeSnapshot(node="10.5.0.2", kubernetes="v1.30.3"))
    )
    assert "ETCD        n/a (not a service of this node)" in summary
    assert "n/a (the node serves no SystemStat/CPUInfo)" in _text(_render.monitor_facts(snap))
    assert "n/a (a process node shares the host's links and routes)" in _text(_render.network(snap))


def test_header_and_tabs() -> None:
    snap = NodeSnapshot(node="10.5.0.2", hostname="cp-1", version="v1.7.6",
                        booted=datetime(2030, 1, 1, tzinfo=UTC))  # fmt: skip
    header = _render.header(snap, "10.5.0.2", datetime(2030, 1, 1, 1, 2, 3, tzinfo=UTC)).plain
    assert header == "cp-1 (v1.7.6): uptime 1h2m3s, PROCS 0, CPU measuring"
    assert _render.header(None, "10.5.0.2", datetime.now(UTC)).plain == "10.5.0.2: connecting..."
    tabs = _render.tabs("monitor", ["a", "b"], 1).plain
    assert "[F2: Monitor]" in tabs and " F1: Summary " in tabs and "[b]" in tabs and " a " in tabs


def test_maintenance_node_config_screen_says_how_to_give_it_a_config() -> None:
    from ichor.cli.dashboard._data import ConfigInfo

    snap = NodeSnapshot(node="10.5.0.2", config=ConfigInfo(version="", updated=None, acquired=False))
    text = _text(_render.config(snap, "10.5.0.2"))
    assert "none: the node is in maintenance mode" in text
    assert "talosctl apply-config --insecure -n 10.5.0.2 --file <controlplane.yaml>" in text


def test_graphs_have_a_fixed_scale_so_small_changes_look_small() -> None:
    assert _render.graph([0.0, 50.0, 100.0], 5, height=1).split("\n") == ["   ▄█"]
    tall = _render.graph([5.0, 6.0], 4, height=3).split("\n")
    assert tall == ["    ", "    ", "  ▂▂"]  # 5% and 6% are both low bars, not empty and full
    assert _render.graph([200.0, 100.0], 2, height=1) == "█▄"  # above 100% the scale grows
    assert _render.graph([1.0] * 10, 3, height=1) == "▁▁▁"  # only the newest that fit
