"""The ``kubelet`` service (Talos ``system/services/kubelet.go``), run from ``KubeletSpecs/kubelet``.

Talos runs the kubelet image as container ``kubelet`` in the CRI containerd
(``/run/containerd/containerd.sock``), namespace ``system``, and so does this module:

* conditions: ``cri`` up (a dependency), the network ready (addresses, hostname, etc files), time
  in sync, the kubelet spec, and ``/etc/kubernetes/kubelet.yaml`` written (by
  ``k8s.KubeletServiceController``);
* pre: the image pulled through the registry mirrors with Talos's retry, each attempt reported
  ("Pulling image ...", :func:`ichor.machined.cri.pull_with_retry`) and, while attempts fail, the last
  failure published as the wait ``kubelet`` (``talosctl get waits``, ``talosctl why kubelet``), then
  mounted as the container's
  root (a writable snapshot); the bind mount sources created;
* the runtime spec (:func:`runtime_spec`): ``/usr/local/bin/kubelet`` with the spec's args, the
  host's network and PID namespaces (own mount, IPC, UTS), privileged as far as the node itself is
  (every capability it holds, every device), root propagation ``shared``, cgroup
  ``/podruntime/kubelet``, Talos's mounts then ``machine.kubelet.extraMounts`` (the credential
  providers' directory, ``/usr/local/lib/kubelet/credentialproviders``, only when the node has it:
  its ``/usr`` is read-only);
* health: ``GET http://127.0.0.1:10248/healthz`` answering 200, first after 2 s (kubelet is slow to
  start); restart: forever.

The kernel a container node runs on is the host's, shared with every other node and the host
itself, so no setting of it may change (``/proc/sys`` is read-only in the node but for ``net``). The
kubelet, though, sets six kernel settings at start (``vm.overcommit_memory=1``, ``vm.panic_on_oom=0``,
``kernel.panic=10``, ``kernel.panic_on_oops=1``, ``kernel.keys.root_maxkeys``/``root_maxbytes``) and
refuses to start when it cannot, even with ``protectKernelDefaults: false`` and the
``KubeletInUserNamespace`` gate (which forgives the failure only inside a user namespace). So its
``/proc`` is a view of the node's own (:func:`prepare_proc_view`, a proc mount of the node's PID
namespace at ``/system/run/kubelet/proc``): ``/proc/sys`` read-only but for ``net``, and over each
of those settings whose host value differs, a read-only file holding the value the kubelet wants.
The kubelet reads it, finds nothing to change and changes nothing; the host keeps its own values
(``sysctl`` on the host shows them unchanged). Only the kubelet sees this view, and only for those
files; everything else under it is the node's live ``/proc``.

A process node shares the host's namespaces and runs no containerd: ``kubelet`` is ``Skipped`` with
the reason, like ``containerd`` and ``cri``. :func:`follow_spec` restarts a running kubelet.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ichor.machined import cri
from ichor.machined.cosi import State, clear_wait, publish_wait, utc_now
from ichor.machined.platform import Layout
from ichor.machined.resources import ACTIVE_CONFIG_ID, MACHINE_CONFIGS
from ichor.machined.resources._kubelet import KUBELET_ID, KUBELET_SPECS, KubeletMount, KubeletSpecSpec
from ichor.machined.services import (
    HealthCheck,
    RestartPolicy,
    RunContext,
    Runner,
    Service,
    ServiceLoadError,
    file_exists,
)
from ichor.machined.services._container import ContainerRunner
from ichor.machined.services.conditions import resource_exists, time_sync
from ichor.machined.services.containerd import skip_reason
from ichor.machined.services.extensions import fit_here, network_ready
from ichor.machinery import proc
from ichor.machinery.extensions import NetworkCheck
from ichor.machinery.extensions._oci import DEFAULT_PATH, GRANTABLE_CAPABILITIES, OCI_VERSION

__all__ = ["CONTAINER_ID", "NAMESPACE", "TALOS_MOUNTS", "kubelet_service", "runtime_spec"]

CONTAINER_ID = "kubelet"
NAMESPACE = "system"
ROOTFS = "/system/run/kubelet/rootfs"
CONFIG_JSON = "/system/run/kubelet/config.json"
CGROUP = "/podruntime/kubelet"
HEALTH_URL = ("127.0.0.1", 10248, "/healthz")
CONFIG_FILE = "/etc/kubernetes/kubelet.yaml"
PROC_VIEW = "/system/run/kubelet/proc"
SYSCTL_VALUES = "/system/run/kubelet/sysctls"
KUBELET_SYSCTLS: tuple[tuple[str, str], ...] = (
    ("vm/overcommit_memory", "1"),
    ("vm/panic_on_oom", "0"),
    ("kernel/panic", "10"),
    ("kernel/panic_on_oops", "1"),
    ("kernel/keys/root_maxkeys", "1000000"),
    ("kernel/keys/root_maxbytes", "25000000"),
)
"""The kernel settings the kubelet sets at start (its ``setupKernelTunables``) and their values."""

_RW = ("rbind", "rshared", "rw")
CREDENTIAL_PROVIDERS = "/usr/local/lib/kubelet/credentialproviders"
"""Where system extensions put kubelet image credential providers (``credentialProviderConfig``)."""
TALOS_MOUNTS: tuple[KubeletMount, ...] = (
    KubeletMount("/dev", "bind", "/dev", _RW),
    KubeletMount("/sys", "sysfs", "/sys", ("bind", "ro")),
    KubeletMount("/sys/fs/cgroup", "bind", "/sys/fs/cgroup", _RW),
    KubeletMount("/lib/modules", "bind", "/lib/modules", ("bind", "ro")),
    KubeletMount("/etc/kubernetes", "bind", "/etc/kubernetes", ("bind", "rshared", "rw")),
    KubeletMount(CREDENTIAL_PROVIDERS, "bind", CREDENTIAL_PROVIDERS, ("bind", "ro")),
    KubeletMount("/etc/nfsmount.conf", "bind", "/etc/nfsmount.conf", ("bind", "ro")),
    KubeletMount("/etc/machine-id", "bind", "/etc/machine-id", ("bind", "ro")),
    # hostNetwork pods get the node's hosts file, which the kubelet copies from its own /etc/hosts.
    KubeletMount("/etc/hosts", "bind", "/etc/hosts", ("bind", "ro")),
    KubeletMount("/etc/os-release", "bind", "/etc/os-release", ("bind", "ro")),
    KubeletMount("/system/resolved/resolv.conf", "bind", "/system/resolved/resolv.conf", ("bind", "ro")),
    KubeletMount("/etc/cni", "bind", "/etc/cni", _RW),
    KubeletMount("/usr/libexec/kubernetes", "bind", "/usr/libexec/kubernetes", _RW),
    KubeletMount("/var/run", "bind", "/run", _RW),
    KubeletMount("/var/lib/containerd", "bind", "/var/lib/containerd", _RW),
    KubeletMount("/var/lib/kubelet", "bind", "/var/lib/kubelet", _RW),
    KubeletMount("/var/log/containers", "bind", "/var/log/containers", _RW),
    KubeletMount("/var/log/pods", "bind", "/var/log/pods", _RW),
    KubeletMount("/var/lib/kubelet/seccomp", "bind", "/var/lib/seccomp", ("bind", "ro")),
    KubeletMount("/opt", "bind", "/opt", _RW),
)
"""Talos 1.7's kubelet mounts (destination, type, source, options), in its order."""
_SHIPPED_SOURCES = frozenset({CREDENTIAL_PROVIDERS})
"""Sources under ``/usr``, read-only in a node: present when the root or an extension has them,
never made (without one, the mount is left out)."""
_FILE_SOURCES = frozenset(
    {"/etc/nfsmount.conf", "/etc/machine-id", "/etc/hosts", "/etc/os-release", "/system/resolved/resolv.conf"}
)


def _node_source(m: KubeletMount, layout: Layout) -> Path | None:
    """Where a bind mount's source is in the node (None for other mounts)."""
    return layout.path(m.source) if m.type == "bind" and m.source.startswith("/") else None


def _mount(m: KubeletMount, layout: Layout) -> dict[str, Any]:
    source = _node_source(m, layout)
    return m.to_oci() if source is None else {**m.to_oci(), "source": str(source)}


def _mounted(target: Path) -> bool:
    with contextlib.suppress(OSError):
        return any(
            line.split()[4] == str(target) for line in Path("/proc/self/mountinfo").read_text().splitlines()
        )
    return False


def prepare_proc_view(layout: Layout) -> Path:
    """Mount the kubelet's view of ``/proc`` (see the module doc) once per boot; return its path.

    Runs inside the node (its PID 1's mount and PID namespaces): the proc mount shows the node's
    processes. ``mount`` is util-linux's, called through the subprocess helper (a one-off step)."""
    view = layout.path(PROC_VIEW)
    if _mounted(view):
        if (view / "self").exists():
            return view
        # Made by an earlier boot: a container node keeps its mounts across reboots, but that proc
        # shows a PID namespace that is gone (no /proc/self): replace it.
        proc.run(["umount", "--recursive", "--lazy", str(view)], timeout=30)
    values = layout.path(SYSCTL_VALUES)
    view.mkdir(parents=True, exist_ok=True)
    values.mkdir(parents=True, exist_ok=True)
    sysctls = view / "sys"
    proc.run(["mount", "-t", "proc", "-o", "nosuid,nodev,noexec", "proc", str(view)], timeout=30)
    proc.run(["mount", "--rbind", str(sysctls), str(sysctls)], timeout=30)
    proc.run(["mount", "-o", "remount,bind,ro,nosuid,nodev,noexec", str(sysctls)], timeout=30)
    proc.run(["mount", "--rbind", str(sysctls / "net"), str(sysctls / "net")], timeout=30)
    proc.run(["mount", "-o", "remount,bind,rw,nosuid,nodev,noexec", str(sysctls / "net")], timeout=30)
    for name, wanted in KUBELET_SYSCTLS:
        live = sysctls / name
        with contextlib.suppress(OSError):
            if live.read_text().strip() == wanted:
                continue  # the host's value already is the kubelet's: nothing to show differently
        shown = values / name.replace("/", ".")
        shown.write_text(wanted + "\n")
        proc.run(["mount", "--bind", "-o", "ro", str(shown), str(live)], timeout=30)
        proc.run(["mount", "-o", "remount,bind,ro", str(live)], timeout=30)
    return view


def runtime_spec(spec: KubeletSpecSpec, layout: Layout, *, environment: Sequence[str] = ()) -> dict[str, Any]:
    """The ``config.json`` of container ``kubelet`` (sources mapped into the node's root)."""
    # runc accepts a bind on /proc itself only from a proc mount: the view is one.
    mounts = [
        {"destination": "/proc", "type": "bind", "source": str(layout.path(PROC_VIEW)),
         "options": ["rbind", "nosuid", "noexec", "nodev"]}
    ]  # fmt: skip
    mounts += [_mount(m, layout) for m in (*TALOS_MOUNTS, *spec.extra_mounts)]
    capabilities = list(GRANTABLE_CAPABILITIES)
    return {
        "ociVersion": OCI_VERSION,
        "process": {
            "user": {"uid": 0, "gid": 0},
            "args": ["/usr/local/bin/kubelet", *spec.args],
            "env": [DEFAULT_PATH, *environment],
            "cwd": "/",
            "capabilities": {kind: capabilities for kind in ("bounding", "effective", "permitted")},
            "noNewPrivileges": False,
            "oomScoreAdj": -999,
        },
        "root": {"path": str(layout.path(ROOTFS)), "readonly": False},
        "mounts": mounts,
        "linux": {
            "resources": {"devices": [{"allow": True, "access": "rwm"}]},
            "cgroupsPath": CGROUP,
            "namespaces": [{"type": t} for t in ("ipc", "uts", "mount")],  # host network and PID
            "rootfsPropagation": "shared",
            "maskedPaths": [],
            "readonlyPaths": [],
        },
    }


def without_missing_sources(oci: dict[str, Any]) -> dict[str, Any]:
    """``oci`` without the bind mounts whose source the node lacks (pre could not make them)."""
    kept = [m for m in oci["mounts"] if m.get("type") != "bind" or Path(m["source"]).exists()]
    return {**oci, "mounts": kept}


def _environment(state: State) -> list[str]:
    found = state.spec_of(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
    config = found.v1alpha1 if found is not None else None
    env = config.machine.env if config is not None and config.machine is not None else None
    return [f"{k}={v}" for k, v in (env or {}).items()]


async def healthz(address: str = HEALTH_URL[0], port: int = HEALTH_URL[1], path: str = HEALTH_URL[2]) -> None:
    """Talos's kubelet health check: ``GET /healthz`` must answer ``200``."""
    reader, writer = await asyncio.open_connection(address, port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {address}:{port}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        status = (await reader.readline()).decode(errors="replace").strip()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    parts = status.split(" ", 2)
    if len(parts) < 2 or parts[1] != "200":
        raise RuntimeError(f"expected HTTP status OK, got {' '.join(parts[1:]) or 'no response'}")


def kubelet_service(
    layout: Layout, state: State, *, report: Callable[[str], None] = lambda _m: None
) -> Service:
    """``kubelet`` for this node (Skipped with the reason on a process node); ``report`` gets the
    image pull's progress (the node's console)."""
    reason = skip_reason(layout)
    if reason:
        return Service(CONTAINER_ID, lambda _c: None, description="Kubelet", skip_reason=reason)
    client = cri.Ctr(layout.path(cri.CRI.address))

    def current() -> KubeletSpecSpec:
        spec = state.spec_of(KUBELET_SPECS, KUBELET_ID)
        if spec is None:
            raise ServiceLoadError(
                "no kubelet spec", hint="the node's machine config has no machine.kubelet section yet"
            )
        return spec

    async def pre() -> None:
        spec = current()
        hosts_dir = layout.path(cri.CRI_HOSTS_DIR)

        def failed(error: str) -> None:  # `get waits` / `why kubelet`: why the pre stage takes so long
            publish_wait(state, CONTAINER_ID, owner="", waiting_for=f"image {spec.image}", reason=error,
                         now=utc_now())  # fmt: skip

        try:
            await cri.pull_with_retry(
                lambda: client.pull(NAMESPACE, spec.image, hosts_dir), spec.image,
                cri.mirrors_for(hosts_dir, cri.registry_of(spec.image)), report=report, on_retry=failed,
            )  # fmt: skip
        finally:
            clear_wait(state, CONTAINER_ID, owner="")
        await client.mount_image(NAMESPACE, spec.image, layout.path(ROOTFS))
        await asyncio.to_thread(prepare_proc_view, layout)
        for mount in (*TALOS_MOUNTS, *spec.extra_mounts):
            source = _node_source(mount, layout)
            if source is None or source.exists() or mount.source in _SHIPPED_SOURCES:
                continue
            try:
                if mount.source in _FILE_SOURCES:
                    source.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
                    source.touch(mode=0o644)
                else:
                    source.mkdir(parents=True, exist_ok=True, mode=0o755)
            except OSError as err:
                # A read-only path the node does not have (a host without /lib/modules): the kubelet
                # runs without that mount, and the console says so.
                report(
                    f"kubelet: not mounting {mount.destination}: {mount.source} cannot be made ({err.strerror})"
                )

    def factory(context: RunContext) -> Runner:
        oci = fit_here(
            without_missing_sources(runtime_spec(current(), layout, environment=_environment(state)))
        )
        return ContainerRunner(client, NAMESPACE, CONTAINER_ID, oci, layout.path(CONFIG_JSON), context)

    network = network_ready(state, (NetworkCheck.ADDRESSES, NetworkCheck.HOSTNAME, NetworkCheck.ETCFILES))
    return Service(
        CONTAINER_ID, factory, description="Kubelet", depends_on=("cri",),
        conditions=(network, time_sync(state), resource_exists(state, KUBELET_SPECS, KUBELET_ID, "kubelet spec"),
                    file_exists(layout.path(CONFIG_FILE), display=CONFIG_FILE)),
        restart=RestartPolicy.FOREVER, pre=pre, health_check=HealthCheck(healthz, initial_delay=2.0),
    )  # fmt: skip
