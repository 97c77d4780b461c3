"""Talos 1.7 API authorization: the per-RPC role table, role sources and impersonation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from multidict import MultiDict

from ichor.machined import authz
from ichor.machined.apid import METHODS
from ichor.machined.authz import Role
from ichor.machinery import pki

READER = {Role.READER}
OPERATOR = {Role.OPERATOR}
ADMIN = {Role.ADMIN}
BACKUP = {Role.ETCD_BACKUP}
IMPERSONATOR = {Role.IMPERSONATOR}

M = "/machine.MachineService/"


@pytest.mark.parametrize(
    ("method", "reader", "operator", "backup"),
    [
        (M + "Version", True, True, False),
        (M + "Logs", True, True, False),
        (M + "EtcdMemberList", True, True, False),
        (M + "ServiceList", True, True, False),
        ("/cosi.resource.State/Get", True, True, False),
        ("/cosi.resource.State/Watch", True, True, False),
        ("/storage.StorageService/Disks", True, True, False),
        ("/time.TimeService/TimeCheck", True, True, False),
        ("/cluster.ClusterService/HealthCheck", True, True, False),
        ("/inspect.InspectService/ControllerRuntimeDependencies", True, True, False),
        (M + "Reboot", False, True, False),
        (M + "EtcdStatus", False, True, False),
        (M + "ServiceRestart", False, True, False),
        (M + "PacketCapture", False, True, False),
        (M + "EtcdSnapshot", False, True, True),
        (M + "ApplyConfiguration", False, False, False),
        (M + "Bootstrap", False, False, False),
        (M + "Read", False, False, False),
        (M + "Kubeconfig", False, False, False),
        (M + "EtcdRecover", False, False, False),
        ("/cosi.resource.State/Create", False, False, False),
        ("/cosi.resource.State/Destroy", False, False, False),
    ],
)
def test_role_classes(method: str, reader: bool, operator: bool, backup: bool) -> None:
    assert authz.is_allowed(method, ADMIN)
    assert authz.is_allowed(method, READER) is reader
    assert authz.is_allowed(method, OPERATOR) is operator
    assert authz.is_allowed(method, BACKUP) is backup
    # os:impersonator authorizes nothing by itself: it only lets apid act for other roles.
    assert not authz.is_allowed(method, IMPERSONATOR)


def test_unlisted_methods_are_admin_only() -> None:
    for method in (M + "Hostname2", "/securityapi.SecurityService/Certificate", M + "MetaWrite"):
        assert authz.allowed_roles(method) == {Role.ADMIN}
        assert authz.is_allowed(method, ADMIN)
        assert not authz.is_allowed(method, {Role.OPERATOR, Role.READER, Role.ETCD_BACKUP})


def test_every_listed_method_exists_and_admin_may_call_everything() -> None:
    listed = set(authz.RULES)
    assert listed <= set(METHODS), sorted(listed - set(METHODS))
    assert all(authz.is_allowed(method, ADMIN) for method in METHODS)


def test_check_raises_talos_permission_denied() -> None:
    authz.check(M + "Version", READER)
    with pytest.raises(GRPCError) as denied:
        authz.check(M + "Reset", {Role.READER, Role.OPERATOR})
    assert denied.value.status is Status.PERMISSION_DENIED
    assert denied.value.message == "not authorized"
    with pytest.raises(GRPCError):
        authz.check(M + "Version", set())


def test_parse_roles_keeps_known_roles_only() -> None:
    assert authz.parse_roles(["os:reader", b"os:operator", "talos", "os:admin "]) == {
        Role.READER,
        Role.OPERATOR,
    }


def _cert(organizations: list[str]) -> bytes:
    ca = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    return pki.new_keypair(
        ca, organizations=organizations, ttl=timedelta(hours=1), server=False, client=True
    ).crt


def test_roles_from_certificate_organization_not_cn() -> None:
    cert = pki.load_certificate(_cert(["os:reader", "os:etcd:backup", "talos"]))
    assert authz.roles_from_certificate(cert) == {Role.READER, Role.ETCD_BACKUP}
    # The shape ssl.SSLObject.getpeercert() gives a server.
    peer = {"subject": ((("organizationName", "os:operator"),), (("commonName", "os:admin"),))}
    assert authz.roles_from_certificate(peer) == {Role.OPERATOR}
    assert authz.roles_from_certificate(None) == set()


def test_roles_from_metadata_multi_valued() -> None:
    md = MultiDict([("talos-role", "os:reader"), ("talos-role", "os:operator"), ("nodes", "x")])
    assert authz.roles_from_metadata(md) == {Role.READER, Role.OPERATOR}
    assert authz.roles_from_metadata([("talos-role", "os:admin")]) == {Role.ADMIN}
    assert authz.roles_from_metadata(None) == set()


def test_injector_rules() -> None:
    reader = {"subject": ((("organizationName", "os:reader"),),)}
    impersonator = {"subject": ((("organizationName", "os:impersonator"),),)}
    asks_admin = MultiDict([("talos-role", "os:admin")])
    asks_reader = MultiDict([("talos-role", "os:reader")])

    # RBAC off: everyone gets every role, whatever the certificate or metadata say.
    assert authz.caller_roles(reader, asks_reader, rbac=False) == authz.ALL_ROLES
    # RBAC on: the certificate decides, and only an impersonator may name other roles.
    assert authz.caller_roles(reader, None, rbac=True) == READER
    assert authz.caller_roles(reader, asks_admin, rbac=True) == READER
    assert authz.caller_roles(impersonator, asks_reader, rbac=True) == READER
    assert authz.caller_roles(impersonator, asks_admin, rbac=True) == ADMIN
    # An impersonator without talos-role keeps its own (useless) role.
    assert authz.caller_roles(impersonator, MultiDict(), rbac=True) == IMPERSONATOR
