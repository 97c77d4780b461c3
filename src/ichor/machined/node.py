"""A node: boot, config acquisition, maintenance mode, services and lifecycle of one machined.

Boot follows Talos: acquire the machine config (``/system/state/config.yaml`` on STATE, else the
``talos.config``-style source the node was given, else **maintenance mode**: a TLS API on :50000
that accepts ``talosctl apply-config --insecure``), save it, then start the services — machined's
own API on ``/system/run/machined/machine.sock`` and apid on ``<address>:50000``. Reboot, shutdown
and reset end :meth:`Node.run` with the exit code the node's launcher understands
(:data:`~ichor.machined.platform.EXIT_REBOOT`, :data:`~ichor.machined.platform.EXIT_POWEROFF`);
state under the node root survives exactly as a disk would.

Everything the node prints goes to its console log (``talosctl dmesg``) and to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform as _host
import shutil
import ssl
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server

from ichor.api.gen.machine import machine_pb2
from ichor.machined import _certs
from ichor.machined.cluster import DiscoveryServiceController, cluster_controllers, register_cluster_types
from ichor.machined.cosi import Registry, State, clear_wait, publish_wait
from ichor.machined.etcd import NodeEtcd, time_sync_condition
from ichor.machined.events import EventBus
from ichor.machined.platform import EXIT_POWEROFF, EXIT_REBOOT, Layout
from ichor.machined.resources import (
    API_CERTIFICATES,
    API_CERTIFICATES_ID,
    MACHINE_CONFIGS,
    MACHINE_STATUSES,
    SERVICES,
    TIME_STATUSES,
    ApiCertificatesSpec,
    MachineConfigSpec,
    MachineStage,
    MachineStatusSpec,
    PEMCertificate,
    PEMCertificateAndKey,
    ServiceSpec,
    TimeStatusSpec,
    register_node_types,
)
from ichor.machined.resources._runtime import MachineStatusStatus
from ichor.machined.server._cluster import ClusterService
from ichor.machined.server._cosi import StateService, fixed_roles, roles_from_metadata
from ichor.machined.server._machine import MachineService, UnimplementedMachineService
from ichor.machined.services import RestartPolicy, Service, ServiceInfo, Supervisor, goroutine
from ichor.machinery import pki
from ichor.machinery.configdiff import can_apply_immediately, unified_diff
from ichor.machinery.constants import TALOS_VERSION
from ichor.machinery.errors import MachineryError
from ichor.machinery.files import write_atomic
from ichor.machinery.yamlio import to_plain

log = logging.getLogger("ichor.machined")

APPLY_MODES = machine_pb2.ApplyConfigurationRequest
MODE_NAMES = {APPLY_MODES.REBOOT: "reboot", APPLY_MODES.AUTO: "auto", APPLY_MODES.NO_REBOOT: "no_reboot",
              APPLY_MODES.STAGED: "staged", APPLY_MODES.TRY: "try"}  # fmt: skip


class Console:
    """The node's console: ``[talos] <message>`` lines in the console log (``dmesg``) and on stderr."""

    def __init__(self, path: Path, clock: Callable[[], datetime]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = path.open("a", encoding="utf-8")
        self._clock = clock

    def print(self, message: str) -> None:
        stamp = self._clock().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for line in message.splitlines() or [""]:
            text = f"{stamp} [talos] {line}\n"
            self._file.write(text)
            sys.stderr.write(text)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


@dataclass
class _Loaded:
    container: Any  # ichor.machinery.config.Container
    text: str

    @property
    def v1alpha1(self) -> dict[str, Any]:
        doc = self.container.v1alpha1
        return to_plain(doc.raw) if doc is not None else {}


def _load(text: str, source: str) -> _Loaded:
    from ichor.machinery.config import Mode, load_config, validate_or_raise

    container = load_config(text, source=source)
    if container.v1alpha1 is None:
        raise MachineryError(f"{source}: the config has no v1alpha1 document (machine/cluster)")
    # Process nodes install nothing and run no container runtime: Talos's "cloud" rules fit them.
    validate_or_raise(container, Mode.CLOUD)
    loaded = _Loaded(container, text)
    _check_complete(loaded, source)
    return loaded


def _check_complete(loaded: _Loaded, source: str) -> None:
    """What boot needs beyond validation: a usable OS CA, a token, a cluster endpoint.

    A damaged file (truncated by a crash or an editor) can still be valid YAML that validates;
    booting it would leave a node without an API. Such a config is "incomplete", and the node goes
    to maintenance mode instead, as Talos does with an incomplete config.
    """
    doc = loaded.v1alpha1
    machine, cluster = doc.get("machine") or {}, doc.get("cluster") or {}
    ca = machine.get("ca") or {}
    try:
        pair = pki.CertKey.from_b64(str(ca.get("crt", "")), str(ca.get("key", "")), what="machine.ca")
    except MachineryError as exc:
        raise MachineryError(f"{source}: incomplete config: machine.ca: {exc}") from None
    if machine.get("type") in ("controlplane", "init") and not pair.has_key:
        raise MachineryError(f"{source}: incomplete config: machine.ca.key is required on a control plane")
    if not machine.get("token"):
        raise MachineryError(f"{source}: incomplete config: machine.token is empty")
    if not (cluster.get("controlPlane") or {}).get("endpoint"):
        raise MachineryError(f"{source}: incomplete config: cluster.controlPlane.endpoint is empty")


class Node:
    """One Talos node on a platform; :meth:`run` returns the launcher exit code."""

    def __init__(
        self,
        layout: Layout,
        *,
        config_source: Path | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.layout = layout
        self.config_source = config_source
        self._clock = clock or (lambda: datetime.now(UTC))
        self.state = State(clock=self._clock)
        self.registry = Registry()
        self.events = EventBus(clock=self._clock)
        self.console: Console | None = None
        self.supervisor: Supervisor  # set in run()
        self.config: _Loaded | None = None
        self._maintenance_applied: asyncio.Future[_Loaded] | None = None
        self._stop: asyncio.Future[int] | None = None
        self._try_revert: asyncio.TimerHandle | None = None
        self._api_certs: tuple[str, _certs.ApiCertificates] | None = None
        self.etcd: NodeEtcd | None = None
        self.maintenance_replied = asyncio.Event()
        self._resetting = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._discovery: DiscoveryServiceController | None = None

    # --- small facts ------------------------------------------------------------------------------

    def say(self, message: str) -> None:
        assert self.console is not None
        self.console.print(message)

    def hostname(self) -> str:
        from ichor.machined.controllers import hostname_of

        return hostname_of(self.config.v1alpha1 if self.config else {}, self.layout.address)

    def machine_type(self) -> str:
        from ichor.machined.controllers import machine_type_of

        return "unknown" if self.config is None else str(machine_type_of(self.config.v1alpha1))

    def v1alpha1(self) -> dict[str, Any]:
        return self.config.v1alpha1 if self.config else {}

    def now(self) -> datetime:
        return self._clock()

    def process_root(self) -> int:
        import os

        return os.getpid()

    def version(self) -> machine_pb2.Version:
        from ichor import __version__

        arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(_host.machine(), _host.machine())
        reply = machine_pb2.Version(
            version=machine_pb2.VersionInfo(
                tag=TALOS_VERSION, sha=f"ichor-{__version__}", built="",
                go_version=f"python{_host.python_version()}", os="linux", arch=arch,
            ),
            platform=machine_pb2.PlatformInfo(name="container", mode="container"),
        )  # fmt: skip
        if self.config is not None:
            rbac = (self.config.v1alpha1.get("machine", {}).get("features") or {}).get("rbac", False)
            reply.features.rbac = bool(rbac)
        return reply

    # --- resources -------------------------------------------------------------------------------

    def _put(self, rtype: Any, rid: str, spec: Any) -> None:
        from ichor.machined.cosi import NotFoundError

        try:
            current = self.state.get(rtype.default_namespace, rtype.type, rid)
        except NotFoundError:
            self.state.create(rtype.new(rid, spec))
        else:
            self.state.update(current.with_spec(spec))

    def _stage(self, stage: MachineStage, ready: bool = False) -> None:
        self._put(MACHINE_STATUSES, "machine", MachineStatusSpec(stage, MachineStatusStatus(ready=ready)))
        proto_stage = machine_pb2.MachineStatusEvent.MachineStage.Value(stage.name)
        self.events.publish(machine_pb2.MachineStatusEvent(stage=proto_stage))

    def _on_service_change(self, info: ServiceInfo) -> None:
        spec = ServiceSpec(
            running=info.running, healthy=bool(info.health.healthy), unknown=info.health.unknown
        )
        self._put(SERVICES, info.id, spec)
        # `talosctl get waits` says what each waiting service waits for, and since when.
        wait_id = f"service-{info.id}"
        if info.waiting_for is not None:
            last_event = info.events[-1].message if info.events else ""
            publish_wait(self.state, wait_id, owner="", waiting_for=f"service {info.id}: {info.waiting_for}",
                         reason=last_event or f"Waiting for {info.waiting_for}",
                         now=info.waiting_since or self._clock())  # fmt: skip
        else:
            clear_wait(self.state, wait_id, owner="")
        last = info.events[-1] if info.events else None
        action = machine_pb2.ServiceStateEvent.Action.Value(info.state.name)
        self.events.publish(
            machine_pb2.ServiceStateEvent(
                service=info.id, action=action, message=last.message if last else ""
            )
        )

    def _publish_config(self, loaded: _Loaded, rid: str = "v1alpha1") -> None:
        # MachineType and HostnameStatus follow from it through their controllers.
        self._put(MACHINE_CONFIGS, rid, MachineConfigSpec(loaded.text))

    # --- lifecycle requests (from the API) ----------------------------------------------------------

    def _finish(self, code: int) -> None:
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(code)

    def request_reboot(self, actor_id: str, mode: int = 0) -> None:
        self.events.publish(
            machine_pb2.SequenceEvent(sequence="reboot", action=machine_pb2.SequenceEvent.START),
            actor_id=actor_id,
        )
        asyncio.get_running_loop().call_later(0.2, self._finish, EXIT_REBOOT)

    def request_shutdown(self, actor_id: str, force: bool = False) -> None:
        self.events.publish(
            machine_pb2.SequenceEvent(sequence="shutdown", action=machine_pb2.SequenceEvent.START),
            actor_id=actor_id,
        )
        asyncio.get_running_loop().call_later(0.2, self._finish, EXIT_POWEROFF)

    def request_reset(self, actor_id: str, request: machine_pb2.ResetRequest) -> None:
        self.events.publish(
            machine_pb2.SequenceEvent(sequence="reset", action=machine_pb2.SequenceEvent.START),
            actor_id=actor_id,
        )
        labels = [p.label for p in request.system_partitions_to_wipe if p.wipe] or [
            "STATE",
            "EPHEMERAL",
            "META",
        ]

        async def leave_then_wipe() -> None:
            self._resetting = True
            self._stage(MachineStage.RESETTING)
            try:
                await leave()
            except Exception as err:  # a reset asked for is carried out even if leaving went wrong
                self.say(f"resetting: leaving the cluster failed ({err!r}); wiping anyway")
            wipe_then_finish()

        async def leave() -> None:
            if request.graceful and self.etcd is not None and self.machine_type() == "controlplane":
                self.say("resetting: leaving etcd (graceful)")
                problem = await self.etcd.leave_before_reset()
                if problem:
                    self.say(f"resetting: could not leave etcd gracefully: {problem}")
            if self._discovery is not None:
                # The discovery controller deletes this node's affiliate on "resetting".
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(5):
                        await self._discovery.left.wait()
            if self.supervisor is not None and self.etcd is not None:
                await self.supervisor.stop("etcd")

        def wipe_then_finish() -> None:
            self.say(f"resetting: wiping {', '.join(labels)}")
            for label in labels:
                target = self.layout.partition(label)
                for child in target.iterdir() if target.exists() else ():
                    if child == self.layout.console_log.parent and label == "EPHEMERAL":
                        continue  # keep the console log readable across a reset, as a serial console is
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
            self._finish(EXIT_REBOOT if request.reboot else EXIT_POWEROFF)

        loop = asyncio.get_running_loop()

        def start() -> None:
            task = loop.create_task(leave_then_wipe(), name="reset")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        loop.call_later(0.2, start)

    # --- configuration ---------------------------------------------------------------------------

    def generate_client_configuration(
        self, roles: list[str], ttl: timedelta
    ) -> machine_pb2.GenerateClientConfiguration:
        from ichor.machinery.clientconfig import Context, TalosConfig

        if self.machine_type() != "controlplane" or self.config is None:
            raise GRPCError(
                Status.FAILED_PRECONDITION,
                "client configuration can only be generated on a control plane node",
            )
        ca = self._os_ca()
        key = pki.new_ed25519_key()
        crt = pki.issue_certificate(
            ca, key, organizations=roles, common_name=None, ttl=ttl, server=False, client=True
        )
        cluster = str(self.config.v1alpha1.get("cluster", {}).get("clusterName") or "talos")
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

        if self.machine_type() != "controlplane" or self.config is None:
            raise GRPCError(Status.UNIMPLEMENTED, "kubeconfig is only available on control plane nodes")
        return kubeconfig_archive(
            admin_kubeconfig(self.config.container, now=self._clock()), now=self._clock()
        )

    def _member_entries(self) -> list[tuple[str, list[str]]]:
        """The discovered cluster members, ``(machine type, addresses)`` each, for health checks."""
        from ichor.machined.cluster._types import MEMBERS

        return [
            (m.spec.machine_type, [str(a) for a in m.spec.addresses])
            for m in self.state.list(MEMBERS.default_namespace, MEMBERS)
        ]

    @contextlib.asynccontextmanager
    async def _self_client(self) -> AsyncIterator[Any]:
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

    def _os_ca(self) -> pki.CertKey:
        assert self.config is not None
        ca = self.config.v1alpha1.get("machine", {}).get("ca") or {}
        return pki.CertKey.from_b64(ca.get("crt", ""), ca.get("key", ""), what="machine.ca")

    async def apply_configuration(
        self, request: machine_pb2.ApplyConfigurationRequest
    ) -> machine_pb2.ApplyConfiguration:
        try:
            new = _load(request.data.decode("utf-8", errors="replace"), "ApplyConfiguration")
        except MachineryError as exc:
            problems = getattr(exc, "problems", [])
            detail = "\n".join(["", *(f"* {p}" for p in problems)]) if problems else ""
            raise GRPCError(
                Status.INVALID_ARGUMENT, f"configuration validation failed: {exc}{detail}"
            ) from None
        if self._maintenance_applied is not None:
            return self._apply_in_maintenance(request, new)
        assert self.config is not None
        old = self.config
        check = can_apply_immediately(old.v1alpha1, new.v1alpha1)
        mode = request.mode
        if mode in (APPLY_MODES.NO_REBOOT, APPLY_MODES.TRY) and not check.immediate:
            raise GRPCError(
                Status.INVALID_ARGUMENT,
                "this config change can't be applied in immediate mode\n" + check.explain()
                + "\ndiff: " + unified_diff(old.text, new.text),
            )  # fmt: skip
        if mode == APPLY_MODES.AUTO:
            mode = APPLY_MODES.NO_REBOOT if check.immediate else APPLY_MODES.REBOOT
        details = {
            APPLY_MODES.NO_REBOOT: "Applied configuration without a reboot",
            APPLY_MODES.REBOOT: "Applied configuration with a reboot",
            APPLY_MODES.STAGED: "Staged configuration to be applied after the next reboot",
            APPLY_MODES.TRY: "Applied configuration without a reboot",
        }[mode]
        if mode == APPLY_MODES.REBOOT and request.mode == APPLY_MODES.AUTO:
            details += ": " + check.explain()
        timeout = (
            request.try_mode_timeout.ToTimedelta()
            if request.HasField("try_mode_timeout")
            else timedelta(minutes=1)
        )
        if mode == APPLY_MODES.TRY:
            details += f"\nThe config is applied in 'try' mode and will be automatically reverted back in {_go_duration(timeout)}"
        if request.dry_run:
            diff = unified_diff(old.text, new.text) or "No changes."
            return machine_pb2.ApplyConfiguration(
                mode=mode,
                mode_details=f"Dry run summary:\n{details} (skipped in dry-run).\nConfig diff:\n{diff}",
            )
        warnings = self._warnings(new)
        if mode != APPLY_MODES.TRY:
            write_atomic(self.layout.config_file, new.text, mode=0o600)
        if mode in (APPLY_MODES.NO_REBOOT, APPLY_MODES.TRY):
            self.config = new
            self._publish_config(new)
            self.say(f"applied configuration in {MODE_NAMES[mode]} mode")
            if mode == APPLY_MODES.TRY:
                self._schedule_revert(old, timeout)
        elif mode == APPLY_MODES.REBOOT:
            self.say("configuration applied, rebooting")
            self.request_reboot("")
        else:
            self.say("configuration staged for the next boot")
        return machine_pb2.ApplyConfiguration(mode=mode, mode_details=details, warnings=warnings)

    def _schedule_revert(self, old: _Loaded, timeout: timedelta) -> None:
        if self._try_revert is not None:
            self._try_revert.cancel()

        def revert() -> None:
            self.config = old
            self._publish_config(old)
            self.say("try mode timeout: configuration reverted")

        self._try_revert = asyncio.get_running_loop().call_later(timeout.total_seconds(), revert)

    @staticmethod
    def _warnings(loaded: _Loaded) -> list[str]:
        from ichor.machinery.config import Mode, validate

        return list(validate(loaded.container, Mode.CLOUD).warnings)

    def _apply_in_maintenance(
        self, request: machine_pb2.ApplyConfigurationRequest, new: _Loaded
    ) -> machine_pb2.ApplyConfiguration:
        assert self._maintenance_applied is not None
        if request.mode not in (APPLY_MODES.AUTO, APPLY_MODES.REBOOT, APPLY_MODES.TRY):
            name = MODE_NAMES.get(request.mode, str(request.mode)).replace("_", "-")
            raise GRPCError(
                Status.UNIMPLEMENTED,
                f"apply configuration --mode='{name}' is not supported in maintenance mode",
            )
        if request.dry_run:
            return machine_pb2.ApplyConfiguration(
                mode=request.mode,
                mode_details="Dry run summary:\nNode is running in maintenance mode and does not have a config yet.",
            )
        # The reply is built before the maintenance service is told to go: it closes its listener
        # shortly after, and validation for the warnings can take longer than that under load.
        reply = machine_pb2.ApplyConfiguration(mode=request.mode, mode_details="Applied configuration with a reboot",
                                               warnings=self._warnings(new))  # fmt: skip
        self._put(MACHINE_CONFIGS, "maintenance", MachineConfigSpec(new.text))
        if not self._maintenance_applied.done():
            self._maintenance_applied.set_result(new)
        return reply

    def _acquire(self) -> _Loaded | None:
        sources: list[tuple[Path, str]] = [(self.layout.config_file, "STATE")]
        if self.config_source is not None:
            sources.append((self.config_source, str(self.config_source)))
        for path, name in sources:
            if not path.exists():
                continue
            try:
                loaded = _load(path.read_text(encoding="utf-8"), name)
            except (MachineryError, OSError, UnicodeDecodeError) as exc:
                self.say(f"failed to load config from {name}: {exc}")
                self.events.publish(machine_pb2.ConfigLoadErrorEvent(error=str(exc)))
                continue
            self.say(f"Talos machine config loaded successfully from {name}")
            return loaded
        return None

    # --- servers ---------------------------------------------------------------------------------

    async def _maintenance(self) -> _Loaded:
        """Serve the insecure API on :50000 until a valid config arrives."""
        self._stage(MachineStage.MAINTENANCE)
        self._maintenance_applied = asyncio.get_running_loop().create_future()
        self.maintenance_replied = asyncio.Event()
        cert = _certs.maintenance_certificate(address=self.layout.address, hostname=self.hostname())
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        pki.load_into_ssl_context(ctx, cert.crt, cert.key)
        ctx.set_alpn_protocols(["h2"])
        reader = fixed_roles("os:reader")
        from ichor.machined.server._storage import StorageService

        server = Server(
            [MaintenanceService(self), StateService(self.state, roles_of=reader), StorageService(self.layout)]
        )
        await server.start(self.layout.address, 50000, ssl=ctx)
        fingerprint = pki.spki_fingerprint(cert.crt)
        publish_wait(self.state, "machine-config", owner="", waiting_for="a machine config",
                     reason=f"maintenance mode: apply one with `talosctl apply-config --insecure --nodes "
                            f"{self.layout.address} --file <config.yaml>`", now=self._clock())  # fmt: skip
        self.say(
            "entering maintenance service\n"
            f"this machine is reachable at:\n\t{self.layout.address}\n"
            f"server certificate issued, fingerprint: {fingerprint}\n"
            "upload configuration using talosctl:\n"
            f"\ttalosctl apply-config --insecure --nodes {self.layout.address} --file <config.yaml>\n"
            "or apply configuration using talosctl interactive installer:\n"
            f"\ttalosctl apply-config --insecure --nodes {self.layout.address} --mode=interactive\n"
            "optionally with node fingerprint check:\n"
            f"\ttalosctl apply-config --insecure --nodes {self.layout.address} --cert-fingerprint '{fingerprint}' --file <config.yaml>"
        )  # fmt: skip
        try:
            loaded = await self._maintenance_applied
        finally:
            # Closing the server cancels calls in flight: let the ApplyConfiguration reply leave first
            # (only when a config arrived; a shutdown in maintenance mode has no reply to wait for).
            applied = self._maintenance_applied
            # (cancelling this coroutine cancels the awaited future too: that is a shutdown, not a config)
            if applied is not None and applied.done() and not applied.cancelled():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(10):
                        await self.maintenance_replied.wait()
                await asyncio.sleep(0.05)
            server.close()
            await server.wait_closed()
        self._maintenance_applied = None
        clear_wait(self.state, "machine-config", owner="")
        self.say("configuration applied in maintenance mode")
        return loaded

    def _services(self) -> list[Service]:
        assert self.config is not None
        # Every configured node answers the etcd RPCs (workers with Talos's "only on control planes").
        self.etcd = NodeEtcd(self)
        roles = roles_from_metadata

        async def machined(log_file: IO[str]) -> None:
            sock = self.layout.machined_socket
            sock.unlink(missing_ok=True)
            from ichor.machined.server._inspect import InspectService
            from ichor.machined.server._storage import StorageService

            server = Server(
                [
                    MachineService(self, roles_of=roles),
                    StateService(self.state, roles_of=roles),
                    StorageService(self.layout),
                    ClusterService(self._self_client, roles_of=roles, members=self._member_entries),
                    InspectService(self.runtime, roles_of=roles),
                ]
            )
            await server.start(path=str(sock))
            log_file.write(f"serving machine API on {sock}\n")
            log_file.flush()
            try:
                await asyncio.Event().wait()
            finally:
                server.close()
                await server.wait_closed()
                sock.unlink(missing_ok=True)
                if sock.parent != self.layout.path("/system/run/machined"):
                    with contextlib.suppress(OSError):  # the short stand-in directory, if now empty
                        sock.parent.rmdir()

        async def apid(log_file: IO[str]) -> None:
            from ichor.machined.apid import Apid

            machine = self.config.v1alpha1.get("machine", {}) if self.config else {}
            certs = await self._api_certificates(machine)
            rbac = bool((machine.get("features") or {}).get("rbac", False))
            server = Apid(
                address=self.layout.address, machined_socket=self.layout.machined_socket,
                server_cert=certs.server, accepted_cas=certs.accepted_cas, client_cert=certs.client, rbac=rbac,
                local_addresses=[self.hostname()],
            )  # fmt: skip
            log_file.write(f"apid serving on {self.layout.address}:50000\n")
            log_file.flush()
            await server.serve()

        async def trustd(log_file: IO[str]) -> None:
            from ichor.machined import trustd as trust

            machine = self.config.v1alpha1.get("machine", {}) if self.config else {}
            certs = await self._api_certificates(machine)
            service = trust.SecurityService(self._os_ca(), str(machine.get("token", "")), certs.accepted_cas)
            log_file.write(f"trustd serving on {self.layout.address}:{trust.TRUSTD_PORT}\n")
            log_file.flush()
            await trust.serve(self.layout.address, certs.server, service)

        services = [
            Service("machined", goroutine(machined), description="Machine API", restart=RestartPolicy.FOREVER),
            Service("apid", goroutine(apid), description="Talos API proxy", depends_on=("machined",),
                    restart=RestartPolicy.FOREVER),
        ]  # fmt: skip
        if self.machine_type() == "controlplane":
            services.append(Service("trustd", goroutine(trustd), description="Trust daemon",
                                    restart=RestartPolicy.FOREVER,
                                    conditions=(time_sync_condition(self.state),)))  # fmt: skip
            services.append(self.etcd.service())
        return services

    async def _api_certificates(self, machine: dict[str, Any]) -> _certs.ApiCertificates:
        """Control planes sign their own; workers ask the control planes' trustd (no OS CA key).

        Issued once per config: apid and trustd serve the same server certificate.
        """
        key = self.config.text if self.config else ""
        if self._api_certs is None or self._api_certs[0] != key:
            certs = await self._issue_api_certificates(machine)
            self._api_certs = (key, certs)
            self._put(API_CERTIFICATES, API_CERTIFICATES_ID, ApiCertificatesSpec(
                accepted_cas=tuple(PEMCertificate(ca) for ca in certs.accepted_cas),
                client=PEMCertificateAndKey(certs.client.crt, certs.client.key) if certs.client else None,
                server=PEMCertificateAndKey(certs.server.crt, certs.server.key),
            ))  # fmt: skip
        return self._api_certs[1]

    async def _issue_api_certificates(self, machine: dict[str, Any]) -> _certs.ApiCertificates:
        from urllib.parse import urlsplit

        from ichor.machined import trustd as trust

        os_ca = self._os_ca()
        sans = [str(s) for s in machine.get("certSANs") or []]
        if os_ca.has_key:
            return _certs.issue_api_certificates(
                os_ca, address=self.layout.address, hostname=self.hostname(), cert_sans=sans
            )
        endpoint = (
            str((self.config.v1alpha1.get("cluster", {}).get("controlPlane") or {}).get("endpoint", ""))
            if self.config
            else ""
        )
        host = urlsplit(endpoint).hostname
        if not host:
            raise RuntimeError(
                "cluster.controlPlane.endpoint has no host: cannot reach trustd for a certificate"
            )
        server, accepted = await trust.request_server_certificate(
            [host], os_ca_crt=os_ca.crt, token=str(machine.get("token", "")), hostname=self.hostname(),
            address=self.layout.address,
        )  # fmt: skip
        return _certs.ApiCertificates(server=server, client=None, accepted_cas=(accepted,))

    # --- run -------------------------------------------------------------------------------------

    async def run(self) -> int:
        self.layout.ensure()
        self.console = Console(self.layout.console_log, self._clock)
        self._stop = asyncio.get_running_loop().create_future()
        register_node_types(self.registry)
        register_cluster_types(self.registry)
        self.registry.publish(self.state)
        # A process node keeps the host's time: Talos in a container reports it synced, sync disabled.
        self._put(TIME_STATUSES, "node", TimeStatusSpec(synced=True, epoch=1, sync_disabled=True))
        self.say(
            f"Ichor {TALOS_VERSION}-compatible node booting on {self.layout.address} (root {self.layout.root})"
        )
        self._stage(MachineStage.BOOTING)
        from ichor.machined import controllers
        from ichor.machined.cosi import Runtime

        self.runtime = runtime = Runtime(
            self.state, registry=self.registry, clock=self._clock, log_path=self.layout.controller_runtime_log
        )
        runtime.register(controllers.machine_type_controller())
        runtime.register(controllers.hostname_controller(self.layout))
        runtime.register(controllers.node_address_controller(self.layout))
        runtime.register(controllers.address_status_controller(self.layout))
        runtime.register(controllers.os_root_controller())
        runtime.register(controllers.cert_san_controller())
        for controller in cluster_controllers(self.layout):
            if isinstance(controller, DiscoveryServiceController):
                self._discovery = controller
            runtime.register(controller)
        # Owned here and cancelled in the finally below: it lives exactly as long as the boot.
        controller_runtime = asyncio.get_running_loop().create_task(runtime.run(), name="controller-runtime")
        try:
            async with Supervisor(
                self.layout, clock=self._clock, on_change=self._on_service_change
            ) as supervisor:
                self.supervisor = supervisor
                loaded = self._acquire()
                if loaded is None:
                    loaded = await self._race_stop(self._maintenance())
                    if loaded is None:
                        return await self._stop
                self.config = loaded
                write_atomic(self.layout.config_file, loaded.text, mode=0o600)
                self._publish_config(loaded)
                self.say(f"booting as {self.machine_type()} {self.hostname()}")
                for service in self._services():
                    supervisor.load(service)
                supervisor.start_all()
                self._stage(MachineStage.RUNNING, ready=True)
                code = await self._stop
                if not self._resetting:
                    # A reset stays "resetting" to the end: the discovery controller publishes this
                    # node again as soon as the stage is anything else.
                    self._stage(MachineStage.REBOOTING if code == EXIT_REBOOT else MachineStage.SHUTTING_DOWN)
                self.say("stopping all services")
                await supervisor.stop_all()
                return code
        finally:
            controller_runtime.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await controller_runtime
            self.say("node process exiting")
            self.console.close()

    async def _race_stop(self, work: Any) -> Any:
        assert self._stop is not None
        task = asyncio.ensure_future(work)
        done, _ = await asyncio.wait({task, self._stop}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None


def _go_duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


class MaintenanceService(UnimplementedMachineService):  # type: ignore[misc,valid-type]
    """The maintenance-mode subset (API spec §6): ApplyConfiguration for anyone, admin RPCs refused."""

    def __init__(self, node: Node) -> None:
        self._node = node

    async def ApplyConfiguration(self, stream: Any) -> None:
        request = await stream.recv_message()
        try:
            reply = await self._node.apply_configuration(request)
            await stream.send_message(machine_pb2.ApplyConfigurationResponse(messages=[reply]))
        finally:
            self._node.maintenance_replied.set()

    async def _admin_only(self, stream: Any) -> None:
        raise GRPCError(Status.UNIMPLEMENTED, "API is not implemented in maintenance mode")

    Version = Upgrade = Reset = MetaWrite = MetaDelete = _admin_only
