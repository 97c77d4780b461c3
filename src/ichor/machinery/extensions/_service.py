"""Extension service specs: ``/usr/local/etc/containers/<file>.yaml``, read and checked as Talos 1.7 does.

A spec names a service (``ext-<name>``), the container it runs (rootfs
``/usr/local/lib/containers/<name>``, entrypoint, args, environment, OCI mounts, security options),
what it waits for (``depends``: one of ``service``, ``path``, ``network``, ``time``, ``configuration``
per entry) and its restart policy (``always|never|untilSuccess``).

Talos's checks and texts are kept (``name "X" is invalid``, ``container endpoint can't be empty``,
``restart kind is invalid: ...``, ``no dependency specified``, ``more than a single dependency is
set``, ``path is not absolute``, ``invalid network dependency``); every problem of a file is
reported at once, as Talos's multierror does. Ichor refuses two things Talos's YAML decoder lets
pass silently, because they only ever hide a typo: unknown keys and values of the wrong type.

This module reads text and answers questions about it; it never starts anything.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ichor.machinery import yamlio
from ichor.machinery.errors import ExtensionServiceError, YAMLError
from ichor.machinery.limits import InputLimits

__all__ = [
    "CONTAINERS_ROOTFS_DIR",
    "SERVICE_SPECS_DIR",
    "SPEC_LIMITS",
    "Dependency",
    "Mount",
    "NetworkCheck",
    "RestartKind",
    "Security",
    "ServiceContainer",
    "ServiceSpec",
    "SpecRefusal",
    "load_service_specs",
    "parse_service_spec",
]

SERVICE_SPECS_DIR = "/usr/local/etc/containers"
"""Where Talos looks for ``*.yaml`` extension service specs."""
CONTAINERS_ROOTFS_DIR = "/usr/local/lib/containers"
"""Where each service's root file system lives, as ``<name>/``."""

SPEC_LIMITS = InputLimits(max_bytes=256 * 1024, max_nodes=20_000, max_aliases=100, max_depth=16)
"""A spec is a few hundred bytes and five levels deep; these leave room for long mount lists."""

_NAME = re.compile(r"^[-_a-z0-9]+$")
_HINT = "see the Talos 1.7 Extension Services guide for the spec format"


class RestartKind(enum.StrEnum):
    """``restart:``; Talos reads the names case-insensitively."""

    ALWAYS = "always"
    NEVER = "never"
    UNTIL_SUCCESS = "untilSuccess"


class NetworkCheck(enum.StrEnum):
    """The network readiness checks a ``depends: [{network: [...]}]`` entry may wait for."""

    ADDRESSES = "addresses"
    CONNECTIVITY = "connectivity"
    HOSTNAME = "hostname"
    ETCFILES = "etcfiles"


@dataclasses.dataclass(frozen=True)
class Mount:
    """An OCI mount (runtime-spec ``Mount``): ``destination`` inside the container."""

    destination: str
    type: str = ""
    source: str = ""
    options: tuple[str, ...] = ()

    def to_oci(self) -> dict[str, Any]:
        out: dict[str, Any] = {"destination": self.destination}
        if self.type:
            out["type"] = self.type
        if self.source:
            out["source"] = self.source
        if self.options:
            out["options"] = list(self.options)
        return out


@dataclasses.dataclass(frozen=True)
class Security:
    writeable_rootfs: bool = False
    writeable_sysfs: bool = False
    masked_paths: tuple[str, ...] | None = None
    """None keeps containerd's defaults; a list (even empty) replaces them."""
    readonly_paths: tuple[str, ...] | None = None
    rootfs_propagation: str = ""


@dataclasses.dataclass(frozen=True)
class ServiceContainer:
    entrypoint: str
    args: tuple[str, ...] = ()
    environment: tuple[str, ...] = ()
    environment_file: str = ""
    """Deprecated in Talos 1.7 (use ExtensionServiceConfig); the service waits for it to exist and
    appends its ``KEY=value`` lines to the environment at each start."""
    mounts: tuple[Mount, ...] = ()
    security: Security = Security()


@dataclasses.dataclass(frozen=True)
class Dependency:
    """One ``depends`` entry: exactly one of these is set."""

    service: str = ""
    path: str = ""
    network: tuple[NetworkCheck, ...] = ()
    time: bool = False
    configuration: bool = False
    """Wait for the ExtensionServiceConfig document named like the service."""


@dataclasses.dataclass(frozen=True)
class ServiceSpec:
    name: str
    container: ServiceContainer
    depends: tuple[Dependency, ...] = ()
    restart: RestartKind = RestartKind.ALWAYS

    @property
    def service_id(self) -> str:
        """The Talos service id: ``ext-<name>``."""
        return f"ext-{self.name}"

    @property
    def rootfs(self) -> str:
        """The container's root file system, a Talos path."""
        return f"{CONTAINERS_ROOTFS_DIR}/{self.name}"

    @property
    def depends_on_services(self) -> tuple[str, ...]:
        """Services it starts after: ``containerd`` always, then every ``service:`` entry."""
        return ("containerd", *(dep.service for dep in self.depends if dep.service))


@dataclasses.dataclass(frozen=True)
class SpecRefusal:
    """A spec file that was not loaded, and why (``talosctl`` shows it; nothing else stops)."""

    file: str
    error: ExtensionServiceError


# --- decoding: shapes and types -------------------------------------------------------------------


class _Reader:
    """Collects every problem of one document, each with its YAML path."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}" if path else message)

    def mapping(self, value: Any, path: str, known: tuple[str, ...]) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(path, f"expected a mapping, got {_describe(value)}")
            return {}
        for key in value:
            if key not in known:
                where = f"{path}.{key}" if path else str(key)
                self.fail(where, f"unknown key (known: {', '.join(known)})")
        return value

    def string(self, value: Any, path: str) -> str:
        if value is None:
            return ""
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self.fail(path, f"expected a string, got {_describe(value)}")
            return ""
        return str(value)

    def boolean(self, value: Any, path: str) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {_describe(value)}")
            return False
        return value

    def strings(self, value: Any, path: str) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            self.fail(path, f"expected a list of strings, got {_describe(value)}")
            return ()
        return tuple(self.string(item, f"{path}[{i}]") for i, item in enumerate(value))

    def items(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {_describe(value)}")
            return []
        return value


def _describe(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return repr(value)


def _mount(r: _Reader, raw: Any, path: str) -> Mount | None:
    body = r.mapping(raw, path, ("destination", "type", "source", "options", "uidMappings", "gidMappings"))
    if "uidMappings" in body or "gidMappings" in body:
        r.fail(path, "uidMappings/gidMappings are not supported for extension service mounts")
    destination = r.string(body.get("destination"), f"{path}.destination")
    if not destination:
        r.fail(f"{path}.destination", "a mount needs a destination")
        return None
    return Mount(
        destination=destination,
        type=r.string(body.get("type"), f"{path}.type"),
        source=r.string(body.get("source"), f"{path}.source"),
        options=r.strings(body.get("options"), f"{path}.options") or (),
    )


def _security(r: _Reader, raw: Any) -> Security:
    path = "container.security"
    keys = ("writeableRootfs", "writeableSysfs", "maskedPaths", "readonlyPaths", "rootfsPropagation")
    body = r.mapping(raw, path, keys)
    propagation = r.string(body.get("rootfsPropagation"), f"{path}.rootfsPropagation")
    allowed = ("", "shared", "slave", "private", "rshared", "rslave", "rprivate", "unbindable", "runbindable")
    if propagation not in allowed:
        r.fail(
            f"{path}.rootfsPropagation",
            f"unknown propagation {propagation!r} (one of {', '.join(allowed[1:])})",
        )
    return Security(
        writeable_rootfs=r.boolean(body.get("writeableRootfs"), f"{path}.writeableRootfs"),
        writeable_sysfs=r.boolean(body.get("writeableSysfs"), f"{path}.writeableSysfs"),
        masked_paths=r.strings(body.get("maskedPaths"), f"{path}.maskedPaths"),
        readonly_paths=r.strings(body.get("readonlyPaths"), f"{path}.readonlyPaths"),
        rootfs_propagation=propagation,
    )


def _container(r: _Reader, raw: Any) -> ServiceContainer:
    keys = ("entrypoint", "args", "environment", "environmentFile", "mounts", "security")
    body = r.mapping(raw, "container", keys)
    mounts = [
        _mount(r, m, f"container.mounts[{i}]")
        for i, m in enumerate(r.items(body.get("mounts"), "container.mounts"))
    ]
    environment_file = r.string(body.get("environmentFile"), "container.environmentFile")
    if environment_file and not environment_file.startswith("/"):
        r.fail("container.environmentFile", f"{environment_file!r} is not an absolute path")
    return ServiceContainer(
        entrypoint=r.string(body.get("entrypoint"), "container.entrypoint"),
        args=r.strings(body.get("args"), "container.args") or (),
        environment=r.strings(body.get("environment"), "container.environment") or (),
        environment_file=environment_file,
        mounts=tuple(m for m in mounts if m is not None),
        security=_security(r, body.get("security")),
    )


def _dependency(r: _Reader, raw: Any, path: str) -> Dependency:
    body = r.mapping(raw, path, ("service", "path", "network", "time", "configuration"))
    network: list[NetworkCheck] = []
    for i, check in enumerate(r.strings(body.get("network"), f"{path}.network") or ()):
        match = next((c for c in NetworkCheck if c.value.lower() == check.lower()), None)
        if match is None:
            r.fail(f"{path}.network[{i}]", f"invalid network dependency: {check}")
        else:
            network.append(match)
    dep = Dependency(
        service=r.string(body.get("service"), f"{path}.service"),
        path=r.string(body.get("path"), f"{path}.path"),
        network=tuple(network),
        time=r.boolean(body.get("time"), f"{path}.time"),
        configuration=r.boolean(body.get("configuration"), f"{path}.configuration"),
    )
    # Talos's rules: exactly one kind per entry, and a path must be absolute.
    if dep.path and not dep.path.startswith("/"):
        r.fail(f"{path}.path", f"path is not absolute: {dep.path!r}")
    set_kinds = sum(
        bool(x) for x in (dep.service, dep.path, body.get("network"), dep.time, dep.configuration)
    )
    if set_kinds == 0:
        r.fail(path, "no dependency specified")
    elif set_kinds > 1:
        r.fail(path, "more than a single dependency is set")
    return dep


def _restart(r: _Reader, raw: Any) -> RestartKind:
    if raw is None:
        r.fail("restart", "restart kind is invalid: RestartKind(0)")
        return RestartKind.ALWAYS
    text = r.string(raw, "restart")
    match = next((k for k in RestartKind if k.value.lower() == text.lower()), None)
    if match is None:
        r.fail("restart", f"{text} does not belong to RestartKind values")
        return RestartKind.ALWAYS
    return match


def parse_service_spec(text: str | bytes, *, source: str = "<spec>") -> ServiceSpec:
    """Decode and validate one spec; raises :class:`ExtensionServiceError` listing every problem."""
    try:
        docs = yamlio.load_documents(text, source=source, limits=SPEC_LIMITS)
    except YAMLError as exc:
        raise ExtensionServiceError(
            f"error loading extension service spec {exc!s}", [str(exc)], hint=exc.hint or _HINT
        ) from None
    if len(docs) != 1:
        problem = "the file is empty" if not docs else f"the file holds {len(docs)} YAML documents, not one"
        raise ExtensionServiceError(f"{source}: {problem}", [problem], hint=_HINT)
    raw = yamlio.to_plain(docs[0])
    r = _Reader()
    body = r.mapping(raw, "", ("name", "container", "depends", "restart"))
    name = r.string(body.get("name"), "name")
    if not _NAME.match(name):
        r.fail("name", f'name "{name}" is invalid (valid names are [-_a-z0-9]+)')
    container = _container(r, body.get("container"))
    if not container.entrypoint:
        r.fail("container.entrypoint", "container endpoint can't be empty")
    depends = [
        _dependency(r, d, f"depends[{i}]") for i, d in enumerate(r.items(body.get("depends"), "depends"))
    ]
    restart = _restart(r, body.get("restart"))
    if r.problems:
        count = len(r.problems)
        head = f"{source}: {count} error{'s' if count > 1 else ''} occurred:"
        raise ExtensionServiceError(
            "\n".join([head, *(f"\t* {p}" for p in r.problems)]),
            r.problems,
            hint=f"fix the listed keys of {source}; {_HINT}",
        )
    return ServiceSpec(name=name, container=container, depends=tuple(depends), restart=restart)


def load_service_specs(
    specs_dir: Path, *, rootfs_exists: Callable[[str], bool]
) -> tuple[list[ServiceSpec], list[SpecRefusal]]:
    """Every ``*.yaml`` spec of ``specs_dir`` (sorted by file name, as Talos reads the directory).

    A spec that does not decode, breaks a rule, repeats an earlier spec's name or has no rootfs
    (``rootfs_exists`` is asked with the Talos path ``/usr/local/lib/containers/<name>``) is
    refused with its reason; the others load. A missing directory holds no specs.
    """
    specs: list[ServiceSpec] = []
    refusals: list[SpecRefusal] = []
    try:
        files = sorted(p for p in specs_dir.iterdir() if p.suffix == ".yaml")
    except FileNotFoundError:
        return [], []
    names: set[str] = set()
    for file in files:
        talos_file = str(PurePosixPath(SERVICE_SPECS_DIR) / file.name)
        try:
            if file.stat().st_size > SPEC_LIMITS.max_bytes:
                problem = f"{file.stat().st_size:,} bytes is over the {SPEC_LIMITS.max_bytes:,}-byte limit"
                raise ExtensionServiceError(
                    f"{talos_file}: {problem}", [problem], hint="a spec is a few hundred bytes"
                )
            spec = parse_service_spec(file.read_bytes(), source=talos_file)
            if spec.name in names:
                problem = f"duplicate service spec: name {spec.name!r} is already used by another file"
                raise ExtensionServiceError(
                    f"{talos_file}: {problem}", [problem], hint="give each spec its own name"
                )
            if not rootfs_exists(spec.rootfs):
                problem = f"container rootfs {spec.rootfs} is missing"
                raise ExtensionServiceError(
                    f"{talos_file}: {problem}",
                    [problem],
                    hint=f"the extension must ship the service's root file system at {spec.rootfs}",
                )
        except ExtensionServiceError as exc:
            refusals.append(SpecRefusal(talos_file, exc))
            continue
        except OSError as exc:
            error = ExtensionServiceError(f"{talos_file}: {exc.strerror}", [str(exc.strerror)], hint=_HINT)
            refusals.append(SpecRefusal(talos_file, error))
            continue
        names.add(spec.name)
        specs.append(spec)
    return specs, refusals
