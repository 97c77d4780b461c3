"""``cluster.yaml``: what a cluster's state directory says about the cluster it holds."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ichor.machinery.constants import DEFAULT_DNS_DOMAIN, DEFAULT_KUBERNETES_VERSION, KUBEPRISM_PORT
from ichor.machinery.errors import MachineryError
from ichor.machinery.files import write_atomic
from ichor.machinery.yamlio import dump_document, from_plain, load_documents, to_plain

DEFAULT_STATE = Path("~/.talos/clusters")


def cluster_flags(state: Path, name: str) -> str:
    """``--name <name>`` and, when it is not the default, ``--state <dir>``: the flags that name this
    cluster again in a command a hint suggests."""
    flags = f"--name {shlex.quote(name)}"
    if state.expanduser().resolve() != DEFAULT_STATE.expanduser().resolve():
        flags += f" --state {shlex.quote(str(state))}"
    return flags


@dataclass
class NodeRecord:
    name: str
    type: str
    address: str
    root: str
    launcher_pid: int = 0
    launcher_start: int = 0
    """The launcher's start time (``/proc/<pid>/stat``): with the PID, it names the process."""
    mac: str = ""
    """A container node's eth0 MAC (its DHCP reservation)."""
    extra_address: str = ""
    """Its eth1 address on the cluster's ``--extra-cidr`` ("" without one)."""
    extra_mac: str = ""
    """Its eth1 MAC (that address's DHCP reservation)."""
    taps: list[str] = field(default_factory=list)
    """A VM's tap devices on the cluster bridge, one per NIC (qemu nodes)."""
    macs: list[str] = field(default_factory=list)
    """A VM's NICs' MACs, in order (the first is :attr:`mac`)."""
    disks: list[str] = field(default_factory=list)
    """A VM's disk image files, the system disk first (qemu nodes)."""
    uuid: str = ""
    """A VM's SMBIOS system UUID (Talos's machine UUID, ``${uuid}`` in ``talos.config=``)."""


@dataclass
class ClusterRecord:
    name: str
    cidr: str
    state_dir: str
    nodes: list[NodeRecord] = field(default_factory=list)
    discovery_pid: int = 0
    discovery_endpoint: str = ""
    talosconfig: str = ""
    """The talosconfig create merged the cluster's context into ("" until it did)."""
    context: str = ""
    """That context's name there (``<name>-1`` when ``<name>`` was taken)."""
    context_ca: str = ""
    """Its ``ca``'s digest: destroy removes the context only while it still is the one create merged."""
    previous_context: str = ""
    """The talosconfig's current context before create made the cluster's current."""
    provisioner: str = "process"
    mtu: int = 1500
    nameservers: list[str] = field(default_factory=list)
    registry_mirrors: list[str] = field(default_factory=list)
    """``--registry-mirror`` values (``<registry>=<endpoint>``), for the nodes' CRI."""
    static_addresses: bool = False
    extensions: list[str] = field(default_factory=list)
    """``--extension`` directories (resolved), layered into every container node."""
    """Container nodes get eth0's address from their machine config (else from DHCP alone)."""
    blackhole: str = ""
    """The CIDR whose blackhole route create installed (removed last, by destroy)."""
    bridge: str = ""
    """The bridge create made ("" until it did)."""
    firewall: str = ""
    """The root namespace's nftables table (``inet``) that stops the host forwarding for the bridge."""
    dhcp_pid: int = 0
    ntp_pid: int = 0
    registry: str = ""
    """``host:port`` of the cluster's own registry (``--with-registry``; "" when it has none)."""
    registry_pid: int = 0
    extra_cidr: str = ""
    """``--extra-cidr``: every container node's second network (eth1), for multihoming ("" for none)."""
    extra_blackhole: str = ""
    """The extra CIDR once its blackhole route is installed (removed last, with the first's)."""
    extra_bridge: str = ""
    """The extra network's bridge ("" until create made it)."""
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    """``--kubernetes-version``: the version (no ``v``) the generated configs' images are tagged with."""
    extra_dhcp_pid: int = 0
    cgroups: list[str] = field(default_factory=list)
    """The cluster's cgroup directory in each hierarchy (container nodes), removed on destroy."""
    talos_version: str = ""
    """``--talos-version``: the version contract the configs are generated for ("": Talos 1.7's)."""
    dns_domain: str = DEFAULT_DNS_DOMAIN
    """``--dns-domain``: ``cluster.network.dnsDomain``."""
    kube_prism_port: int = KUBEPRISM_PORT
    """``--kubeprism-port`` (0: KubePrism off)."""
    custom_cni_url: str = ""
    """``--custom-cni-url``: ``cluster.network.cni`` ``custom`` with this manifest URL ("": flannel)."""
    discovery: bool = True
    """``--with-cluster-discovery``: the nodes use the cluster's own discovery service."""
    debug: bool = False
    """``--with-debug``: the configs' ``debug: true``."""
    install_image: str = ""
    """``--install-image``: ``machine.install.image`` ("": Talos's installer)."""
    registry_insecure: list[str] = field(default_factory=list)
    """``--registry-insecure-skip-verify`` hosts."""
    vip: str = ""
    """``--use-vip``: the control planes' shared address (the CIDR's 50th), the Kubernetes endpoint."""
    endpoint: str = ""
    """``--endpoint``: the talosconfig's only endpoint, added to the certificates' SANs."""
    init_node_as_endpoint: bool = False
    """``--init-node-as-endpoint``: the talosconfig's endpoint is the first control plane only."""
    input_dir: str = ""
    """``--input-dir``: configs taken from there instead of generated ("": generated)."""
    cpus: dict[str, str] = field(default_factory=dict)
    """``--cpus``/``--cpus-workers`` by node type (``controlplane``/``worker``): each node's CPU limit."""
    memory_mb: dict[str, int] = field(default_factory=dict)
    """``--memory``/``--memory-workers`` by node type: each node's memory limit in MiB."""
    kubeconfig: str = ""
    """Where create merges the cluster's admin kubeconfig once its waits pass ("": ``--skip-kubeconfig``)."""
    kube_context: str = ""
    """The context create merged there ("" until it did)."""
    vm: dict[str, Any] = field(default_factory=dict)
    """VM nodes: create's VM flags (``--disk``, ``--vmlinuz-path``, ...; :class:`~._qemu.VMOptions`)."""
    accel: str = ""
    """VM nodes: QEMU's accelerator, ``tcg`` or ``kvm`` (chosen by a canary boot; "" until chosen)."""

    @property
    def file(self) -> Path:
        return Path(self.state_dir) / "cluster.yaml"

    def save(self) -> None:
        write_atomic(self.file, dump_document(from_plain(asdict(self))), mode=0o600)

    @classmethod
    def load(cls, state: Path, name: str) -> ClusterRecord:
        path = state.expanduser() / name / "cluster.yaml"
        if not path.exists():
            raise MachineryError(
                f"cluster {name!r} not found (no {path})",
                hint=f"list clusters with `ls {state}`, or pass --name/--state as used at create",
            )
        try:
            raw: dict[str, Any] = to_plain(load_documents(path.read_text(), source=str(path))[0])
            nodes = [NodeRecord(**n) for n in raw.pop("nodes", [])]
            return cls(**raw, nodes=nodes)
        except (TypeError, AttributeError, IndexError) as exc:
            raise MachineryError(
                f"{path} is not a cluster record ({exc})",
                hint="restore it, or remove it: `talosctl cluster destroy` then ends whatever processes "
                "still carry the cluster's marks and removes the directory",
            ) from None


RUNNING = "running"
WAITING = "waiting"
"""Crashed; restarts at :attr:`LauncherState.restart_at`."""
POWERED_OFF = "powered off"


def launcher_state_file(state_dir: Path, node: str) -> Path:
    return state_dir / f"{node}.launcher.json"


@dataclass
class LauncherState:
    """What a node's launcher writes (:mod:`ichor.provision.launcher`): itself, its node, and why
    the node is not running."""

    launcher_pid: int
    state: str
    node_pid: int = 0
    crashes: int = 0
    """Crashes in a row."""
    last_exit: int | None = None
    restart_at: float = 0.0
    """Wall-clock time (``time.time()``) of the restart while ``state`` is ``waiting``."""

    @classmethod
    def read(cls, path: Path) -> LauncherState | None:
        """The state as last written; None when absent or unreadable (a launcher still starting)."""
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
