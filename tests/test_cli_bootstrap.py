"""``talosctl bootstrap`` and ``talosctl kubeconfig`` against a test double of the node API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode, targets

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.machinery.kubeconfig import kubeconfig_archive

pytestmark = pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    fake = FakeNode(tmp_path, "127.77.4.4")
    with fake.serving():
        yield fake


def _bootstrap(node: FakeNode, seen: list[Any], *, error: GRPCError | None = None) -> None:
    async def handle(stream: Stream[Any, Any]) -> None:
        seen.append(await stream.recv_message())
        if error is not None:
            raise error
        reply = machine_pb2.BootstrapResponse()
        for n in targets(stream):
            reply.messages.add().metadata.hostname = n
        await stream.send_message(reply)

    node.handlers["Bootstrap"] = handle


def test_bootstrap_calls_the_node(node: FakeNode, talosctl: Any) -> None:
    seen: list[Any] = []
    _bootstrap(node, seen)
    r = talosctl(*node.args("10.5.0.2"), "bootstrap")
    assert r.exit_code == 0, r.stderr
    assert not seen[0].recover_etcd and not seen[0].recover_skip_hash_check


def test_bootstrap_twice_explains(node: FakeNode, talosctl: Any) -> None:
    _bootstrap(node, [], error=GRPCError(Status.ALREADY_EXISTS, "etcd data directory is not empty"))
    r = talosctl(*node.args("10.5.0.2"), "bootstrap")
    assert r.exit_code == 1
    assert (
        "error: error executing bootstrap: rpc error: code = AlreadyExists desc = etcd data directory is not empty"
        in r.stderr
    )
    assert "hint: etcd on this node already has data" in r.stderr


def test_bootstrap_refuses_bad_input_before_calling(node: FakeNode, talosctl: Any, tmp_path: Path) -> None:
    r = talosctl(*node.args("10.5.0.2", "10.5.0.3"), "bootstrap")
    assert r.exit_code == 1 and "'bootstrap' is not supported with multiple nodes" in r.stderr
    r = talosctl(*node.args("10.5.0.2"), "bootstrap", "--recover-from", str(tmp_path / "nope.db"))
    assert r.exit_code == 1 and "error opening snapshot file" in r.stderr and "hint:" in r.stderr
    (tmp_path / "junk.db").write_bytes(b"not bbolt")
    r = talosctl(*node.args("10.5.0.2"), "bootstrap", "--recover-from", str(tmp_path / "junk.db"))
    assert r.exit_code == 1 and "error reading snapshot" in r.stderr
    r = talosctl(*node.args("10.5.0.2"), "bootstrap", "--recover-skip-hash-check")
    assert r.exit_code == 2 and "only applies with --recover-from" in r.stderr
    assert node.calls == []


# --------------------------------------------------------------------------- kubeconfig

KC = (
    "apiVersion: v1\nkind: Config\nclusters:\n- name: demo\n  cluster:\n    server: https://10.5.0.2:6443\n"
    "    certificate-authority-data: Q0E=\nusers:\n- name: admin@demo\n  user:\n    client-certificate-data: Q1JU\n"
    "    client-key-data: S0VZ\ncontexts:\n- context:\n    cluster: demo\n    namespace: default\n"
    "    user: admin@demo\n  name: admin@demo\ncurrent-context: admin@demo\n"
)


def _serve_kubeconfig(node: FakeNode, text: str = KC) -> None:
    async def handle(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        archive = kubeconfig_archive(text)
        data = common_pb2.Data(bytes=archive)
        for n in targets(stream)[:1]:
            data.metadata.hostname = n
        await stream.send_message(data)

    node.handlers["Kubeconfig"] = handle


def test_kubeconfig_into_a_directory_and_stdout(node: FakeNode, talosctl: Any, tmp_path: Path) -> None:
    _serve_kubeconfig(node)
    out = tmp_path / "out"
    out.mkdir()
    r = talosctl(*node.args("10.5.0.2"), "kubeconfig", str(out))
    assert r.exit_code == 0, r.stderr
    assert (out / "kubeconfig").read_text() == KC
    assert ((out / "kubeconfig").stat().st_mode & 0o777) == 0o600
    r = talosctl(*node.args("10.5.0.2"), "kubeconfig", "-")
    assert r.exit_code == 0 and r.stdout == KC


def test_kubeconfig_merges_into_home_kube_config(node: FakeNode, talosctl: Any, tmp_path: Path) -> None:
    _serve_kubeconfig(node)
    r = talosctl(*node.args("10.5.0.2"), "kubeconfig")
    assert r.exit_code == 0, r.stderr
    default = Path.home() / ".kube" / "config"
    assert default.read_text() == KC
    _serve_kubeconfig(node, KC.replace("Q1JU", "TkVX").replace("10.5.0.2", "10.5.0.9"))
    r = talosctl(*node.args("10.5.0.2"), "kubeconfig")
    assert r.exit_code == 0, r.stderr
    assert 'renamed cluster "demo" -> "demo-1"' in r.stdout
    assert "current-context: admin@demo-1" in default.read_text()


def test_kubeconfig_existing_file_without_merge_needs_force(
    node: FakeNode, talosctl: Any, tmp_path: Path
) -> None:
    _serve_kubeconfig(node)
    target = tmp_path / "kc"
    target.write_text("old")
    r = talosctl(*node.args("10.5.0.2"), "kubeconfig", "--merge=false", str(target))
    assert r.exit_code == 1 and "kubeconfig file already exists, use --force to overwrite" in r.stderr
    assert target.read_text() == "old" and node.calls == []
    r = talosctl(*node.args("10.5.0.2"), "kubeconfig", "--merge=false", "--force", str(target))
    assert r.exit_code == 0 and target.read_text() == KC


def test_kubeconfig_damaged_existing_file_is_not_touched(
    node: FakeNode, talosctl: Any, tmp_path: Path
) -> None:
    _serve_kubeconfig(node)
    target = tmp_path / "kc"
    target.write_text("clusters: [\n")
    r = talosctl(*node.args("10.5.0.2"), "kubeconfig", str(target))
    assert r.exit_code == 1 and "error loading kubeconfig" in r.stderr and "hint:" in r.stderr
    assert target.read_text() == "clusters: [\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake-node", "kc"]


def test_kubeconfig_refuses_several_nodes_and_worker_errors(
    node: FakeNode, talosctl: Any, tmp_path: Path
) -> None:
    r = talosctl(*node.args("10.5.0.2", "10.5.0.3"), "kubeconfig", str(tmp_path / "kc"))
    assert r.exit_code == 1 and "'kubeconfig' is not supported with multiple nodes" in r.stderr

    async def worker(stream: Stream[Any, Any]) -> None:
        raise GRPCError(Status.FAILED_PRECONDITION, "kubeconfig is only available on control plane nodes")

    node.handlers["Kubeconfig"] = worker
    r = talosctl(*node.args("10.5.0.5"), "kubeconfig", str(tmp_path / "kc"))
    assert r.exit_code == 1 and "only available on control plane nodes" in r.stderr
    assert not (tmp_path / "kc").exists()


def _serve_services(node: FakeNode, *running: str) -> None:
    async def services(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        reply = machine_pb2.ServiceListResponse()
        element = reply.messages.add()
        for n in targets(stream):
            element.metadata.hostname = n
        for name in ("apid", "etcd", "trustd", *running):
            element.services.add(id=name, state="Running")
        await stream.send_message(reply)

    node.handlers["ServiceList"] = services


def test_kubeconfig_says_nothing_serves_the_api_while_kubernetes_is_not_running(
    node: FakeNode, talosctl: Any, tmp_path: Path
) -> None:
    _serve_kubeconfig(node)
    _serve_services(node)
    r = talosctl(*node.args("10.5.0.2"), "kubeconfig", str(tmp_path / "kc"))
    assert r.exit_code == 0, r.stderr
    assert "note: Kubernetes is not running on 10.5.0.2 (no kubelet service)" in r.stderr
    assert "https://10.5.0.2:6443" in r.stderr and (tmp_path / "kc").read_text() == KC
    # Once the node runs a kubelet, no note.
    _serve_services(node, "kubelet")
    r = talosctl(*node.args("10.5.0.2"), "kubeconfig", str(tmp_path / "kc2"))
    assert r.exit_code == 0 and "note:" not in r.stderr
    # A node that cannot say (no ServiceList): no guess either.
    del node.handlers["ServiceList"]
    r = talosctl(*node.args("10.5.0.2"), "kubeconfig", "-")
    assert r.exit_code == 0 and r.stdout == KC and "note:" not in r.stderr
