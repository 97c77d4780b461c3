"""``talosctl support``'s kube-system logs: which containers, under which names, and nodes without any."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any

import pytest

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.cli._support import kube_system_collectors
from ichor.client import RPCError
from ichor.machinery.errors import MachineryError

NODE = "10.5.0.2"


class _Logs:
    def __init__(self, requests: list[Any]) -> None:
        self.requests = requests

    @asynccontextmanager
    async def open(self) -> Any:
        requests = self.requests

        class Call:
            async def send_message(self, request: Any, end: bool = False) -> None:
                requests.append(request)

            def __aiter__(self) -> Any:
                async def chunks() -> Any:
                    yield common_pb2.Data(bytes=f"log of {requests[-1].id}\n".encode())

                return chunks()

        yield Call()


class FakeMachine:
    def __init__(self, containers: list[machine_pb2.ContainerInfo], error: RPCError | None = None) -> None:
        self.containers, self.error = containers, error
        self.asked: list[Any] = []
        self.log_requests: list[Any] = []
        self.Logs = _Logs(self.log_requests)

    async def Containers(self, request: Any) -> Any:
        self.asked.append(request)
        if self.error is not None:
            raise self.error
        reply = machine_pb2.ContainersResponse()
        reply.messages.add().containers.extend(self.containers)
        return reply


def _container(pod: str, name: str, pid: int, status: str = "CONTAINER_RUNNING", cid: str = "") -> Any:
    return machine_pb2.ContainerInfo(namespace="k8s.io", id=cid or f"{pod}:{name}:{pid:012x}", name=name,
                                     pod_id=pod, pid=pid, status=status)  # fmt: skip


def test_each_kube_system_container_is_a_log_named_as_talos_names_it() -> None:
    apiserver = "kube-system/kube-apiserver-cp-1"
    machine = FakeMachine([
        _container(apiserver, apiserver, 0, "SANDBOX_READY"),
        _container(apiserver, "kube-apiserver", 4242),
        _container(apiserver, "kube-apiserver", 0, "CONTAINER_EXITED", cid=f"{apiserver}:kube-apiserver:aaaa"),
        _container(apiserver, "kube-apiserver", 0, "CONTAINER_EXITED", cid=f"{apiserver}:kube-apiserver:bbbb"),
        _container("kube-system/coredns-abc", "coredns", 77),
        _container("default/web-1", "web", 99),
    ])  # fmt: skip

    async def main() -> dict[str, bytes | None]:
        collectors = await kube_system_collectors(machine, NODE)
        assert {c.node for c in collectors} == {NODE}
        return {c.path: await c.collect() for c in collectors}

    files = asyncio.run(main())
    assert list(files) == [
        "kubernetes-logs/kube-system/kube-apiserver.log",
        "kubernetes-logs/kube-system/kube-apiserver-exited.log",
        "kubernetes-logs/kube-system/kube-apiserver-exited-bbbb.log",
        "kubernetes-logs/kube-system/coredns.log",
    ]
    assert (
        files["kubernetes-logs/kube-system/coredns.log"]
        == b"log of kube-system/coredns-abc:coredns:00000000004d\n"
    )
    (listing,) = machine.asked
    assert (listing.namespace, listing.driver) == ("k8s.io", common_pb2.CRI)
    assert all(
        (r.namespace, r.driver, r.tail_lines) == ("k8s.io", common_pb2.CRI, -1) for r in machine.log_requests
    )


def test_a_node_without_containerd_has_no_kube_system_logs() -> None:
    machine = FakeMachine([], RPCError(9, "this node runs no containerd: process nodes share the host"))
    assert asyncio.run(kube_system_collectors(machine, NODE)) == []


def test_another_listing_failure_is_reported_by_one_collector() -> None:
    machine = FakeMachine([], RPCError(14, "connection refused"))

    async def main() -> None:
        (collector,) = await kube_system_collectors(machine, NODE)
        assert collector.path == "kubernetes-logs/kube-system/"
        with pytest.raises(MachineryError, match="connection refused"):
            await collector.collect()

    asyncio.run(main())
