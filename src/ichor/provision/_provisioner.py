"""The :class:`Provisioner` protocol: everything ``cluster create|show|destroy`` does differently for
each place a node can run, so that the create/destroy flow (:mod:`._cluster`, :mod:`._teardown`) never
asks which provisioner it has.

One module per provisioner implements it: :mod:`._process` (node processes on the loopback),
:mod:`._container` (nodes in namespaces of their own on a bridge) and :mod:`._qemu` (QEMU VMs on the
metal platform, tap devices on the same kind of bridge). A fourth platform is one more module and
one more line in :func:`provisioner_for`. The names are :class:`ProvisionerName`, the values of
``--provisioner`` (``docker``, the name Talos's docs use, is ``container``: the CLI maps it).

This module holds no behaviour of its own; it must not import the provisioners at module level
(each imports heavy things only it needs).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ichor.provision._record import ClusterRecord, NodeRecord
    from ichor.provision._remains import Host, HostParts

__all__ = ["Provisioner", "ProvisionerName", "provisioner_for"]


class ProvisionerName(StrEnum):
    """``--provisioner``'s values (and ``cluster.yaml``'s ``provisioner``)."""

    PROCESS = "process"
    CONTAINER = "container"
    QEMU = "qemu"


class Provisioner(Protocol):
    """What one platform does at each step of a cluster's life; every method is called by the
    generic flow in the order listed. ``progress`` receives one line per thing done."""

    name: ProvisionerName
    nodes_noun: str
    """How create's progress names the nodes ("node processes", "container nodes", "VMs")."""
    owns_network: bool
    """The cluster has a bridge of its own (blackhole route, nft guard, DHCP, DNS and NTP on the
    gateway): the nodes' DNS servers must lie inside ``--cidr`` and the registry is on the gateway."""
    node_limits: bool
    """``--cpus``/``--memory`` mean something (a cgroup limit, a VM's size)."""
    runs_kubernetes: bool
    """The nodes run a kubelet: create merges the admin kubeconfig after the waits."""
    kubernetes_wait_skipped: str
    """Why create waits for the etcd stages of ``talosctl health`` only ("": it waits for what the
    nodes run)."""
    maintenance_timeout: timedelta
    """How long a node may take from start to its maintenance API answering."""

    def check_host(self) -> None:
        """Refuse a host that lacks what the nodes need (root, tools), naming it."""

    def check_flags(self, flags: dict[str, object]) -> None:
        """Refuse create's flags (by keyword name) that mean nothing here, naming the flag."""

    def addresses(self, cidr: str, count: int) -> list[str]:
        """The nodes' addresses in ``cidr``, refused if it has no room for ``count``."""

    def check_free(self, name: str, cidr: str, state: Path, addresses: Sequence[str], controlplanes: int,
                   extra_cidr: str) -> None:  # fmt: skip
        """Refuse, before anything starts, a CIDR or address this machine already uses."""

    def plan_node(self, record: ClusterRecord, node: NodeRecord) -> None:
        """Fill in what the node's record needs before anything exists (its MACs, disks)."""

    def create_network(self, record: ClusterRecord, progress: Callable[[str], None]) -> None:
        """What lies around the nodes (bridge, DHCP, guard), each part recorded as soon as it exists."""

    def node_patches(self, record: ClusterRecord, node: NodeRecord) -> list[str]:
        """Config patches (YAML texts) that plumb the node into this platform (addresses, time server)."""

    def start_nodes(self, record: ClusterRecord, progress: Callable[[str], None]) -> bool:
        """Start every node (its config is ``<state>/<node>.yaml``); True when the configs must still
        be applied over the insecure maintenance API (the node booted without one)."""

    def host_parts(self, record: ClusterRecord | None, name: str, state_dir: Path, host: Host) -> HostParts:
        """Everything of the cluster the host may hold outside its state directory, from the record
        (None when it is gone) and from the name (``host`` says what exists): what destroy removes
        and checks is gone."""

    def show_rows(self, record: ClusterRecord) -> list[list[str]]:
        """Extra lines of ``cluster show`` (the header first; none: an empty list)."""


_MODULES = {
    ProvisionerName.PROCESS: "ichor.provision._process",
    ProvisionerName.CONTAINER: "ichor.provision._container",
    ProvisionerName.QEMU: "ichor.provision._qemu",
}


def provisioner_for(name: str | ProvisionerName) -> Provisioner:
    """The provisioner called ``name`` (each module exports ``PROVISIONER``)."""
    try:
        module = _MODULES[ProvisionerName(name)]
    except ValueError:
        from ichor.machinery.errors import MachineryError

        raise MachineryError(
            f"unknown provisioner {name!r}",
            hint=f"pass --provisioner {' or '.join(map(str, ProvisionerName))}",
        ) from None
    provisioner: Provisioner = importlib.import_module(module).PROVISIONER
    return provisioner
