"""The ``trustd`` service (control planes): signs worker API certificates on ``<address>:50001``
for callers presenting the machine token."""

from __future__ import annotations

import asyncio
from typing import IO

from ichor.machined.cosi import State
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    API_CERTIFICATES,
    API_CERTIFICATES_ID,
    OS_ROOT_ID,
    OS_ROOT_SECRETS,
    ApiCertificatesSpec,
)
from ichor.machined.services import API_CERTIFICATES as API_CERTIFICATES_CONDITION
from ichor.machined.services import HealthCheck, RestartPolicy, Service, goroutine
from ichor.machined.services._certwatch import follow_api_certificates
from ichor.machined.services.conditions import listening, resource_exists, time_sync
from ichor.machined.trustd import TRUSTD_PORT
from ichor.machinery import pki

__all__ = ["trustd_service"]


def trustd_service(layout: Layout, state: State) -> Service:
    async def run(log_file: IO[str]) -> None:
        from ichor.machined import trustd as trust

        certs = state.get(API_CERTIFICATES.default_namespace, API_CERTIFICATES, API_CERTIFICATES_ID).spec
        root = state.get(OS_ROOT_SECRETS.default_namespace, OS_ROOT_SECRETS, OS_ROOT_ID).spec
        assert certs.server is not None and root.issuing_ca is not None
        accepted = tuple(c.crt for c in certs.accepted_cas)
        service = trust.SecurityService(
            pki.CertKey(root.issuing_ca.crt, root.issuing_ca.key), root.token, accepted
        )
        log_file.write(f"trustd serving on {layout.address}:{trust.TRUSTD_PORT}\n")
        log_file.flush()
        context = trust.server_context(pki.CertKey(certs.server.crt, certs.server.key))

        def reload(new: ApiCertificatesSpec) -> None:
            assert new.server is not None
            pki.load_into_ssl_context(context, new.server.crt, new.server.key)
            # Re-issued because the OS root changed (rotate-ca swapped the issuing CA) or the SANs did.
            root = state.get(OS_ROOT_SECRETS.default_namespace, OS_ROOT_SECRETS, OS_ROOT_ID).spec
            if root.issuing_ca is not None and root.issuing_ca.key:
                service.update(
                    pki.CertKey(root.issuing_ca.crt, root.issuing_ca.key), root.token,
                    tuple(c.crt for c in new.accepted_cas),
                )  # fmt: skip

        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(trust.serve(layout.address, context, service))
            tasks.create_task(follow_api_certificates(state, certs, reload, log_file))

    return Service(
        "trustd", goroutine(run), description="Trust daemon", restart=RestartPolicy.FOREVER,
        conditions=(time_sync(state),
                    resource_exists(state, API_CERTIFICATES, API_CERTIFICATES_ID, API_CERTIFICATES_CONDITION)),
        health_check=HealthCheck(listening(layout.address, TRUSTD_PORT), startup_period=0.2),
    )  # fmt: skip
