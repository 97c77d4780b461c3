"""What the machine API asks of the node, answered from resources and the node's parts.

:class:`MachineContext` implements the services' ``NodeContext``: identity (Version, Hostname) and
the generated client configuration and kubeconfig come from resources; config changes go to the
config store; reboot, shutdown and reset to the sequencer; the etcd RPCs to the etcd operations.
It holds no state of its own.
"""

from __future__ import annotations

import contextlib
import os
import platform as _host
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.machined.configstore import ConfigStore
from ichor.machined.cosi import State
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    MEMBERS,
    OS_ROOT_ID,
    OS_ROOT_SECRETS,
)
from ichor.machined.server._etcd_ops import EtcdOperations
from ichor.machined.services import Supervisor
from ichor.machinery import pki
from ichor.machinery.constants import TALOS_VERSION

__all__ = ["Lifecycle", "MachineContext"]


class Lifecycle(Protocol):
    """The sequencer's side: what reboot, shutdown and reset requests go to."""

    def request_reboot(self, actor_id: str, mode: int = 0) -> None: ...

    def request_shutdown(self, actor_id: str, force: bool = False) -> None: ...

    def request_reset(self, actor_id: str, request: machine_pb2.ResetRequest) -> None: ...


class MachineContext:
    def __init__(
        self,
        *,
        layout: Layout,
        state: State,
        supervisor: Supervisor,
        events: EventBus,
        store: ConfigStore,
        lifecycle: Lifecycle,
        etcd: EtcdOperations,
        clock: Callable[[], datetime],
        say: Callable[[str], None] = lambda _: None,
        boot_id: str = "",
    ) -> None:
        self.layout = layout
        self.boot_id = boot_id or str(uuid.uuid4())
        """This node boot's id, what ``/proc/sys/kernel/random/boot_id`` reads on the node."""
        self.say = say
        """Writes a line on the node's console (``talosctl dmesg``)."""
        self.state = state
        self.supervisor = supervisor
        self.events = events
        self.etcd = etcd
        self._store = store
        self._lifecycle = lifecycle
        self._clock = clock

    # --- identity --------------------------------------------------------------------------------

    def hostname(self) -> str:
        status = self.state.spec_of(HOSTNAME_STATUSES, HOSTNAME_STATUS_ID)
        return str(status.fqdn) if status is not None else ""

    def is_control_plane(self) -> bool:
        machine_type = self.state.spec_of(MACHINE_TYPES, MACHINE_TYPE_ID)
        return machine_type is not None and machine_type.is_control_plane

    def process_root(self) -> int:
        return os.getpid()

    def version(self) -> machine_pb2.Version:
        from ichor import __version__

        arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(_host.machine(), _host.machine())
        reply = machine_pb2.Version(
            version=machine_pb2.VersionInfo(
                tag=TALOS_VERSION, sha=f"ichor-{__version__}", built="",
                go_version=f"python{_host.python_version()}", os="linux", arch=arch,
            ),
            platform=machine_pb2.PlatformInfo(name=self.layout.platform.value, mode=self.layout.platform.mode),
        )  # fmt: skip
        active = self._store.active
        if active is not None:
            features = active.config.machine.features if active.config.machine is not None else None
            reply.features.rbac = bool(features is not None and features.rbac)
        return reply

    # --- configuration ---------------------------------------------------------------------------

    async def apply_configuration(
        self, request: machine_pb2.ApplyConfigurationRequest
    ) -> machine_pb2.ApplyConfiguration:
        return await self._store.apply(request)

    def _os_ca(self) -> pki.CertKey:
        root = self.state.spec_of(OS_ROOT_SECRETS, OS_ROOT_ID)
        if root is None or root.issuing_ca is None:
            raise GRPCError(Status.FAILED_PRECONDITION, "the node has no OS CA yet (no machine config)")
        return pki.CertKey(root.issuing_ca.crt, root.issuing_ca.key)

    def generate_client_configuration(
        self, roles: list[str], ttl: timedelta
    ) -> machine_pb2.GenerateClientConfiguration:
        from ichor.machinery.clientconfig import Context, TalosConfig

        active = self._store.active
        if not self.is_control_plane() or active is None:
            raise GRPCError(
                Status.FAILED_PRECONDITION,
                "client configuration can only be generated on a control plane node",
            )
        ca = self._os_ca()
        key = pki.new_ed25519_key()
        crt = pki.issue_certificate(
            ca, key, organizations=roles, common_name=None, ttl=ttl, server=False, client=True
        )
        cluster = (active.config.cluster.cluster_name if active.config.cluster else None) or "talos"
        name = f"{roles[0].removeprefix('os:')}@{cluster}" if len(roles) == 1 else cluster
        pair = pki.CertKey(crt, key)
        talosconfig = TalosConfig(context=name, contexts={name: Context(endpoints=[], nodes=[], ca=pki.CertKey(ca.crt, b"").crt_b64(),
                                                                          crt=pair.crt_b64(), key=pair.key_b64())})  # fmt: skip
        return machine_pb2.GenerateClientConfiguration(
            ca=ca.crt, crt=crt, key=key, talosconfig=talosconfig.to_yaml().encode()
        )

    def kubeconfig(self) -> bytes:
        """The admin kubeconfig as Talos streams it: a tar.gz holding one file ``kubeconfig``."""
        from ichor.machinery.kubeconfig import admin_kubeconfig, kubeconfig_archive

        active = self._store.active
        if not self.is_control_plane() or active is None:
            raise GRPCError(Status.UNIMPLEMENTED, "kubeconfig is only available on control plane nodes")
        return kubeconfig_archive(admin_kubeconfig(active.container, now=self._clock()), now=self._clock())

    def generate_configuration(
        self, request: machine_pb2.GenerateConfigurationRequest
    ) -> machine_pb2.GenerateConfiguration:
        """A new machine config and talosconfig from ``request``, with this node's secrets."""
        from ichor.machined.server._genconfig import generate_configuration

        active = self._store.active
        node_type = str(self.state.spec_of(MACHINE_TYPES, MACHINE_TYPE_ID) or "")
        return generate_configuration(
            request, node_type=node_type, node_config=active.text if active is not None else None,
            now=self._clock(),
        )  # fmt: skip

    def time_servers(self) -> list[str]:
        """``machine.time.servers`` of the running config (empty: none named)."""
        active = self._store.active
        time = (
            active.config.machine.time if active is not None and active.config.machine is not None else None
        )
        return [str(s) for s in (time.servers or [])] if time is not None else []

    # --- lifecycle -------------------------------------------------------------------------------

    def request_reboot(self, actor_id: str, mode: int = 0) -> None:
        self._lifecycle.request_reboot(actor_id, mode)

    def request_shutdown(self, actor_id: str, force: bool = False) -> None:
        self._lifecycle.request_shutdown(actor_id, force)

    async def check_reset(self, request: machine_pb2.ResetRequest) -> None:
        """Refuse a reset that could not be carried out as asked, before it starts."""
        if request.graceful:
            await self.etcd.check_graceful_reset()

    def request_reset(self, actor_id: str, request: machine_pb2.ResetRequest) -> None:
        self._lifecycle.request_reset(actor_id, request)

    # --- cluster health --------------------------------------------------------------------------

    def member_entries(self) -> list[tuple[str, list[str]]]:
        """The discovered cluster members, ``(machine type, addresses)`` each, for health checks."""
        return [
            (m.spec.machine_type, [str(a) for a in m.spec.addresses])
            for m in self.state.list(MEMBERS.default_namespace, MEMBERS)
        ]

    @contextlib.asynccontextmanager
    async def self_client(self) -> AsyncIterator[Any]:
        """A short-lived os:admin client of this control plane's own apid (server-side health checks)."""
        from ichor.client import Client

        os_ca = self._os_ca()
        if not os_ca.has_key:
            raise GRPCError(
                Status.FAILED_PRECONDITION, "run the health check against a control plane node (-n)"
            )
        pair = pki.new_keypair(os_ca, organizations=["os:admin"], common_name=f"{self.hostname()}-health",
                               ttl=timedelta(hours=1), client=True, server=False, now=self._clock())  # fmt: skip
        async with Client(
            endpoints=[self.layout.address], ca=os_ca.crt, crt=pair.crt, key=pair.key
        ) as client:
            yield client
