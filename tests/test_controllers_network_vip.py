"""network.VIPOperatorController: control planes campaign for the shared IP in a (fake, in-memory) etcd;
the winner gets the operator-layer AddressSpec and announces it; a dead leader's lease expires and
another node takes the IP; a leader whose etcd goes releases it at once; workers never campaign."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from controller_helpers import apply, run, running
from network_helpers import FakeNetlink, ether

from ichor.etcd import KV, EtcdUnavailableError, RangeResult
from ichor.machined.controllers import config as config_area
from ichor.machined.controllers import etcd as etcd_area
from ichor.machined.controllers import network
from ichor.machined.controllers.k8s.address_filter import node_address_filter_controller
from ichor.machined.controllers.network import vip
from ichor.machined.cosi import State, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ADDRESS_SPECS,
    ADDRESS_STATUSES,
    ETCD_SPECS,
    NETWORK_CONFIG_NAMESPACE,
    NODE_ADDRESSES,
    OPERATOR_SPECS,
    SERVICES,
    ServiceSpec,
)

IP = "10.77.0.50"
ADDRESS_ID = f"vip/eth0/eth0/{IP}/32"
PREFIX = f"talos:v1:vip:election:{IP}/"


class FakeEtcd:
    """Keys, revisions and leases as etcd keeps them; a lease expires only when the test says so."""

    def __init__(self) -> None:
        self.revision = 1
        self.kvs: dict[bytes, KV] = {}
        self.leases: set[int] = set()
        self.next_lease = 0x700
        self.down: set[str] = set()  # nodes whose etcd calls fail
        self.changed = asyncio.Condition()
        self.deleted: list[tuple[bytes, int]] = []

    async def _delete(self, key: bytes) -> None:
        self.revision += 1
        del self.kvs[key]
        self.deleted.append((key, self.revision))
        async with self.changed:
            self.changed.notify_all()

    async def expire(self, lease: int) -> None:
        self.leases.discard(lease)
        for key in [k for k, kv in self.kvs.items() if kv.lease == lease]:
            await self._delete(key)

    def holder(self) -> str | None:
        ordered = sorted((kv for k, kv in self.kvs.items() if k.startswith(PREFIX.encode())),
                         key=lambda kv: kv.create_revision)  # fmt: skip
        return ordered[0].value.decode() if ordered else None

    def lease_of(self, node: str) -> int:
        return next(kv.lease for kv in self.kvs.values() if kv.value == node.encode())

    def client(self, node: str) -> Callable[[], contextlib.AbstractAsyncContextManager[vip.ElectionStore]]:
        @contextlib.asynccontextmanager
        async def open() -> AsyncIterator[vip.ElectionStore]:
            yield _Client(self, node)

        return open


class _Client:
    def __init__(self, etcd: FakeEtcd, node: str) -> None:
        self.etcd, self.node = etcd, node

    def _check(self) -> None:
        if self.node in self.etcd.down:
            raise EtcdUnavailableError(f"etcd of {self.node} is down")

    async def lease_grant(self, ttl: int, *, timeout: float | None = None) -> int:
        self._check()
        self.etcd.next_lease += 1
        self.etcd.leases.add(self.etcd.next_lease)
        return self.etcd.next_lease

    async def lease_keepalive(self, lease: int, *, timeout: float | None = None) -> int:
        self._check()
        return vip.LEASE_TTL if lease in self.etcd.leases else 0

    async def lease_revoke(self, lease: int, *, timeout: float | None = None) -> None:
        self._check()
        await self.etcd.expire(lease)

    async def create(self, key: str | bytes, value: str | bytes, *, lease: int = 0,
                     timeout: float | None = None) -> int | None:  # fmt: skip
        self._check()
        raw = key.encode() if isinstance(key, str) else key
        if raw in self.etcd.kvs:
            return None
        self.etcd.revision += 1
        data = value.encode() if isinstance(value, str) else value
        self.etcd.kvs[raw] = KV(raw, data, self.etcd.revision, self.etcd.revision, 1, lease)
        return self.etcd.revision

    async def get(self, key: str | bytes, *, prefix: bool = False) -> RangeResult:
        self._check()
        raw = key.encode() if isinstance(key, str) else key
        found = [kv for k, kv in sorted(self.etcd.kvs.items()) if k.startswith(raw) if prefix or k == raw]
        return RangeResult(found, self.etcd.revision, len(found))

    async def wait_deleted(self, key: str | bytes, *, after: int, timeout: float | None = None) -> int:
        raw = key.encode() if isinstance(key, str) else key
        async with self.etcd.changed:
            while True:
                self._check()
                hits = [rev for k, rev in self.etcd.deleted if k == raw and rev > after]
                if hits:
                    return hits[0]
                await self.etcd.changed.wait()


def _config(hostname: str, *, type: str = "controlplane", ip: str = IP) -> str:
    return f"""version: v1alpha1
machine:
  type: {type}
  network:
    hostname: {hostname}
    interfaces:
      - interface: eth0
        addresses: [10.77.0.{hostname[-1]}/24]
        vip: {{ip: {ip}}}
cluster: {{}}
"""


class _Node:
    def __init__(self, name: str, etcd: FakeEtcd, tmp: Path, *, type: str = "controlplane") -> None:
        self.name, self.type = name, type
        self.mac = f"0a:58:0a:4d:00:0{name[-1]}"
        self.kernel = FakeNetlink({"eth0": ether(2, self.mac, up=True)})
        self.announced: list[tuple[str, bytes, ipaddress.IPv4Address]] = []
        layout = Layout(root=tmp / name, address=f"10.77.0.{name[-1]}", own_netns=True)

        async def announce(link: str, mac: bytes, ip: ipaddress.IPv4Address) -> None:
            self.announced.append((link, mac, ip))

        async def no_wait(seconds: float) -> None:
            await asyncio.sleep(0.01)

        self.controllers = [
            *network.network_controllers(layout, self.kernel),
            vip.VIPOperatorController(etcd.client(name), announce, sleep=no_wait),
        ]

    @contextlib.asynccontextmanager
    async def up(self) -> AsyncIterator[State]:
        async with running(*self.controllers) as state:
            apply(state, _config(self.name, type=self.type))
            yield state


def set_etcd(state: State, *, healthy: bool) -> None:
    existing = state.list(SERVICES.default_namespace, SERVICES)
    spec = ServiceSpec(running=healthy, healthy=healthy)
    if existing:
        state.update(existing[0].with_spec(spec))
    else:
        state.create(SERVICES.new("etcd", spec))


def test_one_control_plane_holds_the_vip_and_another_takes_it_when_the_holder_dies(tmp_path: Path) -> None:
    etcd = FakeEtcd()
    a, b = _Node("cp-1", etcd, tmp_path), _Node("cp-2", etcd, tmp_path)

    async def main() -> None:
        async with a.up() as sa, b.up() as sb:
            await assert_resource(sa, OPERATOR_SPECS, "vip/eth0", lambda r: r.spec.vip.ip == IP)
            # No campaign before etcd is healthy here.
            await asyncio.sleep(0.2)
            assert etcd.kvs == {}
            set_etcd(sa, healthy=True)
            spec = await assert_resource(sa, ADDRESS_SPECS, ADDRESS_ID, namespace=NETWORK_CONFIG_NAMESPACE)
            assert (spec.spec.address, spec.spec.layer.value) == (f"{IP}/32", "operator")
            await assert_resource(sa, ADDRESS_STATUSES, f"eth0/{IP}/32")
            for _ in range(100):
                if len(a.announced) == vip.ANNOUNCEMENTS:
                    break
                await asyncio.sleep(0.02)
            mac_a = bytes.fromhex(a.mac.replace(":", ""))
            assert a.announced == [("eth0", mac_a, ipaddress.IPv4Address(IP))] * vip.ANNOUNCEMENTS
            assert etcd.holder() == "cp-1"

            set_etcd(sb, healthy=True)
            for _ in range(100):
                if len(etcd.kvs) == 2:
                    break
                await asyncio.sleep(0.02)
            assert sorted(kv.value for kv in etcd.kvs.values()) == [b"cp-1", b"cp-2"]
            await assert_no_resource(
                sb, ADDRESS_SPECS, ADDRESS_ID, namespace=NETWORK_CONFIG_NAMESPACE, timeout=0.3
            )

            # The holder dies without a word: its lease runs out and cp-2 takes the IP.
            await etcd.expire(etcd.lease_of("cp-1"))
            await assert_resource(sb, ADDRESS_STATUSES, f"eth0/{IP}/32")
            assert b.announced and b.announced[0][2] == ipaddress.IPv4Address(IP)
            # cp-1 saw its key go: it drops the IP and campaigns again, behind cp-2.
            await assert_no_resource(sa, ADDRESS_STATUSES, f"eth0/{IP}/32")
            for _ in range(100):
                if len(etcd.kvs) == 2:
                    break
                await asyncio.sleep(0.02)
            assert etcd.holder() == "cp-2"

            # cp-2's etcd turns unhealthy: it revokes its lease at once and cp-1 leads again.
            set_etcd(sb, healthy=False)
            await assert_no_resource(sb, ADDRESS_SPECS, ADDRESS_ID, namespace=NETWORK_CONFIG_NAMESPACE)
            await assert_resource(sa, ADDRESS_STATUSES, f"eth0/{IP}/32")
            assert etcd.holder() == "cp-1"

    run(main)


def test_a_leader_that_cannot_renew_its_lease_drops_the_vip(tmp_path: Path) -> None:
    etcd = FakeEtcd()
    node = _Node("cp-1", etcd, tmp_path)
    now = [0.0]
    controller = node.controllers[-1]
    assert isinstance(controller, vip.VIPOperatorController)

    async def advancing(seconds: float) -> None:
        now[0] += seconds
        await asyncio.sleep(0.01)

    controller._clock, controller._sleep = (lambda: now[0]), advancing

    async def main() -> None:
        async with node.up() as state:
            set_etcd(state, healthy=True)
            await assert_resource(state, ADDRESS_STATUSES, f"eth0/{IP}/32")
            etcd.down.add("cp-1")
            await assert_no_resource(state, ADDRESS_STATUSES, f"eth0/{IP}/32")
            assert now[0] >= vip.LEASE_TTL

    run(main)


def test_workers_never_campaign_for_the_vip(tmp_path: Path) -> None:
    etcd = FakeEtcd()
    worker = _Node("wk-1", etcd, tmp_path, type="worker")

    async def main() -> None:
        async with worker.up() as state:
            set_etcd(state, healthy=True)
            await assert_resource(state, ADDRESS_STATUSES, "eth0/10.77.0.1/24")
            await assert_no_resource(state, OPERATOR_SPECS, "vip/eth0", timeout=0.3)
            assert etcd.kvs == {}

    run(main)


def test_gratuitous_arp_frame_is_a_broadcast_request_for_the_ip_itself() -> None:
    mac = bytes.fromhex("0a580a4d0001")
    frame = vip.gratuitous_arp(mac, ipaddress.IPv4Address(IP))
    assert frame[:6] == b"\xff" * 6 and frame[6:12] == mac and frame[12:14] == b"\x08\x06"
    arp = frame[14:]
    assert arp[6:8] == b"\x00\x01"  # request
    assert arp[8:14] == mac and arp[14:18] == arp[24:28] == ipaddress.IPv4Address(IP).packed
    assert len(frame) == 42


def test_etcd_never_advertises_or_listens_on_the_vip(tmp_path: Path) -> None:
    etcd = FakeEtcd()
    node = _Node("cp-1", etcd, tmp_path)
    node.controllers += [
        config_area.machine_type_controller(),
        etcd_area.etcd_config_controller(),
        etcd_area.etcd_spec_controller(),
        node_address_filter_controller(),
    ]

    async def main() -> None:
        async with node.up() as state:
            set_etcd(state, healthy=True)
            await assert_resource(
                state, NODE_ADDRESSES, "current", lambda r: IP in {str(p.ip) for p in r.spec.addresses}
            )
            await assert_resource(state, ETCD_SPECS, "etcd")
            await asyncio.sleep(0.5)  # the spec controller has seen the VIP among the node's addresses
            spec = state.get("etcd", ETCD_SPECS, "etcd").spec
            # The VIP moves between nodes: were it an etcd address, etcd would restart each time it moved.
            assert spec.advertised_addresses == ("10.77.0.1",)
            assert (spec.listen_client_addresses, spec.listen_peer_addresses) == (
                ("10.77.0.1",),
                ("10.77.0.1",),
            )

    run(main)
