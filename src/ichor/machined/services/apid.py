"""The ``apid`` service: the mutual-TLS Talos API on ``<address>:50000``, from ``ApiCertificates``
(a re-issued certificate is served from the next handshake on, without a restart); a line per call
in its log, as Talos's apid writes (``talosctl logs apid``)."""

from __future__ import annotations

import asyncio
from typing import IO, TYPE_CHECKING

from ichor.machined.cosi import State
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ACTIVE_CONFIG_ID,
    API_CERTIFICATES,
    API_CERTIFICATES_ID,
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    MACHINE_CONFIGS,
    ApiCertificatesSpec,
)
from ichor.machined.services import API_CERTIFICATES as API_CERTIFICATES_CONDITION
from ichor.machined.services import HealthCheck, RestartPolicy, Service, goroutine
from ichor.machined.services._certwatch import follow_api_certificates
from ichor.machined.services.conditions import listening, resource_exists
from ichor.machinery import pki

if TYPE_CHECKING:
    from ichor.machined.apid import MachineApi

__all__ = ["apid_service"]


def apid_service(layout: Layout, state: State, machine_api: MachineApi | None = None) -> Service:
    """``machine_api``: the machined service's handlers, called in-process (else over its socket)."""

    async def run(log_file: IO[str]) -> None:
        from ichor.machined.apid import Apid

        def request_log(line: str) -> None:  # every call, as Talos's apid logs them
            if log_file.closed:  # a call cancelled by apid's stop that ends after its log closed
                return
            log_file.write(line + "\n")
            log_file.flush()

        certs = state.get(API_CERTIFICATES.default_namespace, API_CERTIFICATES, API_CERTIFICATES_ID).spec
        hostname = state.get(HOSTNAME_STATUSES.default_namespace, HOSTNAME_STATUSES, HOSTNAME_STATUS_ID).spec
        config = state.get(MACHINE_CONFIGS.default_namespace, MACHINE_CONFIGS, ACTIVE_CONFIG_ID).spec.v1alpha1
        machine = config.machine if config is not None else None
        rbac = bool(machine is not None and machine.features is not None and machine.features.rbac)
        assert certs.server is not None
        server = Apid(
            address=layout.address, machined_socket=layout.machined_socket,
            server_cert=pki.CertKey(certs.server.crt, certs.server.key),
            accepted_cas=tuple(c.crt for c in certs.accepted_cas),
            client_cert=pki.CertKey(certs.client.crt, certs.client.key) if certs.client else None,
            rbac=rbac, local_addresses=[hostname.fqdn], listen_address="0.0.0.0" if layout.own_netns else None,
            machine_api=machine_api, request_log=request_log,
        )  # fmt: skip
        log_file.write(f"apid serving on {server.listen_address}:50000\n")
        log_file.flush()

        def reload(new: ApiCertificatesSpec) -> None:
            assert new.server is not None
            server.reload_certificates(
                pki.CertKey(new.server.crt, new.server.key), tuple(c.crt for c in new.accepted_cas),
                pki.CertKey(new.client.crt, new.client.key) if new.client else None,
            )  # fmt: skip

        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(server.serve())
            tasks.create_task(follow_api_certificates(state, certs, reload, log_file))

    return Service(
        "apid", goroutine(run), description="Talos API proxy", depends_on=("machined",),
        restart=RestartPolicy.FOREVER,
        conditions=(resource_exists(state, API_CERTIFICATES, API_CERTIFICATES_ID, API_CERTIFICATES_CONDITION),),
        health_check=HealthCheck(listening(layout.address, 50000), startup_period=0.2),
    )  # fmt: skip
