"""The OCI runtime spec (``config.json``) an extension service runs with, as Talos 1.7 builds it.

Talos starts ``ext-<name>`` in the system containerd (namespace ``system``) from containerd's
default Linux spec plus its own options:

- root: ``/usr/local/lib/containers/<name>``, read-only unless ``security.writeableRootfs``;
- the host's network namespace (its own PID, IPC, UTS and mount namespaces);
- cgroup ``/system/extensions/<name>``, every device allowed, every grantable capability (all but
  ``CAP_SYS_BOOT`` and ``CAP_SYS_MODULE``, which Talos drops at boot), no SELinux label or
  AppArmor profile, OOM score adjustment -600;
- containerd's default mounts (``/proc``, ``/dev``, ``/dev/pts``, ``/dev/shm``, ``/dev/mqueue``,
  ``/sys`` read-only unless ``security.writeableSysfs``, ``/run``) then the spec's own mounts, then
  each ``ExtensionServiceConfig`` file bound read-only at its ``mountPath``;
- the environment: containerd's ``PATH``, the spec's ``environment``, then the config's.

Pure: a function from (spec, config) to a dict; handing it to containerd/runc is the runner's job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ichor.machinery.errors import ExtensionServiceError

from ._service import ServiceSpec

__all__ = [
    "CONFIG_FILES_DIR",
    "DEFAULT_MASKED_PATHS",
    "DEFAULT_READONLY_PATHS",
    "EXTENSIONS_CGROUP",
    "GRANTABLE_CAPABILITIES",
    "OCI_VERSION",
    "ServiceConfig",
    "capabilities_in",
    "config_file_source",
    "fit_to_node",
    "runtime_spec",
]

OCI_VERSION = "1.0.2-dev"
"""What containerd 1.6 writes."""
EXTENSIONS_CGROUP = "/system/extensions"
CONFIG_FILES_DIR = "/system/overlays/extensions"
"""Where ExtensionServiceConfig files are written, ``<name>/<mountPath flattened>``."""
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
OOM_SCORE_ADJ = -600

_CAPABILITIES = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
]
"""Linux capabilities by number (0 .. 40)."""
_DROPPED_AT_BOOT = frozenset({"CAP_SYS_BOOT", "CAP_SYS_MODULE"})
GRANTABLE_CAPABILITIES = tuple(f"CAP_{c}" for c in _CAPABILITIES if f"CAP_{c}" not in _DROPPED_AT_BOOT)

DEFAULT_MASKED_PATHS = (
    "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
    "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi",
)  # fmt: skip
DEFAULT_READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")


@dataclasses.dataclass(frozen=True)
class ServiceConfig:
    """What the node's ``ExtensionServiceConfig`` for this service adds: files (by mount path) and env."""

    mount_paths: tuple[str, ...] = ()
    environment: tuple[str, ...] = ()


ENVIRONMENT_FILE_LIMIT = 64 * 1024
"""Bytes read from a spec's ``container.environmentFile`` at most."""


def environment_from_file(data: bytes, *, source: str) -> tuple[str, ...]:
    """The ``KEY=value`` lines of a (deprecated) ``environmentFile``, appended as containerd's
    ``WithEnvFile`` does; blank lines are skipped, anything else without a name is refused."""
    if len(data) > ENVIRONMENT_FILE_LIMIT:
        problem = f"{source}: {len(data)} bytes, over the {ENVIRONMENT_FILE_LIMIT} bytes an environment file may hold"
        raise ExtensionServiceError(
            problem, [problem], hint="move the variables to an ExtensionServiceConfig document"
        )
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        problem = f"{source}: not UTF-8 (byte {exc.start})"
        raise ExtensionServiceError(
            problem, [problem], hint="write the file as UTF-8 KEY=value lines"
        ) from None
    out: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, _ = line.partition("=")
        if not sep or not name or any(c.isspace() or c == "\0" for c in name):
            problem = f"{source}:{number}: {line[:60]!r} is not KEY=value"
            raise ExtensionServiceError(problem, [problem], hint="write one KEY=value per line")
        out.append(line)
    return tuple(out)


def config_file_source(name: str, mount_path: str) -> str:
    """Where the config file for ``mount_path`` of service ``name`` is written (a Talos path).

    ``/usr/local/etc/nut/upsmon.conf`` -> ``/system/overlays/extensions/<name>/usr-local-etc-nut-upsmon.conf``.
    """
    return f"{CONFIG_FILES_DIR}/{name}/{mount_path.lstrip('/').replace('/', '-')}"


def _default_mounts(writeable_sysfs: bool) -> list[dict[str, Any]]:
    sys_options = ["nosuid", "noexec", "nodev"] + ([] if writeable_sysfs else ["ro"])
    return [
        {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": sys_options},
        {"destination": "/run", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
    ]  # fmt: skip


def runtime_spec(
    spec: ServiceSpec,
    config: ServiceConfig | None = None,
    *,
    environment: Sequence[str] = (),
) -> dict[str, Any]:
    """The ``config.json`` for ``ext-<spec.name>``; ``environment`` is the machine's (``machine.env``),
    put before the spec's as Talos's runner does."""
    config = config or ServiceConfig()
    security = spec.container.security
    capabilities = list(GRANTABLE_CAPABILITIES)
    mounts = _default_mounts(security.writeable_sysfs)
    mounts += [m.to_oci() for m in spec.container.mounts]
    mounts += [
        {
            "destination": path,
            "type": "bind",
            "source": config_file_source(spec.name, path),
            "options": ["ro", "bind"],
        }
        for path in config.mount_paths
    ]
    linux: dict[str, Any] = {
        "resources": {"devices": [{"allow": True, "access": "rwm"}]},
        "cgroupsPath": f"{EXTENSIONS_CGROUP}/{spec.name}",
        "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
        "maskedPaths": list(DEFAULT_MASKED_PATHS if security.masked_paths is None else security.masked_paths),
        "readonlyPaths": list(
            DEFAULT_READONLY_PATHS if security.readonly_paths is None else security.readonly_paths
        ),
    }
    if security.rootfs_propagation:
        linux["rootfsPropagation"] = security.rootfs_propagation
    return {
        "ociVersion": OCI_VERSION,
        "process": {
            "user": {"uid": 0, "gid": 0},
            "args": [spec.container.entrypoint, *spec.container.args],
            "env": [DEFAULT_PATH, *environment, *spec.container.environment, *config.environment],
            "cwd": "/",
            "capabilities": {kind: capabilities for kind in ("bounding", "effective", "permitted")},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
            "noNewPrivileges": True,
            "oomScoreAdj": OOM_SCORE_ADJ,
        },
        "root": {"path": spec.rootfs, "readonly": not security.writeable_rootfs},
        "mounts": mounts,
        "linux": linux,
    }


def capabilities_in(mask: int) -> frozenset[str]:
    """The names of the capabilities set in ``mask`` (``CapBnd`` of ``/proc/<pid>/status``)."""
    return frozenset(f"CAP_{name}" for bit, name in enumerate(_CAPABILITIES) if mask >> bit & 1)


def fit_to_node(oci: dict[str, Any], *, held: frozenset[str], oom_score_adj: int) -> dict[str, Any]:
    """``oci`` limited to what the node itself may hand out: Talos grants every capability its own
    bounding set still has (it drops ``SYS_BOOT`` and ``SYS_MODULE`` at boot); a node that runs with
    fewer (a container node inside a container) grants only ``held``. Without ``CAP_SYS_RESOURCE``
    the OOM score adjustment cannot go below the node's own (``oom_score_adj``), so it is raised to
    that. Returns a new dict."""
    process = dict(oci["process"])
    process["capabilities"] = {
        kind: [c for c in caps if c in held] for kind, caps in oci["process"]["capabilities"].items()
    }
    if "CAP_SYS_RESOURCE" not in held:
        process["oomScoreAdj"] = max(process.get("oomScoreAdj", 0), oom_score_adj)
    return {**oci, "process": process}
