"""``talosctl support``'s files that Talos 1.7.6's bundle has (go-talos-support v0.1.0): ``io``,
``devices``, ``kubernetes-logs/kube-system/...`` and the cluster's ``kubernetesResources/*.yaml``."""

from __future__ import annotations

import asyncio
import zipfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.cli import _support
from ichor.cli._support import (
    collect_bundle,
    io_table,
    kubernetes_client,
    kubernetes_collectors,
    kubernetes_list_yaml,
    node_collectors,
)
from ichor.client import RPCError
from ichor.kubeapi import KubeConnectionError

NODE = "10.5.0.2"


class _Stream:
    """A server stream: records the request, yields ``reply(request)`` or raises it."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.requests: list[Any] = []

    @asynccontextmanager
    async def open(self) -> Any:
        outer = self

        class Call:
            async def send_message(self, request: Any, end: bool = False) -> None:
                outer.requests.append(request)

            def __aiter__(self) -> Any:
                async def messages() -> Any:
                    answer = outer.reply(outer.requests[-1])
                    if isinstance(answer, Exception):
                        raise answer
                    for message in answer:
                        yield message

                return messages()

        yield Call()


def _disk_stats() -> machine_pb2.DiskStatsResponse:
    reply = machine_pb2.DiskStatsResponse()
    stats = reply.messages.add()
    stats.devices.add(
        name="nvme0n1", io_time_ms=123456, io_time_weighted_ms=234567, write_sectors=99, read_sectors=7
    )
    stats.devices.add(name="sda", io_time_ms=5, io_time_weighted_ms=6, write_sectors=7, read_sectors=8)
    return reply


class FakeMachine:
    def __init__(self, pci: bytes | None) -> None:
        def read(request: Any) -> Any:
            if pci is None:
                return RPCError(2, f"stat {request.path}: no such file or directory")
            return [common_pb2.Data(bytes=pci)]

        self.Read = _Stream(read)
        self.Dmesg = _Stream(lambda _r: [common_pb2.Data(bytes=b"booted\n")])
        self.Logs = _Stream(lambda r: [common_pb2.Data(bytes=f"log of {r.id}\n".encode())])

    async def DiskStats(self, _request: Any) -> Any:
        return _disk_stats()

    async def ServiceList(self, _request: Any) -> Any:
        reply = machine_pb2.ServiceListResponse()
        reply.messages.add().services.add(id="apid", state="Running")
        return reply

    async def Containers(self, _request: Any) -> Any:
        raise RPCError(9, "this node runs no containerd")

    async def Mounts(self, _request: Any) -> Any:
        return machine_pb2.MountsResponse()

    async def Processes(self, _request: Any) -> Any:
        return machine_pb2.ProcessesResponse()

    async def Version(self, _request: Any) -> Any:
        return machine_pb2.VersionResponse()


class FakeInspect:
    async def ControllerRuntimeDependencies(self, _request: Any) -> Any:
        from ichor.api.gen.inspectapi import inspect_pb2

        return inspect_pb2.ControllerRuntimeDependenciesResponse()


class FakeClient:
    """What the bundle asks of a talosctl client: per-node views and the endpoint itself."""

    def __init__(self, pci: bytes | None, kubeconfig_error: RPCError) -> None:
        self.machine = FakeMachine(pci)
        self.machine.Kubeconfig = _Stream(lambda _r: kubeconfig_error)  # type: ignore[attr-defined]
        self.peer_host = "127.0.0.1"
        self.inspect = FakeInspect()

    def with_node(self, node: str) -> FakeClient:
        return self

    def without_nodes(self) -> FakeClient:
        return self

    async def list_resources(self, namespace: str, resource_type: str) -> list[Any]:
        return []


def test_io_is_talos_disk_stats_table() -> None:
    assert io_table(_disk_stats()).decode() == (
        "NAME      IO_TIME   IO_TIME_WEIGHTED   DISK_WRITE_SECTORS   DISK_READ_SECTORS\n"
        "nvme0n1   123456    234567             99                   7\n"
        "sda       5         6                  7                    8\n"
    )


def test_io_refuses_a_node_error_in_the_reply() -> None:
    reply = machine_pb2.DiskStatsResponse()
    reply.messages.add().metadata.error = "disk stats unavailable"
    with pytest.raises(Exception, match="disk stats unavailable"):
        io_table(reply)


def test_node_files_include_devices_and_io_and_devices_is_the_nodes_pci_list() -> None:
    client = FakeClient(b"0000\t8086100e\t0\n", RPCError(14, "unused"))

    async def main() -> dict[str, bytes | None]:
        collectors = await node_collectors(client, NODE)
        wanted = {c.path: c for c in collectors if c.path in ("devices", "io", "dmesg.log")}
        return {path: await c.collect() for path, c in wanted.items()}

    files = asyncio.run(main())
    assert files["devices"] == b"0000\t8086100e\t0\n"
    assert files["io"] is not None and files["io"].startswith(b"NAME      IO_TIME")
    (read,) = client.machine.Read.requests
    assert read.path == "/proc/bus/pci/devices"


def test_a_node_without_proc_bus_pci_has_no_devices_file() -> None:
    client = FakeClient(None, RPCError(14, "unused"))

    async def main() -> bytes | None:
        (devices,) = [c for c in await node_collectors(client, NODE) if c.path == "devices"]
        return await devices.collect()

    assert asyncio.run(main()) is None


def test_kube_system_logs_are_under_kubernetes_logs() -> None:
    machine = FakeMachine(None)

    async def containers(_request: Any) -> Any:
        reply = machine_pb2.ContainersResponse()
        reply.messages.add().containers.add(namespace="k8s.io", id="kube-system/coredns-1:coredns:abc",
                                            name="coredns", pod_id="kube-system/coredns-1", pid=7)  # fmt: skip
        return reply

    machine.Containers = containers  # type: ignore[method-assign]
    (collector,) = asyncio.run(_support.kube_system_collectors(machine, NODE))
    assert collector.archive_path == f"{NODE}/kubernetes-logs/kube-system/coredns.log"


def test_kubernetes_lists_print_as_client_go_prints_a_typed_list() -> None:
    listed = {
        "kind": "NodeList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "1234"},
        "items": [{"metadata": {"name": "cp-1", "labels": {"b": "2", "a": "1"}},
                   "status": {"addresses": [{"type": "InternalIP", "address": "10.5.0.2"}]}}],
    }  # fmt: skip
    assert kubernetes_list_yaml(listed).decode() == (
        "items:\n"
        "- metadata:\n"
        "    labels:\n"
        "      a: '1'\n"
        "      b: '2'\n"
        "    name: cp-1\n"
        "  status:\n"
        "    addresses:\n"
        "    - address: 10.5.0.2\n"
        "      type: InternalIP\n"
        "metadata:\n"
        "  resourceVersion: '1234'\n"
    )


class FakeKube:
    def __init__(self) -> None:
        self.paths: list[str] = []

    async def get(self, path: str) -> Any:
        self.paths.append(path)
        if path.endswith("/nodes"):
            return {
                "kind": "NodeList",
                "apiVersion": "v1",
                "metadata": {},
                "items": [{"metadata": {"name": "cp-1"}}],
            }
        if path.endswith("/pods"):
            raise KubeConnectionError("connection refused")
        return {}


def test_cluster_files_are_at_the_top_level_and_a_failure_is_reported() -> None:
    kube = FakeKube()
    nodes, pods = kubernetes_collectors(kube)
    assert (nodes.archive_path, pods.archive_path) == (
        "kubernetesResources/nodes.yaml",
        "kubernetesResources/systemPods.yaml",
    )
    assert asyncio.run(nodes.collect()) == b"items:\n- metadata:\n    name: cp-1\nmetadata: {}\n"
    assert kube.paths == ["/api/v1/nodes"]
    assert kubernetes_collectors(None) == []


def test_the_bundle_without_an_api_server_says_so_and_writes_the_node_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = FakeClient(None, RPCError(9, "kubeconfig is served by control plane nodes only"))

    async def main() -> _support.Outcome:
        with zipfile.ZipFile(tmp_path / "b.zip", "w") as archive:
            return await collect_bundle(client, [NODE], archive, 2, verbose=True)

    outcome = asyncio.run(main())
    err = capsys.readouterr().err
    assert "Failed to create kubernetes client " in err and "control plane nodes only" in err
    names = zipfile.ZipFile(tmp_path / "b.zip").namelist()
    assert f"{NODE}/io" in names and f"{NODE}/dmesg.log" in names
    assert f"{NODE}/devices" not in names
    assert not any(n.startswith("kubernetesResources/") for n in names)
    assert all(n.startswith(f"{NODE}/") for n in names)
    assert outcome.errors == []


def test_the_bundle_with_an_api_server_writes_the_cluster_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = FakeClient(b"pci\n", RPCError(14, "unused"))
    kube = FakeKube()

    async def fake_client(_client: Any) -> Any:
        return kube

    monkeypatch.setattr(_support, "kubernetes_client", fake_client)

    async def main() -> _support.Outcome:
        with zipfile.ZipFile(tmp_path / "b.zip", "w") as archive:
            return await collect_bundle(client, [NODE], archive, 1, verbose=True)

    outcome = asyncio.run(main())
    names = zipfile.ZipFile(tmp_path / "b.zip").namelist()
    assert "kubernetesResources/nodes.yaml" in names and f"{NODE}/devices" in names
    assert ("cluster", "kubernetesResources/systemPods.yaml: connection refused") in outcome.errors


def test_an_unusable_kubeconfig_gives_no_client_and_talos_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kubeconfig the endpoint serves that cannot be used: no client, Talos's line on stderr."""
    from ichor.client import health_k8s

    kubeconfig = (
        "apiVersion: v1\nkind: Config\ncurrent-context: admin@c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', certificate-authority-data: ''}}]\n"
        "contexts: [{name: admin@c, context: {cluster: c, user: admin@c}}]\n"
        "users: [{name: admin@c, user: {}}]\n"
    )

    async def fetch(_client: Any) -> bytes:
        return kubeconfig.encode()

    monkeypatch.setattr(health_k8s, "fetch_kubeconfig", fetch)
    assert asyncio.run(kubernetes_client(FakeClient(None, RPCError(14, "unused")))) is None
    assert capsys.readouterr().err.startswith(
        "Failed to create kubernetes client kubeconfig from the endpoint"
    )
