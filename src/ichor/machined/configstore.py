"""The machine config: acquired, validated, saved atomically, applied in Talos's modes.

Boot acquires the config from ``/system/state/config.yaml`` on STATE, else from the
``talos.config``-style source the node was given; maintenance mode waits for one through
``apply-config --insecure``. A running node takes ``ApplyConfiguration`` in Talos's modes: auto,
no-reboot, reboot, staged and try (reverted after its timeout unless replaced), with a dry run that
shows the diff. The store is the only writer of the ``MachineConfigs`` resources: ``v1alpha1``
(the active config, with its parsed documents so controllers read typed models) and
``maintenance``.

Everything an apply costs in proportion to the config's size -- parsing, validation, the plain copy
the comparison needs, the comparison, the diff and the write to STATE -- runs in a worker thread,
so a node taking a 1 MiB config still answers other calls within milliseconds. A thread alone is
not enough: building a config's ~300,000 objects makes CPython's cyclic garbage collector stop
every thread for up to a second at a time, so loading pauses it and moves a loaded config out of its
sight (:class:`_CollectorPause`). Applies run one at a time: each compares against the config the
previous one left, and a flood of large configs keeps one core busy, not all of them.

A rejected config changes nothing: not the file, not the resource.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.machined.controllers.network.checks import apply_warnings
from ichor.machined.cosi import NotFoundError, State
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ACTIVE_CONFIG_ID,
    ADDRESS_STATUSES,
    LINK_STATUSES,
    MACHINE_CONFIGS,
    MAINTENANCE_CONFIG_ID,
    NETWORK_NAMESPACE,
    MachineConfigSpec,
)
from ichor.machinery import goduration, pki
from ichor.machinery.config import Config, Container
from ichor.machinery.configdiff import ImmediateCheck, can_apply_immediately, unified_diff
from ichor.machinery.errors import ConfigDecodeError, ConfigValidationError, MachineryError
from ichor.machinery.files import write_atomic
from ichor.machinery.yamlio import to_plain

__all__ = ["APPLY_MODES", "CONFIG_HISTORY", "MODE_NAMES", "ConfigStore", "LoadedConfig", "load"]

APPLY_MODES = machine_pb2.ApplyConfigurationRequest
MODE_NAMES = {APPLY_MODES.REBOOT: "reboot", APPLY_MODES.AUTO: "auto", APPLY_MODES.NO_REBOOT: "no_reboot",
              APPLY_MODES.STAGED: "staged", APPLY_MODES.TRY: "try"}  # fmt: skip


@dataclass(frozen=True)
class LoadedConfig:
    """A machine config that loaded, validated and is complete enough to boot."""

    container: Container
    text: str
    warnings: tuple[str, ...] = ()

    @property
    def config(self) -> Config:
        doc = self.container.v1alpha1
        assert doc is not None
        model = doc.model
        assert isinstance(model, Config)
        return model

    @functools.cached_property
    def v1alpha1(self) -> dict[str, Any]:
        """The v1alpha1 document as plain data (for the config diff); made by :func:`load`, off the loop."""
        doc = self.container.v1alpha1
        return to_plain(doc.raw) if doc is not None else {}

    @property
    def is_control_plane(self) -> bool:
        machine = self.config.machine
        return machine is not None and machine.type in ("init", "controlplane")


def load(data: str | bytes, source: str) -> LoadedConfig:
    """Decode, validate (Talos's "cloud" rules fit process nodes) and check completeness; blocking.

    Bytes that are not UTF-8 are refused with the offset of the first bad byte, as Talos's decoder
    refuses them; they are never rewritten (a replacement character in a hostname or a key is a
    different config from the one the user sent).
    """
    from ichor.machinery.config import Mode, load_config, validate_or_raise

    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigDecodeError(
                f"{source}: the config is not UTF-8 text: {exc.reason} at byte {exc.start} "
                f"(0x{data[exc.start]:02x})",
                hint="machine configs are UTF-8 YAML; re-save the file as UTF-8",
            ) from None
    else:
        text = data
    container = load_config(text, source=source)
    if container.v1alpha1 is None:
        raise MachineryError(f"{source}: the config has no v1alpha1 document (machine/cluster)")
    # Process nodes install nothing and run no container runtime: Talos's "cloud" rules fit them.
    warnings = validate_or_raise(container, Mode.CLOUD)
    _check_kubernetes_images(container, source)
    loaded = LoadedConfig(container, text, tuple(warnings))
    _check_complete(loaded, source)
    _ = loaded.v1alpha1  # the plain copy apply compares with: made here, in the loading thread
    return loaded


def _check_kubernetes_images(container: Container, source: str) -> None:
    """What only a running node checks (Talos's runtime validation): the Kubernetes versions its
    images name are ones Talos 1.7 runs: the kubelet's, and on control planes the control plane's."""
    from ichor.machinery.compatibility import KubernetesVersionError, kubernetes_version_of_image
    from ichor.machinery.constants import Images

    doc = container.v1alpha1
    assert doc is not None
    config = doc.model
    assert isinstance(config, Config)
    default = Images()
    machine, cluster = config.machine, config.cluster
    kubelet = machine.kubelet if machine is not None else None
    images = [("machine.kubelet.image", "kubelet", (kubelet.image if kubelet else None) or default.kubelet)]
    if machine is not None and machine.type in ("init", "controlplane"):
        for key, name, part, fallback in (
            ("apiServer", "kube-apiserver", cluster.api_server if cluster else None, default.kube_apiserver),
            ("controllerManager", "kube-controller-manager", cluster.controller_manager if cluster else None,
             default.kube_controller_manager),
            ("scheduler", "kube-scheduler", cluster.scheduler if cluster else None, default.kube_scheduler),
        ):  # fmt: skip
            images.append((f"cluster.{key}.image", name, (part.image if part else None) or fallback))
    problems = []
    for key, name, ref in images:
        try:
            kubernetes_version_of_image(ref)
        except KubernetesVersionError as err:
            problems.append(f"{key}: {name} image is not valid: {err}")
    if problems:
        raise ConfigValidationError(
            f"{source}: {len(problems)} error{'s' if len(problems) != 1 else ''} occurred:",
            problems,
            hint="Talos 1.7 runs Kubernetes 1.25.0 to 1.30.x: tag the images with such a version (default v1.30.3)",
        )


def _check_complete(loaded: LoadedConfig, source: str) -> None:
    """What boot needs beyond validation: a usable OS CA, a token, a cluster endpoint.

    A damaged file (truncated by a crash or an editor) can still be valid YAML that validates;
    booting it would leave a node without an API. Such a config is "incomplete", and the node goes
    to maintenance mode instead, as Talos does with an incomplete config.
    """
    config = loaded.config
    machine, cluster = config.machine, config.cluster
    ca = machine.ca if machine is not None else None
    try:
        pair = pki.CertKey.from_b64(ca.crt or "" if ca else "", ca.key or "" if ca else "", what="machine.ca")
    except MachineryError as exc:
        raise MachineryError(f"{source}: incomplete config: machine.ca: {exc}") from None
    if loaded.is_control_plane and not pair.has_key:
        raise MachineryError(f"{source}: incomplete config: machine.ca.key is required on a control plane")
    if machine is None or not machine.token:
        raise MachineryError(f"{source}: incomplete config: machine.token is empty")
    plane = cluster.control_plane if cluster is not None else None
    if plane is None or not plane.endpoint:
        raise MachineryError(f"{source}: incomplete config: cluster.controlPlane.endpoint is empty")


CONFIG_HISTORY = 8
"""Events of the ``MachineConfigs`` resources the node's state keeps for watchers (its own
controllers read them within milliseconds). Each holds a whole config, so the default history of
1024 would keep the last 1024 applied configs alive: ~2 GB after 1024 applies of a 100 KiB config."""


class _CollectorPause:
    """Pauses CPython's cyclic garbage collector while configs load, for all loads in flight.

    A collection walks every tracked object with the GIL held; a 1 MiB config adds ~300,000 of them
    and triggers several full collections while it is built, each stopping the event loop for
    0.3-0.7 s. Paused, nothing is walked; a config that loaded is then frozen (``gc.freeze``: its
    objects join the permanent generation, which collections skip). That is safe because a config
    is a tree: dropping it frees it by reference counting alone (measured: no cycles). A load that
    failed is not frozen, so its traceback's reference cycles stay collectable.

    ``gc.freeze`` takes every object alive at that moment, not just the config: cyclic garbage of
    the moment, and objects (a call's stream, a task) that die in a reference cycle later, would
    never be collected. So every ``clean_every``-th freeze starts clean: the permanent generation is
    emptied, collected once and frozen again, which bounds frozen garbage to what that many applies
    leave (tens of KiB each), at the cost of one full collection per ``clean_every`` applies.
    Measured (benchmarks/hostile_input.py, 200 applies of a 100 KiB config, then a 4 MiB one):
    RSS +11 MiB with freeze alone, +5 MiB with no freeze; a clean freeze after every config that
    doubles the frozen heap stalled Version for 0.97 s right after a 4 MiB config.
    """

    def __init__(self, *, clean_every: int = 64) -> None:
        self._lock = threading.Lock()
        self._loads = 0
        self._was_enabled = False
        self._clean_every = clean_every
        self._freezes = 0

    @contextlib.contextmanager
    def loading(self) -> Iterator[None]:
        with self._lock:
            if self._loads == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._loads += 1
        loaded = False
        try:
            yield
            loaded = True
        finally:
            with self._lock:
                if loaded:
                    self._freeze()
                self._loads -= 1
                if self._loads == 0 and self._was_enabled:
                    gc.enable()

    def _freeze(self) -> None:
        if self._freezes % self._clean_every == 0:
            gc.unfreeze()
            gc.collect()
        gc.freeze()
        self._freezes += 1


_COLLECTOR = _CollectorPause()


def _load_in_worker(data: str | bytes, source: str) -> LoadedConfig:
    """:func:`load` as worker threads run it: without garbage collector pauses (see the module docstring)."""
    with _COLLECTOR.loading():
        return load(data, source)


def _compare(old: LoadedConfig, new: LoadedConfig) -> ImmediateCheck:
    """Whether ``new`` can replace ``old`` without a reboot (CPU work: run it off the loop)."""
    return can_apply_immediately(old.v1alpha1, new.v1alpha1)


def _load_file(path: Path, source: str) -> LoadedConfig:
    return _load_in_worker(path.read_bytes(), source)


class ConfigStore:
    """The node's machine config (see the module docstring)."""

    def __init__(
        self,
        layout: Layout,
        state: State,
        events: EventBus,
        *,
        say: Callable[[str], None],
        clock: Callable[[], datetime],
        source: Path | None = None,
        install_check: Callable[[LoadedConfig], str | None] | None = None,
    ) -> None:
        self.layout = layout
        self.install_check = install_check
        """Maintenance mode only, on nodes that install to disk: what the install of a config would
        do (printed by ``--dry-run``; None when nothing is installed), or MachineryError saying why
        it cannot; run before the apply replies (``installation.DiskInstallation.plan``)."""
        self.state = state
        self.events = events
        self.say = say
        self.clock = clock
        self.source = source
        self.active: LoadedConfig | None = None
        self.request_reboot: Callable[[], None] = lambda: None
        """Set by the sequencer: what ``--mode=reboot`` does once the config is saved."""
        self._maintenance: asyncio.Future[LoadedConfig] | None = None
        self._try_revert: asyncio.TimerHandle | None = None
        self._applying = asyncio.Lock()

    # --- boot ---------------------------------------------------------------------------------------

    async def acquire(self) -> LoadedConfig | None:
        """The config from STATE, else from the node's config source; None: maintenance mode."""
        sources: list[tuple[Path, str]] = [(self.layout.config_file, "STATE")]
        if self.source is not None:
            sources.append((self.source, str(self.source)))
        for path, name in sources:
            if not path.exists():
                continue
            try:
                loaded = await asyncio.to_thread(_load_file, path, name)
            except (MachineryError, OSError) as exc:
                self.say(f"failed to load config from {name}: {exc}")
                self.events.publish(machine_pb2.ConfigLoadErrorEvent(error=str(exc)))
                continue
            self.say(f"Talos machine config loaded successfully from {name}")
            return loaded
        return None

    def activate(self, loaded: LoadedConfig) -> None:
        """Save ``loaded`` to STATE and make it the active config."""
        write_atomic(self.layout.config_file, loaded.text, mode=0o600)
        self._publish(loaded)

    def _publish(self, loaded: LoadedConfig, rid: str = ACTIVE_CONFIG_ID) -> None:
        if rid == ACTIVE_CONFIG_ID:
            self.active = loaded
        spec = MachineConfigSpec(loaded.text, loaded.container)
        try:
            current = self.state.get(MACHINE_CONFIGS.default_namespace, MACHINE_CONFIGS, rid)
        except NotFoundError:
            self.state.create(MACHINE_CONFIGS.new(rid, spec))
        else:
            self.state.update(current.with_spec(spec))

    # --- maintenance mode ---------------------------------------------------------------------------

    def await_maintenance_config(self) -> asyncio.Future[LoadedConfig]:
        """The future a config applied in maintenance mode resolves."""
        self._maintenance = asyncio.get_running_loop().create_future()
        return self._maintenance

    def end_maintenance(self) -> None:
        self._maintenance = None

    # --- ApplyConfiguration -------------------------------------------------------------------------

    async def apply(self, request: machine_pb2.ApplyConfigurationRequest) -> machine_pb2.ApplyConfiguration:
        async with self._applying:
            return await self._apply(request)

    async def _apply(self, request: machine_pb2.ApplyConfigurationRequest) -> machine_pb2.ApplyConfiguration:
        try:
            new = await asyncio.to_thread(_load_in_worker, request.data, "ApplyConfiguration")
        except MachineryError as exc:
            problems = getattr(exc, "problems", [])
            detail = "\n".join(["", *(f"* {p}" for p in problems)]) if problems else ""
            raise GRPCError(
                Status.INVALID_ARGUMENT, f"configuration validation failed: {exc}{detail}"
            ) from None
        if self._maintenance is not None:
            install = None
            if self.install_check is not None:
                try:
                    install = await asyncio.to_thread(self.install_check, new)
                except MachineryError as exc:
                    hint = f"\n{exc.hint}" if exc.hint else ""
                    raise GRPCError(
                        Status.INVALID_ARGUMENT,
                        f"configuration validation failed: 1 error occurred:\n\t* {exc}\n\n{hint}".rstrip(
                            "\n"
                        ),
                    ) from None
            return self._apply_in_maintenance(request, new, install)
        assert self.active is not None
        old = self.active
        check = await asyncio.to_thread(_compare, old, new)
        mode = request.mode
        if mode in (APPLY_MODES.NO_REBOOT, APPLY_MODES.TRY) and not check.immediate:
            diff = await asyncio.to_thread(unified_diff, old.text, new.text)
            raise GRPCError(
                Status.INVALID_ARGUMENT,
                "this config change can't be applied in immediate mode\n"
                + check.explain()
                + "\ndiff: "
                + diff,
            )
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
            details += f"\nThe config is applied in 'try' mode and will be automatically reverted back in {goduration.format(timeout)}"
        warnings = [*new.warnings, *self._network_warnings(new)]
        if request.dry_run:
            diff = await asyncio.to_thread(unified_diff, old.text, new.text) or "No changes."
            return machine_pb2.ApplyConfiguration(
                mode=mode,
                mode_details=f"Dry run summary:\n{details} (skipped in dry-run).\nConfig diff:\n{diff}",
                warnings=warnings,
            )
        if mode != APPLY_MODES.TRY:
            await asyncio.to_thread(write_atomic, self.layout.config_file, new.text, mode=0o600)
        if mode in (APPLY_MODES.NO_REBOOT, APPLY_MODES.TRY):
            self._publish(new)
            self.say(f"applied configuration in {MODE_NAMES[mode]} mode")
            if mode == APPLY_MODES.TRY:
                self._schedule_revert(old, timeout)
        elif mode == APPLY_MODES.REBOOT:
            self.say("configuration applied, rebooting")
            self.request_reboot()
        else:
            self.say("configuration staged for the next boot")
        for warning in warnings[len(new.warnings) :]:
            self.say(f"apply-config: {warning}")
        return machine_pb2.ApplyConfiguration(mode=mode, mode_details=details, warnings=warnings)

    def _network_warnings(self, new: LoadedConfig) -> list[str]:
        """What ``new``'s network config cannot do as asked on this node now (``checks.apply_warnings``)."""
        links = {r.id: r.spec for r in self.state.list(NETWORK_NAMESPACE, LINK_STATUSES)}
        addresses = [r.spec for r in self.state.list(NETWORK_NAMESPACE, ADDRESS_STATUSES)]
        return apply_warnings(new.config, links, addresses)

    def _schedule_revert(self, old: LoadedConfig, timeout: timedelta) -> None:
        if self._try_revert is not None:
            self._try_revert.cancel()

        def revert() -> None:
            self._publish(old)
            self.say("try mode timeout: configuration reverted")

        self._try_revert = asyncio.get_running_loop().call_later(timeout.total_seconds(), revert)

    def _apply_in_maintenance(
        self, request: machine_pb2.ApplyConfigurationRequest, new: LoadedConfig, install: str | None = None
    ) -> machine_pb2.ApplyConfiguration:
        assert self._maintenance is not None
        if request.mode not in (APPLY_MODES.AUTO, APPLY_MODES.REBOOT, APPLY_MODES.TRY):
            name = MODE_NAMES.get(request.mode, str(request.mode)).replace("_", "-")
            raise GRPCError(
                Status.UNIMPLEMENTED,
                f"apply configuration --mode='{name}' is not supported in maintenance mode",
            )
        if request.dry_run:
            return machine_pb2.ApplyConfiguration(
                mode=request.mode,
                mode_details="Dry run summary:\nNode is running in maintenance mode and does not have a config yet."
                + (f"\nThe config would install to disk:\n{install}" if install else ""),
            )
        reply = machine_pb2.ApplyConfiguration(mode=request.mode, mode_details="Applied configuration with a reboot",
                                               warnings=list(new.warnings))  # fmt: skip
        self._publish(new, MAINTENANCE_CONFIG_ID)
        if not self._maintenance.done():
            self._maintenance.set_result(new)
        return reply
