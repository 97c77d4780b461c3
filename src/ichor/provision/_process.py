"""The ``process`` provisioner (:class:`~._provisioner.Provisioner`): each node a machined process on
a loopback address of its own, run by a launcher (:mod:`.launcher`) that restarts it when it reboots.

Process nodes share this machine's network and cgroups, so there is no network to build or remove
and nothing to limit; they boot in maintenance mode and get their configs over the insecure
maintenance API, as a user would apply them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

from ichor.machinery import proc
from ichor.machinery.errors import MachineryError
from ichor.provision._addresses import allocate_addresses, check_free
from ichor.provision._processes import ProcessId, tags
from ichor.provision._provisioner import Provisioner, ProvisionerName
from ichor.provision._record import ClusterRecord, NodeRecord, launcher_state_file
from ichor.provision._remains import Host, HostParts, recorded

__all__ = ["PROVISIONER", "ProcessProvisioner", "start_launcher"]


def start_launcher(node: NodeRecord, state_dir: Path) -> None:
    """Start the node's launcher, marked as the node's (:func:`._processes.tags`), and record it."""
    from ichor.provision._rootfs import ship_empty_dirs

    root = Path(node.root)
    if root.is_dir() or not root.exists():  # a root that is no directory: machined says so when it starts
        ship_empty_dirs(root)  # what Talos's root filesystem ships, as a container node's root has
    log = state_dir / f"{node.name}.log"
    background = proc.start(
        [sys.executable, "-m", "ichor.provision.launcher", "--root", node.root, "--address", node.address,
         "--log", str(log), "--state-file", str(launcher_state_file(state_dir, node.name))],
        output=state_dir / f"{node.name}.launcher.log", env=tags(state_dir, node.name),
    )  # fmt: skip
    identity = ProcessId.of(background.pid)
    node.launcher_pid, node.launcher_start = background.pid, identity.start if identity else 0


class ProcessProvisioner:
    name = ProvisionerName.PROCESS
    nodes_noun = "node processes"
    owns_network = False
    node_limits = False
    runs_kubernetes = False
    kubernetes_wait_skipped = ""
    maintenance_timeout = timedelta(seconds=60)

    def check_host(self) -> None:
        return None

    def check_flags(self, flags: dict[str, object]) -> None:
        from ichor.provision._qemu import refuse_vm_flags

        refuse_vm_flags(flags, "process nodes")
        if flags.get("extra_cidr"):
            raise MachineryError(
                "--extra-cidr needs container nodes (a process node has no network of its own)",
                hint="pass --provisioner container (as root), or leave --extra-cidr out",
            )

    def addresses(self, cidr: str, count: int) -> list[str]:
        return allocate_addresses(cidr, count)

    def check_free(self, name: str, cidr: str, state: Path, addresses: Sequence[str], controlplanes: int,
                   extra_cidr: str) -> None:  # fmt: skip
        check_free(cidr, list(addresses[:controlplanes]), list(addresses[controlplanes:]), state)

    def plan_node(self, record: ClusterRecord, node: NodeRecord) -> None:
        return None

    def create_network(self, record: ClusterRecord, progress: Callable[[str], None]) -> None:
        return None

    def node_patches(self, record: ClusterRecord, node: NodeRecord) -> list[str]:
        return []

    def start_nodes(self, record: ClusterRecord, progress: Callable[[str], None]) -> bool:
        for node in record.nodes:
            start_launcher(node, Path(record.state_dir))
            record.save()
        return True

    def host_parts(self, record: ClusterRecord | None, name: str, state_dir: Path, host: Host) -> HostParts:
        return recorded(record) if record is not None else HostParts()

    def show_rows(self, record: ClusterRecord) -> list[list[str]]:
        return []


PROVISIONER: Provisioner = ProcessProvisioner()
