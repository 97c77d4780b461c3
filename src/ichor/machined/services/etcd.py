"""The ``etcd`` service of a control plane (Talos ``system/services/etcd.go``), run from ``EtcdSpec``.

Its pre stage issues the node's etcd certificates from ``EtcdRootSecrets`` into
``/system/secrets/etcd``, restores an uploaded snapshot when a recovery bootstrap asked for it, then
decides how etcd starts:

- data directory not empty: etcd restarts from its data (no cluster flags);
- bootstrap requested (``talosctl bootstrap``) or ``machine.type: init``: a new one-member cluster;
- otherwise the node **joins**: it asks the running members (found through the discovered
  control-plane endpoints, else ``cluster.controlPlane.endpoint``) to add it as a learner,
  retrying every second (every 0.5 s while the members answer but refuse a member for now: another
  learner not promoted yet, or etcd's 5 s rule) and printing Talos's "etcd is waiting to join the
  cluster ... run ``talosctl bootstrap``" hint every 30 s (and a ``waits`` resource saying why it
  still waits).

The runner is the real etcd process; while it runs as a learner a task promotes it to a voting
member as soon as it has caught up. The health check is a quorum read. :meth:`EtcdService.follow_spec`
restarts the service when ``EtcdSpec`` changes under a running etcd.

A process node's etcd is a child process in its own session: if machined dies without stopping it
(``kill -9``), the next boot finds it through its PID file and kills it before starting a new one.
This module never touches another node's files.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from ichor import etcd as etcdlib
from ichor.machined.controllers.config import control_plane_host
from ichor.machined.cosi import Phase, State, clear_wait, publish_wait
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ACTIVE_CONFIG_ID,
    DISCOVERED_ENDPOINTS_ID,
    ENDPOINTS,
    ETCD_ID,
    ETCD_ROOT_ID,
    ETCD_ROOT_SECRETS,
    ETCD_SPECS,
    MACHINE_CONFIGS,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    NODE_ADDRESS_FILTER_NO_K8S,
    NODE_ADDRESS_ROUTED_ID,
    NODE_ADDRESSES,
    EtcdSpecSpec,
    filtered_node_address_id,
)
from ichor.machined.services import (
    ETCD_SPEC,
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
from ichor.machined.services.conditions import resource_exists, time_sync
from ichor.machinery import pki
from ichor.machinery.files import write_atomic

__all__ = ["EtcdService", "busy", "kill_leftover_etcd"]

JOIN_RETRY = 1.0
"""Seconds before asking again when no member answers (none bootstrapped yet, none discovered):
each attempt is a refused connection or two; at 3 s a control plane joined up to 3 s after the
bootstrap's etcd was up."""
JOIN_BUSY_RETRY = 0.5
"""Seconds before asking again when the members are up but refuse a member now: another learner
is not promoted yet ("too many learner members"), or a voter has not been connected for 5 s yet
("unhealthy cluster", etcd's strict reconfiguration check). Both pass within seconds, and at
:data:`JOIN_RETRY` each of the two control planes joining after the bootstrap waited 0-3 s more
than it had to (the etcd phase of a 3+2 create was 1.8x the floor of ``benchmarks/floor.py``; 1.5x
with this alone, JOIN_RETRY still 3 s)."""
JOIN_NAG_INTERVAL = 30.0
PROMOTE_RETRY = 0.5
WAIT_ID = "etcd"


def busy(err: etcdlib.EtcdError) -> bool:
    """The members answered but refuse a new member for now (see :data:`JOIN_BUSY_RETRY`)."""
    return isinstance(err, etcdlib.EtcdTooManyLearnersError) or "unhealthy cluster" in str(err)


def kill_leftover_etcd(layout: Layout) -> int | None:
    """Kill an etcd that a machined which died without stopping it left running (it holds the node's
    ports); returns its PID. Only a process whose command line names this node's data directory is
    killed, so a PID reused by something else is left alone."""
    pid_file = layout.etcd_pid_file
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    pid_file.unlink(missing_ok=True)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if not any(str(layout.etcd_data_dir).encode() in part for part in cmdline):
        return None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return pid


class EtcdService:
    """The etcd service of one node, and the etcd client access its RPCs share (see module doc)."""

    def __init__(
        self, layout: Layout, state: State, say: Callable[[str], None], clock: Callable[[], datetime]
    ) -> None:
        self.layout = layout
        self.state = state
        self.say = say
        self.clock = clock
        self.data_dir = layout.etcd_data_dir
        self.pki_dir = layout.etcd_pki_dir
        self.snapshot_path = layout.etcd_recovery_snapshot
        self.pid_file = layout.etcd_pid_file
        self.bootstrap_requested = False
        self.recover = False
        self.recover_skip_hash_check = False
        self.running_spec: EtcdSpecSpec | None = None
        """The spec the current etcd process was started from."""
        self._args: list[str] = []
        self._learner_id = 0
        self._voting_endpoints: list[str] = []
        self._certs: tuple[Any, etcdlib.EtcdCerts] | None = None
        self._version: tuple[int, int, int] | None = None

    # --- what the resources say -------------------------------------------------------------------

    def spec(self) -> EtcdSpecSpec:
        spec = self.state.spec_of(ETCD_SPECS, ETCD_ID)
        if spec is None:
            raise etcdlib.EtcdConfigError(
                "no etcd spec: this node is not a configured control plane",
                hint="see `talosctl get etcdspecs` and `talosctl get waits`",
            )
        return spec

    def is_control_plane(self) -> bool:
        machine_type = self.state.spec_of(MACHINE_TYPES, MACHINE_TYPE_ID)
        return machine_type is not None and machine_type.is_control_plane

    def is_init(self) -> bool:
        """``machine.type: init``: the node bootstraps etcd by itself."""
        config = self.state.spec_of(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
        if config is None:
            return False
        v1alpha1 = config.v1alpha1
        return v1alpha1 is not None and v1alpha1.machine is not None and v1alpha1.machine.type == "init"

    def addresses(self) -> etcdlib.EtcdAddresses:
        spec = self.spec()
        return etcdlib.EtcdAddresses(
            spec.advertised_addresses, spec.listen_peer_addresses, spec.listen_client_addresses
        )

    def local_endpoint(self) -> str:
        """This node's etcd from this node: loopback on a node with a network namespace of its own
        (etcd always listens there, whatever ``listenSubnets`` picks), else its own address."""
        host = "127.0.0.1" if self.layout.own_netns else self.layout.address
        return etcdlib.etcd_url(host, etcdlib.CLIENT_PORT)

    def _ensure_certs(self) -> etcdlib.EtcdCerts:
        root = self.state.spec_of(ETCD_ROOT_SECRETS, ETCD_ROOT_ID)
        ca_pair = root.etcd_ca if root is not None else None
        if ca_pair is None or not ca_pair.key:
            raise etcdlib.EtcdConfigError(
                "cluster.etcd.ca has no key: a control plane needs the etcd CA key to issue its certificates",
                hint="use the controlplane.yaml from `talosctl gen config` (cluster.etcd.ca.key)",
            )
        spec = self.spec()
        # Every address etcd advertises or listens on, not only the node's first: a peer that
        # reaches this member by its advertisedSubnets address checks it against the certificate.
        served = [spec.advertised_addresses, spec.listen_peer_addresses, spec.listen_client_addresses]
        addresses = tuple(dict.fromkeys(
            a for a in (self.layout.address, *(a for group in served for a in group))
            if a not in ("0.0.0.0", "::")
        ))  # fmt: skip
        wanted = (ca_pair, spec.name, addresses)
        if self._certs is None or self._certs[0] != wanted:
            certs = etcdlib.issue_certs(
                pki.CertKey(ca_pair.crt, ca_pair.key), hostname=spec.name, addresses=list(addresses),
                shared_loopback=self.layout.address.startswith("127."),
            )  # fmt: skip
            etcdlib.write_pki(self.pki_dir, certs)
            self._certs = (wanted, certs)
        return self._certs[1]

    def client(self, endpoints: list[str], *, timeout: float = 10.0) -> etcdlib.EtcdClient:
        certs = self._ensure_certs()
        return etcdlib.EtcdClient(
            endpoints, ca=certs.ca.crt, cert=certs.admin.crt, key=certs.admin.key, timeout=timeout,
            connect_timeout=min(timeout, 3.0),
        )  # fmt: skip

    def control_plane_endpoints(self, *, include_self: bool = False) -> list[str]:
        """etcd client URLs of the other control planes: discovered, else the configured endpoint."""
        hosts: list[str] = []
        found = self.state.spec_of(ENDPOINTS, DISCOVERED_ENDPOINTS_ID)
        if found is not None:
            hosts.extend(str(a) for a in found.addresses)
        config = self.state.spec_of(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
        host = (
            control_plane_host(config.v1alpha1)
            if config is not None and config.v1alpha1 is not None
            else None
        )
        if host:
            hosts.append(host)
        urls = [etcdlib.etcd_url(h, etcdlib.CLIENT_PORT) for h in dict.fromkeys(hosts)]
        if include_self:
            return list(dict.fromkeys([self.local_endpoint(), *urls]))
        own = {self.local_endpoint()}
        with contextlib.suppress(etcdlib.EtcdConfigError):
            own |= set(self.addresses().client_urls)
        return [u for u in urls if u not in own]

    def data_empty(self) -> bool:
        return not self.data_dir.is_dir() or not any(self.data_dir.iterdir())

    # --- the service --------------------------------------------------------------------------------

    def service(self) -> Service:
        return Service(
            "etcd", self._runner, description="etcd", pre=self._pre, restart=RestartPolicy.FOREVER,
            conditions=(time_sync(self.state), resource_exists(self.state, ETCD_SPECS, ETCD_ID, ETCD_SPEC)),
            health_check=HealthCheck(self._health, initial_delay=0.5, period=5.0, timeout=5.0, startup_period=0.5), stop_timeout=10.0,
        )  # fmt: skip

    def request_bootstrap(self, *, recover: bool, skip_hash_check: bool) -> None:
        self.bootstrap_requested = True
        self.recover = recover
        self.recover_skip_hash_check = skip_hash_check

    async def follow_spec(self, supervisor: Supervisor) -> None:
        """Restart etcd when ``EtcdSpec`` changes under it (runs as long as the node does)."""
        async for event in self.state.watch(ETCD_SPECS.default_namespace, ETCD_SPECS, ETCD_ID):
            running = self.running_spec
            if running is None or not supervisor.is_running("etcd"):
                continue
            if event.resource.metadata.phase is not Phase.RUNNING or event.resource.spec == running:
                continue
            self.say("etcd spec changed: restarting etcd")
            await supervisor.stop("etcd")
            supervisor.start("etcd")

    async def _pre(self) -> None:
        from ichor.etcd import build_args, find_binaries, format_initial_cluster

        self._learner_id = 0
        self._voting_endpoints = []
        spec = self.spec()
        await asyncio.to_thread(self._ensure_certs)
        leftover = kill_leftover_etcd(self.layout)
        if leftover:
            self.say(f"killing etcd left over from the previous boot (PID {leftover})")
        addresses = self.addresses()
        peer_urls = addresses.peer_urls
        if self.recover:
            await asyncio.to_thread(self._restore, spec.name, peer_urls)
        initial_cluster: str | None = None
        initial_state: str | None = None
        if self.data_empty():
            if self.bootstrap_requested or self.is_init():
                initial_cluster = format_initial_cluster((spec.name, u) for u in peer_urls)
                initial_state = "new"
            else:
                initial_cluster = await self._join(spec.name, peer_urls)
                initial_state = "existing"
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        binaries = find_binaries()
        binaries.warn(self.say)
        if self._version is None:
            self._version = await asyncio.to_thread(etcdlib.etcd_version, binaries.etcd)
        args = build_args(
            name=spec.name, data_dir=self.data_dir, pki=etcdlib.PKIPaths(self.pki_dir), addresses=addresses,
            initial_cluster=initial_cluster, initial_cluster_state=initial_state, extra_args=spec.extra_args,
            etcd_version=self._version,
        )  # fmt: skip
        self._args = [str(binaries.etcd), *args]
        self.running_spec = spec

    def _restore(self, name: str, peer_urls: list[str]) -> None:
        from ichor.etcd import format_initial_cluster, restore_snapshot

        info = restore_snapshot(
            self.snapshot_path, self.data_dir, name=name,
            initial_cluster=format_initial_cluster((name, u) for u in peer_urls),
            initial_advertise_peer_urls=",".join(peer_urls), skip_hash_check=self.recover_skip_hash_check,
        )  # fmt: skip
        self.say(
            f"recovering etcd from snapshot: hash {info.hash:08x}, revision {info.revision}, "
            f"total keys {info.total_keys}, total size {info.total_size}"
        )
        self.snapshot_path.unlink(missing_ok=True)
        self.recover = False

    def _bootstrap_addresses(self) -> list[str]:
        """The node's routed addresses but Kubernetes' (as Talos lists them), else its own address."""
        routed = self.state.spec_of(
            NODE_ADDRESSES, filtered_node_address_id(NODE_ADDRESS_ROUTED_ID, NODE_ADDRESS_FILTER_NO_K8S)
        )
        return [str(a.ip) for a in routed.addresses] if routed and routed.addresses else [self.layout.address]

    async def _join(self, name: str, peer_urls: list[str]) -> str:
        """Add this node as a learner through a running member; returns ``--initial-cluster``."""
        from ichor.etcd import format_initial_cluster

        since = self.clock()
        last_nag: float | None = None
        loop = asyncio.get_running_loop()
        try:
            while True:
                if last_nag is None or loop.time() - last_nag >= JOIN_NAG_INTERVAL:
                    last_nag = loop.time()
                    self.say(
                        "etcd is waiting to join the cluster, if this node is the first node in the cluster, "
                        "please run `talosctl bootstrap` against one of the following IPs:"
                    )
                    self.say(f"[{' '.join(self._bootstrap_addresses())}]")
                endpoints = self.control_plane_endpoints()
                try:
                    if not endpoints:
                        raise etcdlib.EtcdUnavailableError(
                            "no other control plane is known yet (none discovered, "
                            "cluster.controlPlane.endpoint names this node)"
                        )
                    members, learner_id = await self._add_member(endpoints, name, peer_urls)
                except etcdlib.EtcdError as err:
                    publish_wait(self.state, WAIT_ID, owner="", waiting_for="etcd to join the cluster",
                                 reason=f"{err}; run `talosctl bootstrap` on one control plane if none runs etcd "
                                        f"yet", now=since)  # fmt: skip
                    await asyncio.sleep(JOIN_BUSY_RETRY if busy(err) else JOIN_RETRY)
                    continue
                self._learner_id = learner_id
                self._voting_endpoints = [u for m in members if m.id != learner_id and not m.is_learner
                                          for u in m.client_urls]  # fmt: skip
                self.say(f"etcd joined the cluster as learner {learner_id:x}")
                return format_initial_cluster(
                    (name if m.id == learner_id else m.name, u) for m in members for u in m.peer_urls
                )
        finally:
            clear_wait(self.state, WAIT_ID, owner="")

    async def _add_member(
        self, endpoints: list[str], name: str, peer_urls: list[str]
    ) -> tuple[list[etcdlib.Member], int]:
        async with self.client(endpoints, timeout=10.0) as client:
            members = await client.member_list()
            for member in members:
                # A member of our name is this node's previous life (its data is gone): replace it.
                if member.name == name:
                    self.say(f"removing stale etcd member {member.id:x} ({name}) before joining again")
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
            self.say("successfully promoted etcd member")
            return

    async def _health(self) -> None:
        async with self.client([self.local_endpoint()], timeout=4.0) as client:
            result = await client.health(self.local_endpoint())
        if not result.healthy:
            raise RuntimeError(result.error or "etcd is not healthy")


class _EtcdRunner:
    """The etcd process, plus (while a learner) the promotion task and the PID file.

    Talos runs etcd as a container and says so in its events (``Started task etcd (PID n) for
    container etcd``, ``Containerd(etcd)``); Ichor's events read the same instead of carrying etcd's
    whole command line."""

    def __init__(self, owner: EtcdService, process: ProcessRunner) -> None:
        self.owner = owner
        self.process = process

    def __str__(self) -> str:
        return "Containerd(etcd)"

    @property
    def pids(self) -> list[int]:
        return self.process.pids

    async def run(self, record: Recorder, stop: asyncio.Event) -> None:
        def record_and_remember(state: ServiceState, message: str) -> None:
            child = self.process.process
            if state is ServiceState.RUNNING and child is not None:
                self.owner.pid_file.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(self.owner.pid_file, f"{child.pid}\n", mode=0o600)
                message = f"Started task etcd (PID {child.pid}) for container etcd"
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
