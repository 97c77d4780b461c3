"""Resources of etcd: what the config says (``EtcdConfig``), what this node runs (``EtcdSpec``), and
the etcd CA (``EtcdRootSecrets``), with Talos 1.7's type names, namespaces and YAML keys; and, beyond
Talos, the scheduled backups: ``EtcdBackupConfig`` (the ``EtcdBackupConfig`` document with its
defaults) and ``EtcdBackupStatus`` (last success, last failure with its reason, next run, the
snapshots this node holds).

``EtcdConfig`` is ``cluster.etcd`` of the machine config; ``EtcdSpec`` adds what the node knows
(its name, the addresses picked from the subnets) and is what the etcd service runs from: a new
spec restarts etcd. This module declares types only; controllers create the resources.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from ichor.machined.cosi import PrintColumn, ResourceType
from ichor.machined.resources._secrets import SECRETS_NAMESPACE, PEMCertificateAndKey

__all__ = [
    "ETCD_BACKUP_CONFIGS",
    "ETCD_BACKUP_ID",
    "ETCD_BACKUP_STATUSES",
    "ETCD_CONFIGS",
    "ETCD_ID",
    "ETCD_MEMBERS",
    "ETCD_MEMBER_LOCAL_ID",
    "ETCD_NAMESPACE",
    "ETCD_ROOT_ID",
    "ETCD_ROOT_SECRETS",
    "ETCD_SPECS",
    "EtcdBackupConfigSpec",
    "EtcdBackupSnapshot",
    "EtcdBackupStatusSpec",
    "EtcdConfigSpec",
    "EtcdMemberSpec",
    "EtcdRootSpec",
    "EtcdSpecSpec",
]

ETCD_NAMESPACE = "etcd"
ETCD_ID = "etcd"
ETCD_ROOT_ID = "etcd"
ETCD_BACKUP_ID = "etcd"


@dataclasses.dataclass(frozen=True)
class EtcdConfigSpec:
    """``cluster.etcd``: subnets split into valid and excluded (``!cidr``) as Talos keeps them."""

    advertise_valid_subnets: tuple[str, ...] = ()
    advertise_exclude_subnets: tuple[str, ...] = ()
    listen_valid_subnets: tuple[str, ...] = ()
    listen_exclude_subnets: tuple[str, ...] = ()
    image: str = ""
    extra_args: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def advertised_subnets(self) -> list[str]:
        return [*self.advertise_valid_subnets, *(f"!{s}" for s in self.advertise_exclude_subnets)]

    @property
    def listen_subnets(self) -> list[str]:
        return [*self.listen_valid_subnets, *(f"!{s}" for s in self.listen_exclude_subnets)]


@dataclasses.dataclass(frozen=True)
class EtcdSpecSpec:
    """What this node's etcd runs with: its member name, addresses and extra flags."""

    name: str = ""
    advertised_addresses: tuple[str, ...] = ()
    listen_peer_addresses: tuple[str, ...] = ()
    listen_client_addresses: tuple[str, ...] = ()
    image: str = ""
    extra_args: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class EtcdRootSpec:
    """The etcd CA (``cluster.etcd.ca``); a control plane needs its key to issue etcd certificates."""

    etcd_ca: PEMCertificateAndKey | None = dataclasses.field(default=None, metadata={"yaml": "etcdCA"})


@dataclasses.dataclass(frozen=True)
class EtcdBackupConfigSpec:
    """The ``EtcdBackupConfig`` document with its defaults filled in (control planes only)."""

    schedule: str
    retention: int
    path: str
    compress: bool = False


@dataclasses.dataclass(frozen=True)
class EtcdBackupSnapshot:
    """One backup file this node holds (``talosctl etcd snapshot --list``)."""

    name: str
    path: str
    taken: datetime
    revision: int
    size: int


@dataclasses.dataclass(frozen=True)
class EtcdBackupStatusSpec:
    """How the scheduled backups go on this node. Only the etcd leader takes a slot's snapshot, so
    a follower's ``lastRun`` says which node took it."""

    schedule: str = ""
    next_run: datetime | None = None
    last_run: datetime | None = dataclasses.field(default=None, metadata={"omitempty": True})
    last_run_result: str = dataclasses.field(default="", metadata={"omitempty": True})
    last_success: datetime | None = None
    last_snapshot: str = dataclasses.field(default="", metadata={"omitempty": True})
    last_failure: datetime | None = None
    last_failure_reason: str = dataclasses.field(default="", metadata={"omitempty": True})
    held: int = 0
    snapshots: tuple[EtcdBackupSnapshot, ...] = dataclasses.field(default=(), metadata={"omitempty": True})


ETCD_CONFIGS: ResourceType[EtcdConfigSpec] = ResourceType(
    type="EtcdConfigs.etcd.talos.dev", default_namespace=ETCD_NAMESPACE, spec_class=EtcdConfigSpec,
    print_columns=(PrintColumn("Image", "{.image}"),),
)  # fmt: skip

ETCD_SPECS: ResourceType[EtcdSpecSpec] = ResourceType(
    type="EtcdSpecs.etcd.talos.dev", default_namespace=ETCD_NAMESPACE, spec_class=EtcdSpecSpec,
    print_columns=(
        PrintColumn("Name", "{.name}"), PrintColumn("AdvertisedAddresses", "{.advertisedAddresses}"),
        PrintColumn("ListenPeerAddresses", "{.listenPeerAddresses}"),
        PrintColumn("ListenClientAddresses", "{.listenClientAddresses}"),
    ),
)  # fmt: skip

ETCD_ROOT_SECRETS: ResourceType[EtcdRootSpec] = ResourceType(
    type="EtcdRootSecrets.secrets.talos.dev",
    default_namespace=SECRETS_NAMESPACE,
    spec_class=EtcdRootSpec,
    sensitive=True,
)

ETCD_BACKUP_CONFIGS: ResourceType[EtcdBackupConfigSpec] = ResourceType(
    type="EtcdBackupConfigs.etcd.ichor.dev", default_namespace=ETCD_NAMESPACE, spec_class=EtcdBackupConfigSpec
)

ETCD_BACKUP_STATUSES: ResourceType[EtcdBackupStatusSpec] = ResourceType(
    type="EtcdBackupStatuses.etcd.ichor.dev",
    default_namespace=ETCD_NAMESPACE,
    spec_class=EtcdBackupStatusSpec,
    aliases=("etcdbackups",),
    print_columns=(
        PrintColumn("Schedule", "{.schedule}"),
        PrintColumn("Next Run", "{.nextRun}"),
        PrintColumn("Last Success", "{.lastSuccess}"),
        PrintColumn("Last Failure", "{.lastFailure}"),
        PrintColumn("Held", "{.held}"),
    ),
)

ETCD_MEMBER_LOCAL_ID = "local"


@dataclasses.dataclass(frozen=True)
class EtcdMemberSpec:
    """This node's etcd member id, 16 hex digits (Talos's ``FormatMemberID``)."""

    member_id: str = dataclasses.field(default="", metadata={"yaml": "memberID"})


ETCD_MEMBERS: ResourceType[EtcdMemberSpec] = ResourceType(
    type="EtcdMembers.etcd.talos.dev",
    default_namespace=ETCD_NAMESPACE,
    spec_class=EtcdMemberSpec,
    print_columns=(PrintColumn("Member ID", "{.memberID}"),),
)
