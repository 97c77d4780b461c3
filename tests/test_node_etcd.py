"""The etcd RPCs' logic (``EtcdOperations``): ``leave`` (``talosctl etcd leave`` and a graceful
reset) against real etcd members, and the time-sync gate of ``bootstrap`` and the etcd service.

The node is a State seeded with the resources its controllers would publish (EtcdSpec,
EtcdRootSecrets, MachineType, TimeStatus, the machine config) and a stand-in supervisor; the etcd
members are real processes on loopback addresses (``etcd_helpers``), so what is tested is the
member removal etcd really performs.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from etcd_helpers import EtcdCluster
from grpclib import Status
from grpclib.exceptions import GRPCError

from ichor.machined.cosi import State
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ETCD_ROOT_SECRETS,
    ETCD_SPECS,
    MACHINE_CONFIGS,
    MACHINE_TYPES,
    TIME_STATUSES,
    EtcdRootSpec,
    EtcdSpecSpec,
    MachineConfigSpec,
    MachineTypeSpec,
    PEMCertificateAndKey,
    TimeStatusSpec,
)
from ichor.machined.server._etcd_ops import EtcdOperations
from ichor.machined.services.conditions import time_sync
from ichor.machined.services.etcd import EtcdService
from ichor.machinery.pki import new_ecdsa_ca


class _Supervisor:
    def __init__(self, running: bool) -> None:
        self.running = running

    def list(self) -> list[Any]:
        info = type("Info", (), {"id": "etcd", "running": self.running})()
        info.state = type("State", (), {"value": "Running" if self.running else "Finished"})()
        return [info]


class _Node:
    """A control plane's resources for the member ``name`` at ``address``."""

    def __init__(self, cluster: EtcdCluster | Path, name: str, address: str, endpoint_host: str) -> None:
        base = cluster if isinstance(cluster, Path) else cluster.base
        self.layout = Layout(base / name, address)
        self.state = State()
        self.state.create(TIME_STATUSES.new("node", TimeStatusSpec(synced=True, sync_disabled=True)))
        self.state.create(MACHINE_TYPES.new("machine-type", MachineTypeSpec.CONTROLPLANE))
        self.state.create(ETCD_SPECS.new("etcd", EtcdSpecSpec(
            name=name, advertised_addresses=(address,), listen_peer_addresses=(address,),
            listen_client_addresses=(address,),
        )))  # fmt: skip
        ca = None if isinstance(cluster, Path) else cluster.ca
        self.state.create(
            ETCD_ROOT_SECRETS.new("etcd", EtcdRootSpec(PEMCertificateAndKey(ca.crt, ca.key) if ca else None))
        )
        config = f"version: v1alpha1\nmachine: {{type: controlplane}}\ncluster:\n  controlPlane: {{endpoint: 'https://{endpoint_host}:6443'}}\n"
        self.state.create(MACHINE_CONFIGS.new("v1alpha1", MachineConfigSpec(config)))
        self.supervisor = _Supervisor(running=True)
        self.name = name
        self.said: list[str] = []

    def say(self, message: str) -> None:
        self.said.append(message)


def _etcd(node: _Node) -> EtcdOperations:
    service = EtcdService(node.layout, node.state, node.say, lambda: datetime.now(UTC))
    return EtcdOperations(service, node.supervisor)  # type: ignore[arg-type]


def _prefix() -> str:
    return f"127.{random.randint(100, 149)}.{random.randint(0, 255)}"


def _voting(cluster: EtcdCluster, members: list[Any]) -> list[str]:
    async def main() -> list[str]:
        async with cluster.client(members, timeout=5.0) as client:
            return sorted(m.name for m in await client.member_list() if not m.is_learner)

    return asyncio.run(main())


def test_etcd_not_answering_hints_the_service_and_its_logs_not_etcd_status(tmp_path: Path) -> None:
    # The service says Running, but nothing answers on the etcd client port (starting, or just died).
    address = f"{_prefix()}.1"
    node = _Node(EtcdCluster(tmp_path), "solo", address, endpoint_host=address)
    etcd = _etcd(node)
    for call in (etcd.status, lambda: etcd.members(query_local=True)):
        with pytest.raises(GRPCError) as refused:
            asyncio.run(call())
        assert refused.value.status is Status.UNAVAILABLE
        message = str(refused.value.message)
        assert "`talosctl -n <node> service etcd`" in message and "`talosctl -n <node> logs etcd`" in message
        assert "etcd status" not in message


def _set_time(node: _Node, synced: bool) -> None:
    current = node.state.get(TIME_STATUSES.default_namespace, TIME_STATUSES, "node")
    node.state.update(current.with_spec(TimeStatusSpec(synced=synced)))


def test_bootstrap_waits_for_time_sync_before_anything_else(tmp_path: Path) -> None:
    node = _Node(tmp_path, "cp-1", "127.0.0.1", endpoint_host="127.0.0.1")
    etcd = _etcd(node)
    etcd.service.data_dir.mkdir(parents=True)
    (etcd.service.data_dir / "member").mkdir()  # not empty: the next precondition, checked only once in sync
    _set_time(node, synced=False)
    with pytest.raises(GRPCError) as refused:
        asyncio.run(etcd.bootstrap(recover=False, skip_hash_check=False))
    assert refused.value.status is Status.FAILED_PRECONDITION
    assert str(refused.value.message).startswith("time is not in sync yet")
    assert "talosctl get timestatus" in str(refused.value.message)
    assert not etcd.service.bootstrap_requested
    _set_time(node, synced=True)
    with pytest.raises(GRPCError) as exists:
        asyncio.run(etcd.bootstrap(recover=False, skip_hash_check=False))
    assert exists.value.status is Status.ALREADY_EXISTS


def test_time_sync_condition_is_met_when_the_clock_is_in_sync(tmp_path: Path) -> None:
    node = _Node(tmp_path, "cp-1", "127.0.0.1", endpoint_host="127.0.0.1")
    _set_time(node, synced=False)
    condition = time_sync(node.state)
    assert str(condition) == "time sync"

    async def main() -> None:
        waiting = asyncio.create_task(condition.wait())
        await asyncio.sleep(0.05)
        assert not waiting.done(), "met while the clock is not in sync"
        _set_time(node, synced=True)
        await asyncio.wait_for(waiting, 2)

    asyncio.run(main())
    # Already in sync: met at once; the etcd service carries the condition.
    asyncio.run(asyncio.wait_for(condition.wait(), 2))
    service = _etcd(node).service.service()
    assert [str(c) for c in service.conditions] == ["time sync", "etcd spec"]


class _RestartingSupervisor:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def is_running(self, service_id: str) -> bool:
        return True

    async def stop(self, service_id: str) -> None:
        self.calls.append(f"stop {service_id}")

    def start(self, service_id: str) -> None:
        self.calls.append(f"start {service_id}")


def test_etcd_restarts_when_its_spec_changes_and_not_otherwise(tmp_path: Path) -> None:
    node = _Node(tmp_path, "cp-1", "127.0.0.1", endpoint_host="127.0.0.1")
    service = _etcd(node).service
    current = node.state.get(ETCD_SPECS.default_namespace, ETCD_SPECS, "etcd")
    service.running_spec = current.spec  # as after the pre stage
    supervisor = _RestartingSupervisor()

    async def main() -> None:
        follower = asyncio.create_task(service.follow_spec(supervisor))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert supervisor.calls == [], "restarted although the spec is the one etcd runs with"
        changed = EtcdSpecSpec(**{**current.spec.__dict__, "extra_args": {"election-timeout": "5000"}})
        node.state.update(current.with_spec(changed))
        for _ in range(100):
            if supervisor.calls:
                break
            await asyncio.sleep(0.01)
        follower.cancel()

    asyncio.run(main())
    assert supervisor.calls == ["stop etcd", "start etcd"]
    assert "etcd spec changed: restarting etcd" in node.said


def test_certificates_name_every_address_etcd_serves_on(tmp_path: Path) -> None:
    """A member advertised on a second network (cluster.etcd.advertisedSubnets) is checked against
    its certificate by the peer that joins it there: the certificate must name that address too."""
    node = _Node(tmp_path, "cp-1", "10.5.0.2", endpoint_host="10.5.0.2")
    ca = new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))
    node.state.update(node.state.get(ETCD_ROOT_SECRETS.default_namespace, ETCD_ROOT_SECRETS, "etcd").with_spec(
        EtcdRootSpec(PEMCertificateAndKey(ca.crt, ca.key))))  # fmt: skip
    node.state.update(node.state.get(ETCD_SPECS.default_namespace, ETCD_SPECS, "etcd").with_spec(EtcdSpecSpec(
        name="cp-1", advertised_addresses=("10.6.0.2",), listen_peer_addresses=("10.5.0.2", "10.6.0.2"),
        listen_client_addresses=("0.0.0.0",),
    )))  # fmt: skip
    certs = EtcdService(node.layout, node.state, node.say, lambda: datetime.now(UTC))._ensure_certs()
    for pair in (certs.peer, certs.server):
        sans = x509.load_pem_x509_certificate(pair.crt).extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        )
        addresses = {str(ip) for ip in sans.value.get_values_for_type(x509.IPAddress)}
        assert {"10.5.0.2", "10.6.0.2"} <= addresses and "0.0.0.0" not in addresses, addresses


def test_a_join_refused_only_for_now_is_retried_sooner_than_one_with_no_members() -> None:
    from ichor import etcd as etcdlib
    from ichor.etcd._connection import translate_grpc_error
    from ichor.machined.services import etcd as service

    def refused(text: str, status: Status = Status.FAILED_PRECONDITION) -> etcdlib.EtcdError:
        return translate_grpc_error(
            GRPCError(status, text), what="member add", endpoint="https://10.5.0.2:2379"
        )

    assert service.busy(refused("etcdserver: too many learner members in cluster"))
    assert service.busy(refused("etcdserver: unhealthy cluster", Status.UNAVAILABLE))
    assert not service.busy(etcdlib.EtcdUnavailableError("no other control plane is known yet"))
    assert not service.busy(refused("etcdserver: no leader", Status.UNAVAILABLE))
    assert service.JOIN_BUSY_RETRY < service.JOIN_RETRY
