"""Extension services: every spec in ``/usr/local/etc/containers/*.yaml`` runs as ``ext-<name>``.

Read at boot, as Talos does (:func:`ichor.machinery.extensions.load_service_specs`). Each valid spec
becomes a service that depends on ``containerd`` and on each ``service:`` entry, waits for its other
``depends`` (``path`` to exist, ``network`` readiness bits of ``NetworkStatuses/status``, ``time``
sync, ``configuration``: the service's ExtensionServiceConfig written out; the deprecated
``container.environmentFile`` to exist, its ``KEY=value`` lines read at each start), and runs container
``ext-<name>`` in the system containerd (namespace ``system``) from
:func:`~ichor.machinery.extensions.runtime_spec` (:class:`ContainerRunner`). ``restart`` maps to
the supervisor's policies (``always`` Forever, ``never`` Once, ``untilSuccess``), with Talos's 5 s
between runs. A refused spec is loaded as a service that fails at once with the reason
(``[Failed]: Failed to create runner: ...``); nothing else is touched.

:func:`follow_configs` restarts a running ``ext-<name>`` when its ExtensionServiceConfig gets a new
version (the files and environment are read at each start).

A process node shares the host's namespaces: its extension services are ``Skipped`` with the
reason, like ``containerd``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ichor.machined import cri
from ichor.machined.cosi import EventType, State, publish_wait
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    EXTENSION_SERVICE_CONFIG_STATUSES,
    EXTENSION_SERVICE_CONFIGS,
    NETWORK_STATUS_ID,
    NETWORK_STATUSES,
)
from ichor.machined.services._conditions import NETWORK, Condition, file_exists
from ichor.machined.services._container import ContainerRunner
from ichor.machined.services._errors import ServiceLoadError
from ichor.machined.services._runners import RunContext, Runner
from ichor.machined.services._service import RestartPolicy, Service
from ichor.machined.services._supervisor import Supervisor
from ichor.machined.services.conditions import resource_exists, time_sync
from ichor.machined.services.containerd import skip_reason
from ichor.machinery.errors import ExtensionServiceError
from ichor.machinery.extensions import (
    ENVIRONMENT_FILE_LIMIT,
    SERVICE_SPECS_DIR,
    NetworkCheck,
    RestartKind,
    ServiceConfig,
    ServiceSpec,
    capabilities_in,
    environment_from_file,
    fit_to_node,
    runtime_spec,
)
from ichor.machinery.extensions import load_service_specs as _load_specs

__all__ = ["NAMESPACE", "extension_services", "follow_configs"]

NAMESPACE = "system"
"""containerd namespace of the system containerd, where Talos runs extension services."""
REFUSALS_OWNER = "extension-services"
"""Owner of the waits published for refused specs."""
RUN_DIR = "/system/run/extensions"
"""Where each service's ``config.json`` is written before its container starts."""
_RESTART = {
    RestartKind.ALWAYS: RestartPolicy.FOREVER,
    RestartKind.NEVER: RestartPolicy.ONCE,
    RestartKind.UNTIL_SUCCESS: RestartPolicy.UNTIL_SUCCESS,
}
_NETWORK_BITS = {
    NetworkCheck.ADDRESSES: "address_ready",
    NetworkCheck.CONNECTIVITY: "connectivity_ready",
    NetworkCheck.HOSTNAME: "hostname_ready",
    NetworkCheck.ETCFILES: "etc_files_ready",
}


def network_ready(state: State, checks: tuple[NetworkCheck, ...]) -> Condition:
    """Talos's ``network`` condition: the named readiness bits of ``NetworkStatuses/status`` are set."""

    def ready() -> bool:
        status = state.spec_of(NETWORK_STATUSES, NETWORK_STATUS_ID)
        return status is not None and all(getattr(status, _NETWORK_BITS[c]) for c in checks)

    async def wait() -> None:
        async for _ in state.watch(NETWORK_STATUSES.default_namespace, NETWORK_STATUSES, NETWORK_STATUS_ID):
            if ready():
                return

    return Condition(NETWORK, wait)


def _bounding_set() -> frozenset[str]:
    """The capabilities machined could hand on (its ``CapBnd``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            return capabilities_in(int(line.split()[1], 16))
    return frozenset()


def _own_oom_score_adj() -> int:
    return int(Path("/proc/self/oom_score_adj").read_text().strip() or 0)


def fit_here(oci: dict[str, Any]) -> dict[str, Any]:
    """``oci`` limited to what machined itself holds: its capabilities and its OOM score floor."""
    fitted: dict[str, Any] = fit_to_node(oci, held=_bounding_set(), oom_score_adj=_own_oom_score_adj())
    return fitted


def _conditions(state: State, layout: Layout, spec: ServiceSpec) -> tuple[Condition, ...]:
    out: list[Condition] = []
    for dep in spec.depends:
        if dep.path:
            out.append(file_exists(layout.path(dep.path), display=dep.path))
        elif dep.network:
            out.append(network_ready(state, dep.network))
        elif dep.time:
            out.append(time_sync(state))
        elif dep.configuration:
            description = f'extension service config "{spec.name}"'
            out.append(resource_exists(state, EXTENSION_SERVICE_CONFIG_STATUSES, spec.name, description))
    if spec.container.environment_file:
        out.append(
            file_exists(layout.path(spec.container.environment_file), display=spec.container.environment_file)
        )
    return tuple(out)


def _file_environment(layout: Layout, spec: ServiceSpec) -> tuple[str, ...]:
    """The variables of the spec's deprecated ``environmentFile``, read at each start."""
    name = spec.container.environment_file
    if not name:
        return ()
    try:
        with layout.path(name).open("rb") as file:
            data = file.read(ENVIRONMENT_FILE_LIMIT + 1)
    except OSError as exc:
        raise ServiceLoadError(f"cannot read environmentFile {name}: {exc.strerror}",
                               hint="container.environmentFile must name a readable file") from None  # fmt: skip
    try:
        return environment_from_file(data, source=name)
    except ExtensionServiceError as exc:
        raise ServiceLoadError(str(exc), hint=exc.hint) from None


def _runner(layout: Layout, state: State, spec: ServiceSpec) -> Callable[[RunContext], Runner]:
    client = cri.Ctr(layout.path(cri.SYSTEM.address))

    def factory(context: RunContext) -> Runner:
        found = state.spec_of(EXTENSION_SERVICE_CONFIGS, spec.name)
        config = ServiceConfig(
            mount_paths=tuple(f.mount_path for f in found.files) if found else (),
            environment=(*_file_environment(layout, spec), *(found.environment if found else ())),
        )
        oci = fit_here(runtime_spec(spec, config))
        config_json = layout.path(f"{RUN_DIR}/{spec.name}/config.json")
        return ContainerRunner(client, NAMESPACE, spec.service_id, oci, config_json, context)

    return factory


def _pre(layout: Layout, spec: ServiceSpec) -> Callable[[], Awaitable[None]]:
    """Talos's pre stage: bind mount sources that do not exist are made as directories. And, so a
    read-only root fails here with a reason rather than deep in runc: every top-level mount point of
    the container must exist in its root file system."""

    async def pre() -> None:
        for mount in spec.container.mounts:
            if mount.type == "bind" and mount.source.startswith("/"):
                source = layout.path(mount.source)
                if not source.exists():
                    source.mkdir(parents=True, exist_ok=True, mode=0o755)
        destinations = [m["destination"] for m in runtime_spec(spec)["mounts"]]
        for destination in destinations:
            if any(destination.startswith(f"{d.rstrip('/')}/") for d in destinations):
                continue  # made by runc inside another mount (/dev/pts in /dev)
            if not layout.path(f"{spec.rootfs}/{destination}").exists():
                raise ServiceLoadError(
                    f"mount point {destination} is missing in the root file system {spec.rootfs}",
                    hint=f"ship the directory in the extension at rootfs{spec.rootfs}{destination}",
                )

    return pre


def _refused_id(file: str) -> str:
    stem = Path(file).stem.lower()
    return "ext-" + (re.sub(r"[^-_a-z0-9]", "-", stem) or "unnamed")


def _refused(file: str, reason: str) -> Service:
    def factory(_context: RunContext) -> Runner:
        raise ServiceLoadError(f"extension service spec {file} refused: {reason}")

    return Service(_refused_id(file), factory, description=f"Extension service (refused: {file})",
                   restart=RestartPolicy.ONCE)  # fmt: skip


def extension_services(
    layout: Layout, state: State, *, now: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> list[Service]:
    """A service per spec (Skipped on process nodes; Failed at once for a refused spec, whose reason
    is also published as a wait: ``talosctl get waits`` shows why ``ext-<name>`` never runs)."""
    specs, refusals = _load_specs(
        layout.path(SERVICE_SPECS_DIR), rootfs_exists=lambda path: layout.path(path).is_dir()
    )
    reason = skip_reason(layout)
    services: list[Service] = []
    for spec in specs:
        description = f"Extension service {spec.name}"
        if reason:
            services.append(
                Service(spec.service_id, lambda _c: None, description=description, skip_reason=reason)
            )
            continue
        services.append(
            Service(
                spec.service_id, _runner(layout, state, spec), description=description,
                depends_on=spec.depends_on_services, conditions=_conditions(state, layout, spec),
                restart=_RESTART[spec.restart], pre=_pre(layout, spec),
            )
        )  # fmt: skip
    taken = {s.id for s in services}
    for refusal in refusals:
        service = _refused(refusal.file, str(refusal.error))
        if service.id not in taken:
            taken.add(service.id)
            services.append(service)
            publish_wait(state, service.id, owner=REFUSALS_OWNER, waiting_for=f"extension service {service.id}",
                         reason=f"spec {refusal.file} refused: {refusal.error}", now=now())  # fmt: skip
    return services


async def follow_configs(state: State, supervisor: Supervisor) -> None:
    """Restart a running ``ext-<name>`` whenever its ExtensionServiceConfig gets a new version."""
    seen: dict[str, str] = {}
    bootstrapped = False
    namespace = EXTENSION_SERVICE_CONFIG_STATUSES.default_namespace
    async for event in state.watch_kind(namespace, EXTENSION_SERVICE_CONFIG_STATUSES):
        if event.type is EventType.BOOTSTRAPPED:
            bootstrapped = True
            continue
        name = event.resource.id
        spec = state.spec_of(EXTENSION_SERVICE_CONFIG_STATUSES, name)
        version = spec.spec_version if spec is not None else ""
        changed = seen.get(name, "") != version
        seen[name] = version
        service_id = f"ext-{name}"
        if not bootstrapped or not changed or service_id not in {i.id for i in supervisor.list()}:
            continue
        if supervisor.is_running(service_id):
            await supervisor.restart(service_id)
