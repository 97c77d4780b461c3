"""Resources of etcd: what the config says (``EtcdConfig``), what this node runs (``EtcdSpec``), and
the etcd CA (``EtcdRootSecrets``), with Talos 1.7's type names, namespaces and YAML keys.

``EtcdConfig`` is ``cluster.etcd`` of the machine config; ``EtcdSpec`` adds what the node knows
(its name, the addresses picked from the subnets) and is what the etcd service runs from: a new
spec restarts etcd. This module declares types only; controllers create the resources.
"""

from __future__ import annotations

import dataclasses

from ichor.machined.cosi import PrintColumn, ResourceType
from ichor.machined.resources._secrets import SECRETS_NAMESPACE, PEMCertificateAndKey

__all__ = [
    "ETCD_CONFIGS",
    "ETCD_ID",
    "ETCD_MEMBERS",
    "ETCD_MEMBER_LOCAL_ID",
    "ETCD_NAMESPACE",
    "ETCD_ROOT_ID",
    "ETCD_ROOT_SECRETS",
    "ETCD_SPECS",
    "EtcdConfigSpec",
    "EtcdMemberSpec",
    "EtcdRootSpec",
    "EtcdSpecSpec",
]

ETCD_NAMESPACE = "etcd"
ETCD_ID = "etcd"
ETCD_ROOT_ID = "etcd"


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


ETCD_CONFIGS: ResourceType[EtcdConfigSpec] = ResourceType(
    type="EtcdConfigs.etcd.talos.dev", default_namespace=ETCD_NAMESPACE, spec_class=EtcdConfigSpec
)

ETCD_SPECS: ResourceType[EtcdSpecSpec] = ResourceType(
    type="EtcdSpecs.etcd.talos.dev", default_namespace=ETCD_NAMESPACE, spec_class=EtcdSpecSpec
)

ETCD_ROOT_SECRETS: ResourceType[EtcdRootSpec] = ResourceType(
    type="EtcdRootSecrets.secrets.talos.dev",
    default_namespace=SECRETS_NAMESPACE,
    spec_class=EtcdRootSpec,
    sensitive=True,
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
