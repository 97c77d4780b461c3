"""PKIStatuses (issue 25 §3): ``etcd`` is ready once the etcd PKI of ``cluster.etcd.ca`` is on disk
(written for real here with Ichor's etcd PKI code), with the version of the secrets it matches; in
Talos's field numbers and columns."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from controller_helpers import run, running

from ichor import etcd as etcdlib
from ichor.machined.controllers import etcd_pki
from ichor.machined.cosi import WAIT_STATUSES, Registry, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ETCD_ROOT_ID,
    ETCD_ROOT_SECRETS,
    SERVICES,
    EtcdRootSpec,
    PEMCertificateAndKey,
    ServiceSpec,
    register_node_types,
)
from ichor.machined.resources._etcd_pki import PKI_STATUSES, PKIStatusSpec
from ichor.machined.resources._protoenc import encode_spec, message_class
from ichor.machinery import pki

CA = pki.new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))
OTHER_CA = pki.new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))


def test_pki_status_is_ready_once_the_pki_of_the_configured_ca_is_on_disk(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "127.0.0.1")

    async def main() -> None:
        controller = etcd_pki.PKIStatusController(layout, recheck=0.05)
        async with running(controller) as state:
            await assert_no_resource(state, PKI_STATUSES, "etcd")  # a worker: no etcd CA, no status
            root = ETCD_ROOT_SECRETS.new(ETCD_ROOT_ID, EtcdRootSpec(PEMCertificateAndKey(CA.crt, CA.key)))
            state.create(root)
            await assert_resource(
                state, WAIT_STATUSES, controller.name, lambda r: "system/secrets/etcd" in r.spec.reason
            )
            # another CA's PKI (left from an old cluster) is not this one's
            etcdlib.write_pki(
                layout.etcd_pki_dir, etcdlib.issue_certs(OTHER_CA, hostname="cp-1", addresses=["127.0.0.1"])
            )
            state.create(SERVICES.new("etcd", ServiceSpec(running=True, healthy=False)))
            await asyncio.sleep(0.15)
            assert state.list("etcd", PKI_STATUSES) == []
            etcdlib.write_pki(
                layout.etcd_pki_dir, etcdlib.issue_certs(CA, hostname="cp-1", addresses=["127.0.0.1"])
            )
            version = state.get("secrets", ETCD_ROOT_SECRETS, ETCD_ROOT_ID).metadata.version
            await assert_resource(
                state,
                PKI_STATUSES,
                "etcd",
                lambda r: r.spec == PKIStatusSpec(ready=True, version=str(version)),
            )
            await assert_no_resource(state, WAIT_STATUSES, controller.name)
            (layout.etcd_pki_dir / "peer.key").unlink()
            state.destroy("runtime", SERVICES, "etcd")  # the service goes and comes back: checked again
            await assert_no_resource(state, PKI_STATUSES, "etcd")

    run(main)


def test_definition_and_field_numbers_are_talos() -> None:
    registry = Registry()
    register_node_types(registry)
    spec = registry.get("PKIStatuses.etcd.talos.dev").spec
    assert spec.default_namespace == "etcd"
    assert [(c.name, c.json_path) for c in spec.print_columns] == [
        ("Ready", "{.ready}"),
        ("Secrets Version", "{.version}"),
    ]
    message = message_class("talos.resource.definitions.etcd.PKIStatusSpec")()
    message.ParseFromString(encode_spec("PKIStatuses.etcd.talos.dev", PKIStatusSpec(ready=True, version="3")))
    assert {f.number: v for f, v in message.ListFields()} == {1: True, 2: "3"}
