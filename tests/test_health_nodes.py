"""The node stages of ``talosctl health`` (apid, memory sizes, disk sizes) against an in-memory cluster:
what passes, what each failure says, and that nodes sharing the host's kernel are not measured."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from test_health_wait import _wait as wait_on_fake_clock

from ichor.api.gen.machine import machine_pb2
from ichor.api.gen.storage import storage_pb2
from ichor.client import RPCError
from ichor.client.health import CHECK_NAMES, NODE_CHECKS, ClusterInfo, HealthCheckError
from ichor.client.health_nodes import DISK_MINIMUM, MEMORY_MINIMUM, node_checks

CP, WORKER = "10.5.0.2", "10.5.0.3"
GIB = 1024**3


@dataclass
class Machine:
    mode: str = "metal"
    memory_kib: int = 8 * 1024 * 1024
    disks: list[tuple[str, int, bool]] = field(default_factory=lambda: [("/dev/sda", 20 * GIB, True)])
    answering: bool = True


@dataclass
class FakeCluster:
    machines: dict[str, Machine] = field(default_factory=lambda: {CP: Machine(), WORKER: Machine()})
    calls: list[tuple[str, str]] = field(default_factory=list)

    def with_node(self, node: str) -> Any:
        return _View(self, [node], one_to_many=False)

    def with_nodes(self, *nodes: str) -> Any:
        return _View(self, list(nodes), one_to_many=True)


class _View:
    def __init__(self, cluster: FakeCluster, nodes: list[str], *, one_to_many: bool) -> None:
        self.cluster, self.nodes, self.one_to_many = cluster, nodes, one_to_many
        self.machine = self.storage = self

    def _one(self, method: str) -> Machine:
        (node,) = self.nodes
        self.cluster.calls.append((method, node))
        machine = self.cluster.machines[node]
        if not machine.answering:
            raise RPCError(14, 'connection error: desc = "connection refused"')
        return machine

    async def Version(self, request: Any) -> Any:
        reply = machine_pb2.VersionResponse()
        if not self.one_to_many:
            reply.messages.add().platform.mode = self._one("Version").mode
            return reply
        self.cluster.calls.append(("Version", ",".join(self.nodes)))
        for node in self.nodes:
            element = reply.messages.add()
            element.metadata.hostname = node
            if self.cluster.machines[node].answering:
                element.platform.mode = self.cluster.machines[node].mode
            else:
                element.metadata.error = "rpc error: code = Unavailable desc = connection refused"
        return reply

    async def Memory(self, request: Any) -> Any:
        reply = machine_pb2.MemoryResponse()
        reply.messages.add().meminfo.memtotal = self._one("Memory").memory_kib
        return reply

    async def Disks(self, request: Any) -> Any:
        reply = storage_pb2.DisksResponse()
        element = reply.messages.add()
        for device, size, system in self._one("Disks").disks:
            element.disks.add(device_name=device, size=size, system_disk=system)
        return reply


def _wait(cluster: FakeCluster, *, timeout: float = 3.0) -> list[str]:
    lines: list[str] = wait_on_fake_clock(node_checks(cluster, ClusterInfo([CP], [WORKER])), timeout=timeout)
    return lines


def test_stages_sit_between_etcd_and_kubernetes_in_talos_1_7_order() -> None:
    assert (
        CHECK_NAMES[4:7]
        == NODE_CHECKS
        == (
            "apid to be ready",
            "all nodes memory sizes",
            "all nodes disk sizes",
        )
    )
    assert "no diagnostics" not in CHECK_NAMES  # Talos 1.8's stage, not 1.7's


def test_machines_with_enough_memory_and_disk_pass_every_stage() -> None:
    cluster = FakeCluster()
    assert _wait(cluster) == [f"waiting for {name}: OK" for name in NODE_CHECKS]
    assert ("Version", f"{CP},{WORKER}") in cluster.calls  # one call through the endpoint, to every node
    assert {c for c in cluster.calls if c[0] in ("Memory", "Disks")} == {
        ("Memory", CP), ("Memory", WORKER), ("Disks", CP), ("Disks", WORKER),
    }  # fmt: skip


def test_minimums_are_talos_per_machine_type() -> None:
    assert MEMORY_MINIMUM == {"controlplane": (2048 - 150) * 1024**2, "worker": (1024 - 150) * 1024**2}
    assert DISK_MINIMUM == 6 * GIB


def test_a_control_plane_with_a_workers_memory_is_too_small() -> None:
    cluster = FakeCluster()
    cluster.machines[CP].memory_kib = cluster.machines[WORKER].memory_kib = 1536 * 1024  # 1.5 GiB
    with pytest.raises(HealthCheckError) as err:
        _wait(cluster)
    assert str(err.value) == (
        f"timed out waiting for all nodes memory sizes: {CP}: does not meet memory requirements: "
        "expected at least 1898 MiB, actual 1536 MiB"
    )
    assert "talosctl memory" in (err.value.hint or "")


def test_a_small_system_disk_fails_and_other_disks_do_not_count() -> None:
    cluster = FakeCluster()
    cluster.machines[WORKER].disks = [("/dev/vda", 4 * GIB, True), ("/dev/vdb", 100 * GIB, False)]
    with pytest.raises(HealthCheckError, match=rf"{WORKER}: system disk /dev/vda is too small: "
                       r"expected at least 6\.0 GiB, actual 4\.0 GiB"):  # fmt: skip
        _wait(cluster)


def test_a_machine_without_a_system_disk_says_so() -> None:
    cluster = FakeCluster()
    cluster.machines[CP].disks = [("/dev/vdb", 100 * GIB, False)]
    with pytest.raises(HealthCheckError, match=rf"all nodes disk sizes: {CP}: no system disk found"):
        _wait(cluster)


def test_nodes_sharing_the_hosts_kernel_are_not_measured() -> None:
    # A container-mode node reports the host's memory and the host filesystem under its root: too
    # small or not, nothing is asked of it, as Talos skips its docker nodes.
    cluster = FakeCluster({CP: Machine("container", 1024, []), WORKER: Machine("container", 1024, [])})
    assert _wait(cluster) == [f"waiting for {name}: OK" for name in NODE_CHECKS]
    assert not [c for c in cluster.calls if c[0] in ("Memory", "Disks")]


def test_a_node_apid_cannot_reach_through_the_endpoint_keeps_apid_waiting() -> None:
    cluster = FakeCluster()
    cluster.machines[WORKER].answering = False
    with pytest.raises(HealthCheckError) as err:
        _wait(cluster)
    assert str(err.value).startswith(
        f"timed out waiting for apid to be ready: {WORKER}: not answering through the endpoint's apid"
    )
    assert "connection refused" in str(err.value)  # the node's own error, kept as the detail
    assert "talosctl service apid" in (err.value.hint or "")
