"""What the etcd RPCs do (Bootstrap, EtcdRecover, member list/remove, leave, forfeit leadership,
status, alarms, defragment, snapshot), with Talos's preconditions and error texts, and the etcd
side of an upgrade (the checks under the upgrade mutex, leaving etcd without ``--preserve``).

Beyond Talos, Bootstrap refuses to bootstrap a second cluster when another control plane already
runs etcd. Everything goes through the node's :class:`~ichor.machined.services.etcd.EtcdService`
(certificates, endpoints, the service's bootstrap request); errors are ``GRPCError`` s.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar
from urllib.parse import urlsplit

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor import etcd as etcdlib
from ichor.machined.server._etcd_upgrade import (
    QUORUM_CHECK_TIMEOUT,
    UpgradeMutexError,
    upgrade_mutex,
    upgrade_refusal,
)
from ichor.machined.services import Supervisor
from ichor.machined.services.conditions import time_synced
from ichor.machined.services.etcd import EtcdService
from ichor.machinery.files import write_atomic

__all__ = ["LEAVE_RETRY_FOR", "EtcdOperations"]

LEAVE_RETRY_FOR = 30.0

T = TypeVar("T")


class _OnlyVotingMember(Exception):
    """Leaving would remove the last voting member (turned into FailedPrecondition by ``leave``)."""


class EtcdOperations:
    """The etcd side of the machine API on one node."""

    def __init__(self, service: EtcdService, supervisor: Supervisor) -> None:
        self.service = service
        self.supervisor = supervisor

    def check_control_plane(self, api_name: str) -> None:
        if not self.service.is_control_plane():
            raise GRPCError(Status.UNIMPLEMENTED, f"{api_name} is only available on control plane nodes")

    def _require_running(self) -> None:
        info = next((i for i in self.supervisor.list() if i.id == "etcd"), None)
        if info is None or not info.running:
            state = info.state.value if info is not None else "not loaded"
            raise GRPCError(
                Status.FAILED_PRECONDITION,
                f"etcd is not running on this node (service etcd is {state}); "
                "see `talosctl service etcd` and `talosctl logs etcd`",
            )

    async def bootstrap(self, recover: bool, skip_hash_check: bool) -> None:
        service = self.service
        if not service.is_control_plane():
            raise GRPCError(
                Status.FAILED_PRECONDITION, "bootstrap can only be performed on a control plane node"
            )
        if not time_synced(service.state):
            raise GRPCError(
                Status.FAILED_PRECONDITION,
                "time is not in sync yet (etcd waits for it: see `talosctl get timestatus` and "
                "machine.time.servers)",
            )
        if not service.data_empty():
            raise GRPCError(Status.ALREADY_EXISTS, "etcd data directory is not empty")
        if recover:
            if not service.snapshot_path.exists():
                raise GRPCError(
                    Status.FAILED_PRECONDITION,
                    "no etcd snapshot uploaded for recovery: use `talosctl bootstrap --recover-from <snapshot>`",
                )
            try:
                await asyncio.to_thread(
                    etcdlib.verify_snapshot, service.snapshot_path, skip_hash_check=skip_hash_check
                )
            except etcdlib.EtcdError as err:
                service.snapshot_path.unlink(missing_ok=True)
                hint = f" ({err.hint})" if err.hint else ""
                raise GRPCError(Status.INVALID_ARGUMENT, f"etcd snapshot rejected: {err}{hint}") from None
        running = await self._running_elsewhere()
        if running:
            raise GRPCError(
                Status.ALREADY_EXISTS,
                f"etcd is already running on {', '.join(running)}: the cluster is bootstrapped and this node "
                "joins it by itself (bootstrap is done once per cluster; see `talosctl etcd members`)",
            )
        service.request_bootstrap(recover=recover, skip_hash_check=skip_hash_check)
        service.say("bootstrap request received")
        await self.supervisor.stop("etcd", reason="Bootstrap requested")
        self.supervisor.start("etcd")

    async def _running_elsewhere(self) -> list[str]:
        """Other control planes whose etcd answers a status call (quorum or not)."""

        async def probe(endpoint: str) -> str | None:
            try:
                async with self.service.client([endpoint], timeout=2.0) as client:
                    await client.status(endpoint)
            except etcdlib.EtcdError:
                return None
            return urlsplit(endpoint).hostname

        found = await asyncio.gather(*(probe(e) for e in self.service.control_plane_endpoints()))
        return [h for h in found if h]

    async def receive_snapshot(self, chunks: AsyncIterator[bytes]) -> None:
        self.check_control_plane("etcd recover")
        data = bytearray()
        async for chunk in chunks:
            data += chunk
        path = self.service.snapshot_path
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, bytes(data), mode=0o600)

    async def members(self, query_local: bool) -> list[etcdlib.Member]:
        self.check_control_plane("member list")
        service = self.service
        endpoints = (
            [service.local_endpoint()] if query_local else service.control_plane_endpoints(include_self=True)
        )
        return await self._call(endpoints, lambda c: c.member_list())

    async def remove_member(self, member_id: int) -> None:
        self.check_control_plane("etcd remove member")
        try:
            await self._call(
                self.service.control_plane_endpoints(include_self=True), lambda c: c.member_remove(member_id)
            )
        except GRPCError as err:
            if "member not found" in str(err.message):
                raise GRPCError(
                    Status.NOT_FOUND, f"etcdserver: member not found (id {member_id:x})"
                ) from None
            raise

    async def leave(self) -> None:
        self.check_control_plane("etcd leave")
        self._require_running()
        service = self.service
        endpoints = service.control_plane_endpoints(include_self=True)
        own_peer_urls = set(service.addresses().peer_urls)
        name = service.spec().name

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
                raise GRPCError(
                    Status.FAILED_PRECONDITION,
                    "failed to leave cluster: this is the only voting etcd member; removing it would lose the "
                    "cluster (take a snapshot with `talosctl etcd snapshot` first, then reset the node)",
                ) from None
            except GRPCError as err:
                if loop.time() > deadline:
                    raise
                service.say(f"etcd leave: {err.message}; retrying")
            await asyncio.sleep(1.0)
        service.say("left the etcd cluster")

    async def _forfeit(self, client: etcdlib.EtcdClient, own_id: int, members: list[etcdlib.Member]) -> str:
        for member in members:
            if member.id != own_id and not member.is_learner and member.client_urls:
                await client.move_leader(member.id)
                return member.name
        return ""

    async def forfeit_leadership(self) -> str:
        self.check_control_plane("etcd forfeit leadership")
        self._require_running()
        local = self.service.local_endpoint()

        async def work(client: etcdlib.EtcdClient) -> str:
            status = await client.status(local)
            if status.leader != status.member_id:
                return ""
            return await self._forfeit(client, status.member_id, await client.member_list())

        return await self._call(self.service.control_plane_endpoints(include_self=True), work)

    async def status(self) -> etcdlib.Status:
        self.check_control_plane("etcd status")
        self._require_running()
        local = self.service.local_endpoint()
        return await self._call([local], lambda c: c.status(local))

    async def alarms(self, disarm: bool) -> list[etcdlib.Alarm]:
        self.check_control_plane("etcd alarm list")
        self._require_running()
        local = self.service.local_endpoint()
        if disarm:
            return await self._call([local], lambda c: c.alarm_disarm())
        return await self._call([local], lambda c: c.alarm_list())

    async def defragment(self) -> None:
        self.check_control_plane("etcd defragment")
        self._require_running()
        local = self.service.local_endpoint()
        await self._call([local], lambda c: c.defragment(local))

    async def snapshot(self) -> AsyncIterator[bytes]:
        self.check_control_plane("etcd snapshot")
        self._require_running()
        local = self.service.local_endpoint()
        async with self.service.client([local], timeout=300.0) as client:
            try:
                async for chunk in client.snapshot(endpoint=local):
                    yield chunk
            except etcdlib.EtcdError as err:
                raise GRPCError(Status.UNAVAILABLE, f"failed reading etcd snapshot: {err}") from None

    async def _call(self, endpoints: list[str], work: Callable[[etcdlib.EtcdClient], Awaitable[T]]) -> T:
        try:
            async with self.service.client(endpoints) as client:
                return await work(client)
        except etcdlib.EtcdNotFoundError as err:
            raise GRPCError(Status.NOT_FOUND, str(err)) from None
        except etcdlib.EtcdUnavailableError as err:
            raise GRPCError(
                Status.UNAVAILABLE,
                f"{err} (etcd has no quorum or is not running: check it on each control plane node with "
                "`talosctl -n <node> service etcd` and `talosctl -n <node> logs etcd`)",
            ) from None
        except etcdlib.EtcdError as err:
            raise GRPCError(Status.FAILED_PRECONDITION, str(err)) from None

    async def check_graceful_reset(self) -> None:
        """Refuse, before anything happens, a graceful reset that could not leave etcd: the only voting
        member cannot leave without losing the cluster, and a membership nobody can read cannot be
        left either. Nothing to check on a node that runs no etcd (workers, control planes not
        bootstrapped yet)."""
        service = self.service
        if not service.is_control_plane() or service.data_empty():
            return
        instead = (
            "take a snapshot first with `talosctl etcd snapshot <file>`, then reset without leaving etcd: "
            "`talosctl reset --graceful=false`"
        )
        try:
            name = service.spec().name
            members = await self._call(
                service.control_plane_endpoints(include_self=True), lambda c: c.member_list()
            )
        except (GRPCError, etcdlib.EtcdError) as err:
            reason = err.message if isinstance(err, GRPCError) else str(err)
            raise GRPCError(
                Status.FAILED_PRECONDITION,
                f"graceful reset refused: cannot read the etcd membership to leave it ({reason}); nothing was "
                f"changed; {instead}",
            ) from None
        voting = [m for m in members if not m.is_learner]
        if len(voting) <= 1 and any(m.name == name for m in voting):
            raise GRPCError(
                Status.FAILED_PRECONDITION,
                "graceful reset refused: this node is the only voting etcd member, leaving would lose the "
                f"cluster's data; nothing was changed; {instead}",
            )

    # --- upgrade -------------------------------------------------------------------------------------

    async def validate_for_upgrade(self, *, preserve: bool) -> None:
        """Talos's checks before upgrading a control plane, under the etcd upgrade mutex (released
        when they end); GRPCError with Talos's texts when refused."""
        try:
            client = self.service.client(self.service.control_plane_endpoints(include_self=True))
        except etcdlib.EtcdError as err:
            raise GRPCError(Status.UNKNOWN, f"failed to create etcd client: {err}") from None
        async with client:
            try:
                async with upgrade_mutex(client):
                    try:
                        members = await client.member_list()
                        problem = await upgrade_refusal(members, preserve=preserve, probe=self._quorum_probe)
                    except etcdlib.EtcdError as err:
                        problem = str(err)
            except UpgradeMutexError as err:
                raise GRPCError(Status.UNKNOWN, f"failed to acquire upgrade mutex: {err}") from None
        if problem is not None:
            raise GRPCError(Status.UNKNOWN, f"error validating etcd for upgrade: {problem}")

    async def _quorum_probe(self, member: etcdlib.Member) -> str | None:
        """Why ``member`` does not answer a quorum read of ``health`` through its own client URLs."""
        try:
            async with self.service.client(list(member.client_urls), timeout=QUORUM_CHECK_TIMEOUT) as client:
                await client.get(b"health")
        except etcdlib.EtcdRequestError as err:
            if "permission denied" in err.etcd_message:  # the read went through consensus: quorum is fine
                return None
            return str(err)
        except etcdlib.EtcdError as err:
            return str(err)
        return None

    async def leave_for_upgrade(self) -> str | None:
        """An upgrade without ``--preserve`` on a control plane: Talos's ``LeaveEtcd`` (leave the
        cluster, stop etcd, clear its data directory); returns why it could not leave, if so. Nothing
        to do on a node that runs no etcd member (workers, a control plane not bootstrapped)."""
        service = self.service
        if not service.is_control_plane() or service.data_empty():
            return None
        problem = await self.leave_before_reset()
        if problem is not None:
            return problem
        await self.supervisor.stop("etcd", reason="left the etcd cluster for an upgrade")
        for child in list(service.data_dir.iterdir()):
            if child.is_dir() and not child.is_symlink():
                await asyncio.to_thread(shutil.rmtree, child)
            else:
                child.unlink()
        service.say("etcd data directory cleared: the node joins etcd again after the upgrade")
        return None

    async def leave_before_reset(self) -> str | None:
        """Graceful reset of a control plane: leave etcd first; returns why it could not, if so."""
        if not self.service.is_control_plane() or self.service.data_empty():
            return None
        try:
            await self.leave()
        except GRPCError as err:
            return str(err.message)
        return None
