"""EtcdSecrets, PKIStatuses and TrustdCertificates (issue 25 §3): the etcd PKI of ``cluster.etcd.ca`` on disk (written for
real here with Ichor's etcd PKI code) as EtcdSecrets, and PKIStatus ``etcd`` ready with their
version; in Talos's field numbers, columns and sensitivity."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from controller_helpers import run, running

from ichor import etcd as etcdlib
from ichor.machined.controllers import etcd_pki, secrets_trustd
from ichor.machined.cosi import WAIT_STATUSES, Registry, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    API_CERTIFICATES,
    API_CERTIFICATES_ID,
    ETCD_ROOT_ID,
    ETCD_ROOT_SECRETS,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    SERVICES,
    ApiCertificatesSpec,
    EtcdRootSpec,
    MachineTypeSpec,
    PEMCertificate,
    PEMCertificateAndKey,
    ServiceSpec,
    register_node_types,
)
from ichor.machined.resources._etcd_pki import ETCD_SECRETS, PKI_STATUSES, EtcdCertsSpec, PKIStatusSpec
from ichor.machined.resources._k8s import K8S_DYNAMIC_CERTS, K8S_DYNAMIC_CERTS_ID, KubernetesDynamicCertsSpec
from ichor.machined.resources._protoenc import encode_spec, message_class
from ichor.machined.resources._trustd import TRUSTD_CERTIFICATES, TrustdCertsSpec
from ichor.machinery import pki

CA = pki.new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))
OTHER_CA = pki.new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))


def test_etcd_secrets_and_pki_status_follow_the_pki_of_the_configured_ca_on_disk(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "127.0.0.1")

    async def main() -> None:
        secrets = etcd_pki.EtcdSecretsController(layout, recheck=0.05)
        async with running(secrets, etcd_pki.pki_status_controller()) as state:
            await assert_no_resource(state, PKI_STATUSES, "etcd")  # a worker: no etcd CA, no status
            root = ETCD_ROOT_SECRETS.new(ETCD_ROOT_ID, EtcdRootSpec(PEMCertificateAndKey(CA.crt, CA.key)))
            state.create(root)
            await assert_resource(
                state, WAIT_STATUSES, secrets.name, lambda r: "system/secrets/etcd" in r.spec.reason
            )
            # another CA's PKI (left from an old cluster) is not this one's
            etcdlib.write_pki(
                layout.etcd_pki_dir, etcdlib.issue_certs(OTHER_CA, hostname="cp-1", addresses=["127.0.0.1"])
            )
            state.create(SERVICES.new("etcd", ServiceSpec(running=True, healthy=False)))
            await asyncio.sleep(0.15)
            assert state.list("etcd", PKI_STATUSES) == [] and state.list("secrets", ETCD_SECRETS) == []
            certs = etcdlib.issue_certs(CA, hostname="cp-1", addresses=["127.0.0.1"])
            etcdlib.write_pki(layout.etcd_pki_dir, certs)
            await assert_resource(
                state, ETCD_SECRETS, "etcd",
                lambda r: r.spec.etcd == PEMCertificateAndKey(certs.server.crt, certs.server.key)
                and r.spec.etcd_peer.crt == certs.peer.crt and r.spec.etcd_admin.key == certs.admin.key,
            )  # fmt: skip
            await assert_resource(state, PKI_STATUSES, "etcd", lambda r: r.spec == PKIStatusSpec(True, "1"))
            await assert_no_resource(state, WAIT_STATUSES, secrets.name)
            # the kube-apiserver's etcd client pair joins them once issued; a new version of the secrets
            api = PEMCertificateAndKey(certs.admin.crt, certs.admin.key)
            state.create(
                K8S_DYNAMIC_CERTS.new(K8S_DYNAMIC_CERTS_ID, KubernetesDynamicCertsSpec(etcd_api_server=api))
            )
            await assert_resource(state, ETCD_SECRETS, "etcd", lambda r: r.spec.etcd_api_server == api)
            await assert_resource(state, PKI_STATUSES, "etcd", lambda r: r.spec.version == "2")
            (layout.etcd_pki_dir / "peer.key").unlink()
            state.destroy("runtime", SERVICES, "etcd")  # the service goes: read again
            await assert_no_resource(state, ETCD_SECRETS, "etcd")

    run(main)


def test_definitions_and_field_numbers_are_talos() -> None:
    registry = Registry()
    register_node_types(registry)
    status = registry.get("PKIStatuses.etcd.talos.dev").spec
    assert status.default_namespace == "etcd"
    assert [(c.name, c.json_path) for c in status.print_columns] == [
        ("Ready", "{.ready}"),
        ("Secrets Version", "{.version}"),
    ]
    secrets = registry.get("EtcdSecrets.secrets.talos.dev").spec
    assert (secrets.default_namespace, secrets.sensitive) == ("secrets", True)
    message = message_class("talos.resource.definitions.etcd.PKIStatusSpec")()
    message.ParseFromString(encode_spec("PKIStatuses.etcd.talos.dev", PKIStatusSpec(ready=True, version="3")))
    assert {f.number: v for f, v in message.ListFields()} == {1: True, 2: "3"}
    pair = PEMCertificateAndKey(CA.crt, CA.key)
    message = message_class("talos.resource.definitions.secrets.EtcdCertsSpec")()
    message.ParseFromString(
        encode_spec("EtcdSecrets.secrets.talos.dev", EtcdCertsSpec(pair, pair, pair, pair))
    )
    fields = {f.number: v for f, v in message.ListFields()}
    assert sorted(fields) == [1, 2, 3, 4] and all((v.crt, v.key) == (CA.crt, CA.key) for v in fields.values())


def test_trustd_certificates_are_what_trustd_serves_on_control_planes_only() -> None:
    server = PEMCertificateAndKey(CA.crt, CA.key)

    async def main() -> None:
        async with running(secrets_trustd.trustd_certificates_controller()) as state:
            machine_type = state.create(MACHINE_TYPES.new(MACHINE_TYPE_ID, MachineTypeSpec.CONTROLPLANE))
            state.create(
                API_CERTIFICATES.new(
                    API_CERTIFICATES_ID, ApiCertificatesSpec((PEMCertificate(CA.crt),), None, server)
                )
            )
            await assert_resource(
                state, TRUSTD_CERTIFICATES, "trustd",
                lambda r: r.spec.server == server and r.spec.accepted_cas == (PEMCertificate(CA.crt),),
            )  # fmt: skip
            state.update(machine_type.with_spec(MachineTypeSpec.WORKER))
            await assert_no_resource(state, TRUSTD_CERTIFICATES, "trustd")

    run(main)
    registry = Registry()
    register_node_types(registry)
    spec = registry.get("TrustdCertificates.secrets.talos.dev").spec
    assert (spec.default_namespace, spec.sensitive) == ("secrets", True)
    message = message_class("talos.resource.definitions.secrets.TrustdCertsSpec")()
    message.ParseFromString(
        encode_spec(
            "TrustdCertificates.secrets.talos.dev", TrustdCertsSpec((PEMCertificate(CA.crt),), server)
        )
    )
    fields = {f.number: v for f, v in message.ListFields()}
    assert fields[2].crt == CA.crt and [c.crt for c in fields[3]] == [CA.crt]
