"""machined's etcd: the ``etcd`` service of a control plane and the etcd side of the machine API.

What the node does with etcd, the Talos way, on top of :mod:`ichor.etcd` (binary, PKI, flags,
client, snapshots):

* **Service** ``etcd`` (control planes only). Its pre stage issues the node's etcd certificates from
  ``cluster.etcd.ca`` into ``/system/secrets/etcd``, restores an uploaded snapshot when a recovery
  bootstrap asked for it, then decides how etcd starts:

  - data directory not empty: etcd restarts from its data (no cluster flags);
  - bootstrap requested (``talosctl bootstrap``) or ``machine.type: init``: a new one-member cluster;
  - otherwise the node **joins**: it asks the running members (found through the discovered
    control-plane endpoints, else ``cluster.controlPlane.endpoint``) to add it as a learner,
    retrying every 3 s and printing Talos's "etcd is waiting to join the cluster ... run
    ``talosctl bootstrap``" hint every 30 s (and a ``waits`` resource saying why it still waits).

  The runner is the real etcd process; while it runs as a learner a task promotes it to a voting
  member as soon as it has caught up. The health check is a quorum read.
* **RPCs**: Bootstrap (Talos's preconditions; beyond Talos it refuses to bootstrap a second
  cluster when another control plane already runs etcd), EtcdRecover (upload), member list/remove,
  leave, forfeit leadership, status, alarms, defragment, snapshot.

A process node's etcd is a child process in its own session: if machined dies without stopping it
(``kill -9``), the next boot finds it through its PID file and kills it before starting a new one.

This module never touches another node's files and never starts etcd outside the supervisor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor import etcd as etcdlib
from ichor.machined.cosi import NotFoundError, State, clear_wait, publish_wait
from ichor.machined.platform import Layout
from ichor.machined.resources import TIME_STATUSES
from ichor.machined.services import (
    TIME_SYNC,
    Condition,
    HealthCheck,
    ProcessRunner,
    Recorder,
    RestartPolicy,
    RunContext,
    Runner,
    Service,
    ServiceState,
    Supervisor,
)
from ichor.machinery import pki
from ichor.machinery.files import write_atomic

__all__ = [
    "DATA_DIR",
    "PID_FILE",
    "PKI_DIR",
    "RECOVERY_SNAPSHOT",
    "EtcdNode",
    "NodeEtcd",
    "kill_leftover_etcd",
]

DATA_DIR = "/var/lib/etcd"
PKI_DIR = "/system/secrets/etcd"
RECOVERY_SNAPSHOT = "/var/lib/etcd.snapshot"
PID_FILE = "/system/run/etcd.pid"
JOIN_RETRY = 3.0
JOIN_NAG_INTERVAL = 30.0
PROMOTE_RETRY = 1.0
LEAVE_RETRY_FOR = 30.0
WAIT_ID = "etcd"

T = TypeVar("T")


class EtcdNode(Protocol):
    """What the etcd side needs from the node."""

    layout: Layout
    state: State
    supervisor: Supervisor

    def say(self, message: str) -> None: ...

    def hostname(self) -> str: ...

    def machine_type(self) -> str: ...

    def v1alpha1(self) -> dict[str, Any]: ...

    def now(self) -> datetime: ...


def kill_leftover_etcd(layout: Layout) -> int | None:
    """Kill an etcd that a machined which died without stopping it left running (it holds the node's
    ports); returns its PID. Only a process whose command line names this node's data directory is
    killed, so a PID reused by something else is left alone."""
    pid_file = layout.path(PID_FILE)
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    pid_file.unlink(missing_ok=True)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if not any(str(layout.path(DATA_DIR)).encode() in part for part in cmdline):
        return None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return pid


def time_synced(state: State) -> bool:
    """``TimeStatuses/node`` says the clock is in sync (process nodes: the host's clock is)."""
    try:
        return bool(state.get(TIME_STATUSES.default_namespace, TIME_STATUSES, "node").spec.synced)
    except NotFoundError:
        return False


def time_sync_condition(state: State) -> Condition:
    """Talos's ``time sync`` service condition: met once ``TimeStatuses/node`` is synced."""

    async def wait() -> None:
        async for _ in state.watch(TIME_STATUSES.default_namespace, TIME_STATUSES, "node"):
            if time_synced(state):
                return

    return Condition(TIME_SYNC, wait)


def _grpc(status: Status, message: str) -> GRPCError:
    return GRPCError(status, message)


class NodeEtcd:
    """The etcd service and etcd RPCs of one node (see the module docstring)."""

    def __init__(self, node: EtcdNode) -> None:
        self.node = node
        layout = node.layout
        self.data_dir = layout.path(DATA_DIR)
        self.pki_dir = layout.path(PKI_DIR)
        self.snapshot_path = layout.path(RECOVERY_SNAPSHOT)
        self.pid_file = layout.path(PID_FILE)
        self.bootstrap_requested = False
        self.recover = False
        self.recover_skip_hash_check = False
        self._args: list[str] = []
        self._learner_id = 0
        self._voting_endpoints: list[str] = []
        self._certs: etcdlib.EtcdCerts | None = None
        self._version: tuple[int, int, int] | None = None

    # --- configuration ----------------------------------------------------------------------------

    def _etcd_config(self) -> dict[str, Any]:
        return dict((self.node.v1alpha1().get("cluster") or {}).get("etcd") or {})

    def _ca(self) -> pki.CertKey:
        ca = self._etcd_config().get("ca") or {}
        return pki.CertKey.from_b64(str(ca.get("crt", "")), str(ca.get("key", "")), what="cluster.etcd.ca")

    def addresses(self) -> etcdlib.EtcdAddresses:
        config = self._etcd_config()
        return etcdlib.select_addresses(
            [self.node.layout.address],
            advertised_subnets=[str(s) for s in config.get("advertisedSubnets") or []],
            listen_subnets=[str(s) for s in config.get("listenSubnets") or []],
            exclusive=True,
        )

    def local_endpoint(self) -> str:
        return etcdlib.etcd_url(self.node.layout.address, etcdlib.CLIENT_PORT)

    def _ensure_certs(self) -> etcdlib.EtcdCerts:
        if self._certs is None:
            ca = self._ca()
            if not ca.has_key:
                raise etcdlib.EtcdConfigError(
                    "cluster.etcd.ca has no key: a control plane needs the etcd CA key to issue its certificates",
                    hint="use the controlplane.yaml from `talosctl gen config` (cluster.etcd.ca.key)",
                )
            address = self.node.layout.address
            certs = etcdlib.issue_certs(
                ca, hostname=self.node.hostname(), addresses=[address],
                shared_loopback=address.startswith("127."),
            )  # fmt: skip
            etcdlib.write_pki(self.pki_dir, certs)
            self._certs = certs
        return self._certs

    def client(self, endpoints: list[str], *, timeout: float = 10.0) -> etcdlib.EtcdClient:
        certs = self._ensure_certs()
        return etcdlib.EtcdClient(
            endpoints, ca=certs.ca.crt, cert=certs.admin.crt, key=certs.admin.key, timeout=timeout,
            connect_timeout=min(timeout, 3.0),
        )  # fmt: skip

    def control_plane_endpoints(self, *, include_self: bool = False) -> list[str]:
        """etcd client URLs of the other control planes: discovered, else the configured endpoint."""
        hosts: list[str] = []
        with contextlib.suppress(NotFoundError):
            from ichor.machined.cluster._types import DISCOVERED_ENDPOINTS_ID, ENDPOINTS

            found = self.node.state.get(ENDPOINTS.default_namespace, ENDPOINTS, DISCOVERED_ENDPOINTS_ID)
            hosts.extend(str(a) for a in found.spec.addresses)
        endpoint = str(
            ((self.node.v1alpha1().get("cluster") or {}).get("controlPlane") or {}).get("endpoint", "")
        )
        host = urlsplit(endpoint).hostname
        if host:
            hosts.append(host)
        urls = [etcdlib.etcd_url(h, etcdlib.CLIENT_PORT) for h in dict.fromkeys(hosts)]
        if include_self:
            return list(dict.fromkeys([self.local_endpoint(), *urls]))
        own = set(self.addresses().client_urls) | {self.local_endpoint()}
        return [u for u in urls if u not in own]

    def data_empty(self) -> bool:
        return not self.data_dir.is_dir() or not any(self.data_dir.iterdir())

    # --- the service --------------------------------------------------------------------------------

    def service(self) -> Service:
        return Service(
            "etcd", self._runner, description="etcd", pre=self._pre, restart=RestartPolicy.FOREVER,
            conditions=(time_sync_condition(self.node.state),),
            health_check=HealthCheck(self._health, initial_delay=1.0, period=5.0, timeout=5.0), stop_timeout=10.0,
        )  # fmt: skip

    async def _pre(self) -> None:
        from ichor.etcd import build_args, find_binaries, format_initial_cluster

        node = self.node
        self._learner_id = 0
        self._voting_endpoints = []
        await asyncio.to_thread(self._ensure_certs)
        leftover = kill_leftover_etcd(node.layout)
        if leftover:
            node.say(f"killing etcd left over from the previous boot (PID {leftover})")
        addresses = self.addresses()
        name = node.hostname()
        peer_urls = addresses.peer_urls
        if self.recover:
            await asyncio.to_thread(self._restore, name, peer_urls)
        initial_cluster: str | None = None
        initial_state: str | None = None
        if self.data_empty():
            if self.bootstrap_requested or node.machine_type() == "init":
                initial_cluster = format_initial_cluster((name, u) for u in peer_urls)
                initial_state = "new"
            else:
                initial_cluster = await self._join(name, peer_urls)
                initial_state = "existing"
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        binaries = find_binaries()
        if self._version is None:
            self._version = await asyncio.to_thread(etcdlib.etcd_version, binaries.etcd)
        extra = {str(k): str(v) for k, v in (self._etcd_config().get("extraArgs") or {}).items()}
        args = build_args(
            name=name, data_dir=self.data_dir, pki=etcdlib.PKIPaths(self.pki_dir), addresses=addresses,
            initial_cluster=initial_cluster, initial_cluster_state=initial_state, extra_args=extra,
            etcd_version=self._version,
        )  # fmt: skip
        self._args = [str(binaries.etcd), *args]

    def _restore(self, name: str, peer_urls: list[str]) -> None:
        from ichor.etcd import format_initial_cluster, restore_snapshot

        info = restore_snapshot(
            self.snapshot_path, self.data_dir, name=name,
            initial_cluster=format_initial_cluster((name, u) for u in peer_urls),
            initial_advertise_peer_urls=",".join(peer_urls), skip_hash_check=self.recover_skip_hash_check,
        )  # fmt: skip
        self.node.say(
            f"recovering etcd from snapshot: hash {info.hash:08x}, revision {info.revision}, "
            f"total keys {info.total_keys}, total size {info.total_size}"
        )
        self.snapshot_path.unlink(missing_ok=True)
        self.recover = False

    async def _join(self, name: str, peer_urls: list[str]) -> str:
        """Add this node as a learner through a running member; returns ``--initial-cluster``."""
        from ichor.etcd import format_initial_cluster

        node = self.node
        since = node.now()
        last_nag: float | None = None
        loop = asyncio.get_running_loop()
        try:
            while True:
                if last_nag is None or loop.time() - last_nag >= JOIN_NAG_INTERVAL:
                    last_nag = loop.time()
                    node.say(
                        "etcd is waiting to join the cluster, if this node is the first node in the cluster, "
                        "please run `talosctl bootstrap` against one of the following IPs:"
                    )
                    node.say(f"[{node.layout.address}]")
                endpoints = self.control_plane_endpoints()
                try:
                    if not endpoints:
                        raise etcdlib.EtcdUnavailableError(
                            "no other control plane is known yet (none discovered, "
                            "cluster.controlPlane.endpoint names this node)"
                        )
                    members, learner_id = await self._add_member(endpoints, name, peer_urls)
                except etcdlib.EtcdError as err:
                    publish_wait(node.state, WAIT_ID, owner="", waiting_for="etcd to join the cluster",
                                 reason=f"{err}; run `talosctl bootstrap` on one control plane if none runs etcd "
                                        f"yet", now=since)  # fmt: skip
                    await asyncio.sleep(JOIN_RETRY)
                    continue
                self._learner_id = learner_id
                self._voting_endpoints = [u for m in members if m.id != learner_id and not m.is_learner
                                          for u in m.client_urls]  # fmt: skip
                node.say(f"etcd joined the cluster as learner {learner_id:x}")
                return format_initial_cluster(
                    (name if m.id == learner_id else m.name, u) for m in members for u in m.peer_urls
                )
        finally:
            clear_wait(node.state, WAIT_ID, owner="")

    async def _add_member(
        self, endpoints: list[str], name: str, peer_urls: list[str]
    ) -> tuple[list[etcdlib.Member], int]:
        async with self.client(endpoints, timeout=10.0) as client:
            members = await client.member_list()
            for member in members:
                # A member of our name is this node's previous life (its data is gone): replace it.
                if member.name == name:
                    self.node.say(f"removing stale etcd member {member.id:x} ({name}) before joining again")
                    await client.member_remove(member.id)
            same_peer = [m for m in members if sorted(m.peer_urls) == sorted(peer_urls)]
            if same_peer and same_peer[0].is_learner and not same_peer[0].name:
                learner_id = same_peer[0].id  # added by an earlier attempt that did not get to start
            else:
                learner_id = (await client.member_add(peer_urls, learner=True)).id
            return await client.member_list(), learner_id

    def _runner(self, context: RunContext) -> Runner:
        return _EtcdRunner(self, ProcessRunner(self._args, context))

    async def promote_when_ready(self) -> None:
        """A learner asks the voting members to promote it until it has caught up."""
        learner_id = self._learner_id
        if not learner_id:
            return
        while True:
            endpoints = list(dict.fromkeys([*self._voting_endpoints, *self.control_plane_endpoints()]))
            try:
                async with self.client(endpoints, timeout=5.0) as client:
                    await client.member_promote(learner_id)
            except etcdlib.EtcdError as err:
                if "not a learner" in str(err):  # promoted already (an earlier reply was lost)
                    self._learner_id = 0
                    return
                # not in sync yet, a leader change, a member restarting: all pass, so retry
                await asyncio.sleep(PROMOTE_RETRY)
                continue
            self._learner_id = 0
            self.node.say("successfully promoted etcd member")
            return

    async def _health(self) -> None:
        async with self.client([self.local_endpoint()], timeout=4.0) as client:
            result = await client.health(self.local_endpoint())
        if not result.healthy:
            raise RuntimeError(result.error or "etcd is not healthy")

    # --- RPCs -------------------------------------------------------------------------------------

    def check_control_plane(self, api_name: str) -> None:
        if self.node.machine_type() != "controlplane":
            raise _grpc(Status.UNIMPLEMENTED, f"{api_name} is only available on control plane nodes")

    def _require_running(self) -> None:
        info = next((i for i in self.node.supervisor.list() if i.id == "etcd"), None)
        if info is None or not info.running:
            state = info.state.value if info is not None else "not loaded"
            raise _grpc(
                Status.FAILED_PRECONDITION,
                f"etcd is not running on this node (service etcd is {state}); "
                "see `talosctl service etcd` and `talosctl logs etcd`",
            )

    async def bootstrap(self, recover: bool, skip_hash_check: bool) -> None:
        if self.node.machine_type() != "controlplane":
            raise _grpc(Status.FAILED_PRECONDITION, "bootstrap can only be performed on a control plane node")
        if not time_synced(self.node.state):
            raise _grpc(
                Status.FAILED_PRECONDITION,
                "time is not in sync yet (etcd waits for it: see `talosctl get timestatus` and "
                "machine.time.servers)",
            )
        if not self.data_empty():
            raise _grpc(Status.ALREADY_EXISTS, "etcd data directory is not empty")
        if recover:
            if not self.snapshot_path.exists():
                raise _grpc(
                    Status.FAILED_PRECONDITION,
                    "no etcd snapshot uploaded for recovery: use `talosctl bootstrap --recover-from <snapshot>`",
                )
            try:
                await asyncio.to_thread(
                    etcdlib.verify_snapshot, self.snapshot_path, skip_hash_check=skip_hash_check
                )
            except etcdlib.EtcdError as err:
                self.snapshot_path.unlink(missing_ok=True)
                hint = f" ({err.hint})" if err.hint else ""
                raise _grpc(Status.INVALID_ARGUMENT, f"etcd snapshot rejected: {err}{hint}") from None
        running = await self._running_elsewhere()
        if running:
            raise _grpc(
                Status.ALREADY_EXISTS,
                f"etcd is already running on {', '.join(running)}: the cluster is bootstrapped and this node "
                "joins it by itself (bootstrap is done once per cluster; see `talosctl etcd members`)",
            )
        self.bootstrap_requested = True
        self.recover = recover
        self.recover_skip_hash_check = skip_hash_check
        self.node.say("bootstrap request received")
        supervisor = self.node.supervisor
        await supervisor.stop("etcd")
        supervisor.start("etcd")

    async def _running_elsewhere(self) -> list[str]:
        """Other control planes whose etcd answers a status call (quorum or not)."""

        async def probe(endpoint: str) -> str | None:
            try:
                async with self.client([endpoint], timeout=2.0) as client:
                    await client.status(endpoint)
            except etcdlib.EtcdError:
                return None
            return urlsplit(endpoint).hostname

        found = await asyncio.gather(*(probe(e) for e in self.control_plane_endpoints()))
        return [h for h in found if h]

    async def receive_snapshot(self, chunks: AsyncIterator[bytes]) -> None:
        self.check_control_plane("etcd recover")
        data = bytearray()
        async for chunk in chunks:
            data += chunk
        self.snapshot_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.snapshot_path, bytes(data), mode=0o600)

    async def members(self, query_local: bool) -> list[etcdlib.Member]:
        self.check_control_plane("member list")
        endpoints = (
            [self.local_endpoint()] if query_local else self.control_plane_endpoints(include_self=True)
        )
        return await self._call(endpoints, lambda c: c.member_list())

    async def remove_member(self, member_id: int) -> None:
        self.check_control_plane("etcd remove member")
        try:
            await self._call(
                self.control_plane_endpoints(include_self=True), lambda c: c.member_remove(member_id)
            )
        except GRPCError as err:
            if "member not found" in str(err.message):
                raise _grpc(Status.NOT_FOUND, f"etcdserver: member not found (id {member_id:x})") from None
            raise

    async def leave(self) -> None:
        self.check_control_plane("etcd leave")
        self._require_running()
        endpoints = self.control_plane_endpoints(include_self=True)
        own_peer_urls = set(self.addresses().peer_urls)
        name = self.node.hostname()

        async def once(client: etcdlib.EtcdClient) -> None:
            # Found by name or peer URL through whichever member answers: the local member may be
            # busy (it may have just caught up), and a removal need not be sent to it.
            members = await client.member_list()
            own = [m for m in members if m.name == name or own_peer_urls & set(m.peer_urls)]
            if not own:
                return  # not (or no longer) a member: an earlier attempt whose reply was lost
            me = own[0]
            if len([m for m in members if not m.is_learner]) <= 1 and not me.is_learner:
                raise _OnlyVotingMember
            status = await client.status()
            if status.leader == me.id:
                await self._forfeit(client, me.id, members)
            await client.member_remove(me.id)

        # etcd refuses a removal ("unhealthy cluster") until every member has been connected for a
        # few seconds (strict reconfiguration check), and "leader changed" right after forfeiting
        # leadership: retry the whole step until LEAVE_RETRY_FOR has passed.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LEAVE_RETRY_FOR
        while True:
            try:
                await self._call(endpoints, once)
                break
            except _OnlyVotingMember:
                raise _grpc(
                    Status.FAILED_PRECONDITION,
                    "failed to leave cluster: this is the only voting etcd member; removing it would lose the "
                    "cluster (take a snapshot with `talosctl etcd snapshot` first, then reset the node)",
                ) from None
            except GRPCError as err:
                if loop.time() > deadline:
                    raise
                self.node.say(f"etcd leave: {err.message}; retrying")
            await asyncio.sleep(1.0)
        self.node.say("left the etcd cluster")

    async def _forfeit(self, client: etcdlib.EtcdClient, own_id: int, members: list[etcdlib.Member]) -> str:
        for member in members:
            if member.id != own_id and not member.is_learner and member.client_urls:
                await client.move_leader(member.id)
                return member.name
        return ""

    async def forfeit_leadership(self) -> str:
        self.check_control_plane("etcd forfeit leadership")
        self._require_running()

        async def work(client: etcdlib.EtcdClient) -> str:
            status = await client.status(self.local_endpoint())
            if status.leader != status.member_id:
                return ""
            return await self._forfeit(client, status.member_id, await client.member_list())

        return await self._call(self.control_plane_endpoints(include_self=True), work)

    async def status(self) -> etcdlib.Status:
        self.check_control_plane("etcd status")
        self._require_running()
        return await self._call([self.local_endpoint()], lambda c: c.status(self.local_endpoint()))

    async def alarms(self, disarm: bool) -> list[etcdlib.Alarm]:
        self.check_control_plane("etcd alarm list")
        self._require_running()
        if disarm:
            return await self._call([self.local_endpoint()], lambda c: c.alarm_disarm())
        return await self._call([self.local_endpoint()], lambda c: c.alarm_list())

    async def defragment(self) -> None:
        self.check_control_plane("etcd defragment")
        self._require_running()
        await self._call([self.local_endpoint()], lambda c: c.defragment(self.local_endpoint()))

    async def snapshot(self) -> AsyncIterator[bytes]:
        self.check_control_plane("etcd snapshot")
        self._require_running()
        async with self.client([self.local_endpoint()], timeout=300.0) as client:
            try:
                async for chunk in client.snapshot(endpoint=self.local_endpoint()):
                    yield chunk
            except etcdlib.EtcdError as err:
                raise _grpc(Status.UNAVAILABLE, f"failed reading etcd snapshot: {err}") from None

    async def _call(self, endpoints: list[str], work: Callable[[etcdlib.EtcdClient], Awaitable[T]]) -> T:
        try:
            async with self.client(endpoints) as client:
                return await work(client)
        except etcdlib.EtcdNotFoundError as err:
            raise _grpc(Status.NOT_FOUND, str(err)) from None
        except etcdlib.EtcdUnavailableError as err:
            raise _grpc(
                Status.UNAVAILABLE,
                f"{err} (etcd has no quorum or is not running: see `talosctl etcd status`)",
            ) from None
        except etcdlib.EtcdError as err:
            raise _grpc(Status.FAILED_PRECONDITION, str(err)) from None

    # --- reset ------------------------------------------------------------------------------------

    async def leave_before_reset(self) -> str | None:
        """Graceful reset of a control plane: leave etcd first; returns why it could not, if so."""
        if self.node.machine_type() != "controlplane" or self.data_empty():
            return None
        try:
            await self.leave()
        except GRPCError as err:
            return str(err.message)
        return None

    def wipe_data(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)


class _OnlyVotingMember(Exception):
    """Leaving would remove the last voting member (turned into FailedPrecondition by ``leave``)."""


class _EtcdRunner:
    """The etcd process, plus (while a learner) the promotion task and the PID file."""

    def __init__(self, owner: NodeEtcd, process: ProcessRunner) -> None:
        self.owner = owner
        self.process = process

    def __str__(self) -> str:
        return str(self.process)

    @property
    def pids(self) -> list[int]:
        return self.process.pids

    async def run(self, record: Recorder, stop: asyncio.Event) -> None:
        def record_and_remember(state: ServiceState, message: str) -> None:
            child = self.process.process
            if state is ServiceState.RUNNING and child is not None:
                self.owner.pid_file.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(self.owner.pid_file, f"{child.pid}\n", mode=0o600)
            record(state, message)

        # A learner's promotion retries until etcd has caught up, so it may start with the process.
        helper = asyncio.get_running_loop().create_task(self.owner.promote_when_ready(), name="etcd promote")
        try:
            await self.process.run(record_and_remember, stop)
        finally:
            helper.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await helper
            self.owner.pid_file.unlink(missing_ok=True)
