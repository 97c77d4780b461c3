"""End to end on the session's booted node process, through apid as talosctl reaches it: ``time --check``,
``usage``, the monitoring RPCs, GenerateConfiguration, the container-mode refusals of ``upgrade``,
``rollback`` and ``meta``, ``logs`` of an unknown id and ``ls -r``, with Talos's tables and texts."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from booted_node import Node
from cluster_helpers import cli_env
from ntp_helpers import ntp_server

from ichor.api.gen.machine import machine_pb2
from ichor.machinery import proc
from ichor.machinery.clientconfig import GlobalOptions
from ichor.machinery.yamlio import load_documents

pytestmark = pytest.mark.e2e

REFUSED = "rpc error: code = FailedPrecondition desc = method is not supported in container mode"


@pytest.fixture
def node(booted_node: Node) -> Node:
    """The session's booted node (conftest.py)."""
    return booted_node


def test_time_check_asks_the_named_server(node: Node) -> None:
    address = node.process.address
    with ntp_server("127.0.0.1", ahead=3600.0) as server:
        r = node.talosctl("time", "--check", server)
    assert r.exit_code == 0, r.stderr
    header, row = r.stdout.splitlines()
    assert header.split() == ["NODE", "NTP-SERVER", "NODE-TIME", "NTP-SERVER-TIME"]
    cells = row.split()
    assert cells[0] == address and cells[1] == server and cells[4:6] == cells[8:10] == ["+0000", "UTC"]
    local, remote = (datetime.fromisoformat(f"{day}T{clock}") for day, clock in (cells[2:4], cells[6:8]))
    assert (remote - local).total_seconds() == pytest.approx(3600, abs=5)  # the server is an hour ahead


def test_usage_and_ls_recurse(node: Node) -> None:
    r = node.talosctl("usage", "/system/state")
    assert r.exit_code == 0, r.stderr
    header, row = r.stdout.splitlines()
    assert header.split() == ["NODE", "SIZE", "NAME"] and row.split()[0] == node.process.address
    assert int(row.split()[1]) > 1000 and row.split()[2] == "."  # config.yaml is in there
    r = node.talosctl("usage", "-a", "-d", "1", "/system/state")
    assert "config.yaml" in r.stdout, r.stdout
    listed = node.talosctl("ls", "-r", "/system")
    assert listed.exit_code == 0, listed.stderr
    names = [line.split()[-1] for line in listed.stdout.splitlines()[1:]]
    assert "state/config.yaml" in names and len(names) > 3


@pytest.mark.parametrize(
    ("args", "prefix"),
    [(["rollback"], "error executing rollback: "), (["upgrade", "--wait=false"], "error performing upgrade: "),
     (["meta", "write", "0x0a", "v"], ""), (["meta", "delete", "10"], "")],
)  # fmt: skip
def test_container_mode_refusals_through_apid(node: Node, args: list[str], prefix: str) -> None:
    r = node.talosctl(*args)
    assert r.exit_code == 1
    assert f"error: {prefix}1 error occurred:\n\t* {node.process.address}: {REFUSED}" in r.stderr


def test_logs_of_an_unknown_id_as_talos(node: Node) -> None:
    r = node.talosctl("logs", "servicenotfound")
    assert r.exit_code == 1
    assert 'rpc error: code = Unknown desc = log "servicenotfound" was not registered' in r.stderr


def test_monitoring_and_generate_configuration_over_the_api(node: Node) -> None:
    from google.protobuf import empty_pb2

    from ichor.client import Client

    async def go() -> dict[str, Any]:
        opts = GlobalOptions(talosconfig=str(node.home / "talosconfig"), endpoints=[node.process.address],
                             nodes=[node.process.address])  # fmt: skip
        async with Client.from_options(opts) as client:
            empty = empty_pb2.Empty()
            out: dict[str, Any] = {
                "stat": (await client.machine.SystemStat(empty)).messages[0],
                "cpus": (await client.machine.CPUInfo(empty)).messages[0],
                "load": (await client.machine.LoadAvg(empty)).messages[0],
                "net": (await client.machine.NetworkDeviceStats(empty)).messages[0],
                "disk": (await client.machine.DiskStats(empty)).messages[0],
                "logs": (await client.machine.LogsContainers(empty)).messages[0],
            }
            request = machine_pb2.GenerateConfigurationRequest(
                config_version="v1alpha1",
                cluster_config=machine_pb2.ClusterConfig(
                    name="inspect",
                    control_plane=machine_pb2.ControlPlaneConfig(endpoint="https://10.5.0.2:6443"),
                ),
                machine_config=machine_pb2.MachineConfig(type=machine_pb2.MachineConfig.TYPE_WORKER),
            )
            out["generated"] = (await client.machine.GenerateConfiguration(request)).messages[0]
            return out

    got = asyncio.run(go())
    address = node.process.address
    for name in ("stat", "cpus", "load", "net", "disk", "logs", "generated"):
        assert got[name].metadata.hostname == address and not got[name].metadata.error, name
    assert got["stat"].boot_time > 0 and len(got["cpus"].cpu_info) == len(got["stat"].cpu)
    assert "lo" in [d.name for d in got["net"].devices]
    assert {"apid", "machined", "controller-runtime"} <= set(
        got["logs"].ids
    )  # etcd waits for bootstrap: no log yet
    (worker,) = load_documents(got["generated"].data[0])
    controlplane = (node.home / "controlplane.yaml").read_text()
    assert worker["machine"]["type"] == "worker" and worker["cluster"]["token"] in controlplane


OFFICIAL = Path.home() / ".cache" / "ichor" / "talosctl-official" / "talosctl"
"""Talos's own talosctl v1.7.6 (``scripts/build_official_talosctl.py``); the test below skips without it."""


@pytest.mark.official  # opt-in, as tests/test_e2e_official_talosctl.py: `pytest -m official` once built
def test_the_official_talosctl_gets_talos_answers(node: Node) -> None:
    if not OFFICIAL.exists():
        pytest.skip(f"needs the official talosctl at {OFFICIAL} (scripts/build_official_talosctl.py)")

    def official(*args: str) -> proc.Completed:
        return proc.run([str(OFFICIAL), *node.base, *args], env=cli_env(node.home), cwd=node.home,
                        check=False, timeout=60)  # fmt: skip

    address = node.process.address
    with ntp_server("127.0.0.1") as server:
        r = official("time", "--check", server)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[0].split() == ["NODE", "NTP-SERVER", "NODE-TIME", "NTP-SERVER-TIME"]
    assert r.stdout.splitlines()[1].split()[:2] == [address, server]
    r = official("usage", "/system/state")
    assert r.exit_code == 0, r.stderr
    assert (
        r.stdout.splitlines()[0].split() == ["NODE", "SIZE", "NAME"]
        and r.stdout.splitlines()[1].split()[2] == "."
    )
    for args in (["rollback"], ["meta", "write", "10", "v"], ["meta", "delete", "10"]):
        r = official(*args)
        assert r.exit_code == 1 and f"{address}: {REFUSED}" in r.stderr, (args, r.stderr)
    r = official("upgrade", "--wait=false")
    assert f"{address}: {REFUSED}" in r.stderr, r.stderr
    r = official("logs", "servicenotfound")
    assert r.exit_code == 1 and 'log "servicenotfound" was not registered' in r.stderr
    r = official("ls", "-r", "/system")
    assert r.exit_code == 0 and "state/config.yaml" in r.stdout, r.stderr
    r = official("list", "--recurse=false", "/system")
    assert r.exit_code == 0 and "state/config.yaml" not in r.stdout, r.stderr
