"""Talos API roles and the per-RPC authorization table (Talos 1.7 ``machined`` rules).

Roles travel two ways: as the Organization (O) values of a client certificate, which apid reads
when RBAC is on, and as the ``talos-role`` gRPC metadata that apid puts on every call it forwards.
machined trusts only ``talos-role`` (it sits behind apid on a unix socket) and calls :func:`check`
before serving an RPC. A method missing from :data:`RULES` is admin-only.

apid's injector rule (:func:`caller_roles`): RBAC off -> every role; RBAC on -> the certificate's
roles, except that a certificate holding ``os:impersonator`` (another node's apid forwarding a call)
may name the roles it acts for in ``talos-role``.

This module decides; it does no I/O, keeps no state and never logs.
"""

from __future__ import annotations

__all__ = [
    "ALL_ROLES",
    "ROLE_METADATA_KEY",
    "RULES",
    "Role",
    "allowed_roles",
    "caller_roles",
    "check",
    "is_allowed",
    "parse_roles",
    "roles_from_certificate",
    "roles_from_metadata",
]

import functools
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from multidict import MultiMapping

ROLE_METADATA_KEY = "talos-role"


class Role(StrEnum):
    ADMIN = "os:admin"
    OPERATOR = "os:operator"
    READER = "os:reader"
    ETCD_BACKUP = "os:etcd:backup"
    IMPERSONATOR = "os:impersonator"


ALL_ROLES: frozenset[Role] = frozenset(Role)

_READ = frozenset({Role.ADMIN, Role.OPERATOR, Role.READER})
_OPERATE = frozenset({Role.ADMIN, Role.OPERATOR})
_BACKUP = frozenset({Role.ADMIN, Role.OPERATOR, Role.ETCD_BACKUP})
_ADMIN = frozenset({Role.ADMIN})

_MACHINE_READ = (
    "CPUInfo", "Containers", "DiskStats", "DiskUsage", "Dmesg", "EtcdMemberList", "Events", "Hostname",
    "ImageList", "List", "LoadAvg", "Logs", "LogsContainers", "Memory", "Mounts", "NetworkDeviceStats",
    "Netstat", "Processes", "ServiceList", "Stats", "SystemStat", "Version",
)  # fmt: skip
_MACHINE_OPERATE = (
    "EtcdAlarmList", "EtcdAlarmDisarm", "EtcdDefragment", "EtcdStatus", "ImagePull", "PacketCapture",
    "Reboot", "Restart", "ServiceRestart", "ServiceStart", "ServiceStop", "Shutdown",
)  # fmt: skip
# Listed explicitly although the fallback would give the same answer: the table mirrors Talos's.
_MACHINE_ADMIN = (
    "ApplyConfiguration", "Bootstrap", "Copy", "EtcdForfeitLeadership", "EtcdLeaveCluster", "EtcdRecover",
    "EtcdRemoveMemberByID", "GenerateClientConfiguration", "GenerateConfiguration", "Kubeconfig",
    "MetaWrite", "MetaDelete", "Read", "Reset", "Rollback", "Upgrade",
)  # fmt: skip


def _rules() -> dict[str, frozenset[Role]]:
    rules: dict[str, frozenset[Role]] = {
        "/cluster.ClusterService/HealthCheck": _READ,
        "/inspect.InspectService/ControllerRuntimeDependencies": _READ,
        "/storage.StorageService/Disks": _READ,
        "/time.TimeService/Time": _READ,
        "/time.TimeService/TimeCheck": _READ,
        "/cosi.resource.State/Get": _READ,
        "/cosi.resource.State/List": _READ,
        "/cosi.resource.State/Watch": _READ,
        "/cosi.resource.State/Create": _ADMIN,
        "/cosi.resource.State/Update": _ADMIN,
        "/cosi.resource.State/Destroy": _ADMIN,
        "/machine.MachineService/EtcdSnapshot": _BACKUP,
    }
    for names, roles in ((_MACHINE_READ, _READ), (_MACHINE_OPERATE, _OPERATE), (_MACHINE_ADMIN, _ADMIN)):
        rules.update({f"/machine.MachineService/{name}": roles for name in names})
    return rules


#: Full gRPC method path -> roles allowed to call it (any one of them suffices).
RULES: Mapping[str, frozenset[Role]] = _rules()

_FALLBACK = _ADMIN


_ROLES_BY_NAME = {role.value: role for role in Role}


def parse_roles(values: Iterable[str | bytes]) -> frozenset[Role]:
    """Known roles among ``values``; unknown strings are dropped (they could not match a rule)."""
    out = set()
    for value in values:
        role = _ROLES_BY_NAME.get(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)
        if role is not None:
            out.add(role)
    return frozenset(out)


def roles_from_certificate(cert: x509.Certificate | Mapping[str, Any] | bytes | None) -> frozenset[Role]:
    """Roles named by a client certificate's Organization values.

    ``cert`` is a parsed certificate, or the dict :meth:`ssl.SSLObject.getpeercert` returns for a
    verified peer (what a server sees), or the certificate's DER bytes (``binary_form=True``;
    the last certificates seen are remembered, so a connection's calls parse it once), or ``None``
    (no certificate: no roles).
    """
    if cert is None:
        return frozenset()
    if isinstance(cert, bytes):
        return _roles_from_der(cert)
    if isinstance(cert, x509.Certificate):
        orgs: list[str | bytes] = [
            attr.value for attr in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
        ]
        return parse_roles(orgs)
    return parse_roles(
        value for rdn in cert.get("subject", ()) for key, value in rdn if key == "organizationName"
    )


@functools.lru_cache(maxsize=256)
def _roles_from_der(der: bytes) -> frozenset[Role]:
    return roles_from_certificate(x509.load_der_x509_certificate(der))


def _metadata_values(
    metadata: MultiMapping[str | bytes] | Iterable[tuple[str, str | bytes]] | None, key: str
) -> list[str | bytes]:
    if metadata is None:
        return []
    if isinstance(metadata, MultiMapping):
        return list(metadata.getall(key, []))
    return [value for name, value in metadata if name == key]


def roles_from_metadata(
    metadata: MultiMapping[str | bytes] | Iterable[tuple[str, str | bytes]] | None,
) -> frozenset[Role]:
    """Roles in the ``talos-role`` metadata (each value one role, as apid sends them)."""
    return parse_roles(_metadata_values(metadata, ROLE_METADATA_KEY))


def caller_roles(
    cert: x509.Certificate | Mapping[str, Any] | bytes | None,
    metadata: MultiMapping[str | bytes] | Iterable[tuple[str, str | bytes]] | None,
    *,
    rbac: bool,
) -> frozenset[Role]:
    """The roles apid grants a caller on its TLS listener (Talos's authz injector)."""
    if not rbac:
        return ALL_ROLES
    roles = roles_from_certificate(cert)
    if Role.IMPERSONATOR in roles and _metadata_values(metadata, ROLE_METADATA_KEY):
        return roles_from_metadata(metadata)
    return roles


def allowed_roles(method: str) -> frozenset[Role]:
    """Roles that may call ``method`` (a full path like ``/machine.MachineService/Version``)."""
    return RULES.get(method, _FALLBACK)


def is_allowed(method: str, roles: Iterable[Role | str]) -> bool:
    return not allowed_roles(method).isdisjoint(parse_roles(roles))


def check(method: str, roles: Iterable[Role | str]) -> None:
    """Raise ``PermissionDenied "not authorized"`` unless one of ``roles`` may call ``method``."""
    if not is_allowed(method, roles):
        raise GRPCError(Status.PERMISSION_DENIED, "not authorized")
