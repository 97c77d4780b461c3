"""Follow ``ApiCertificates`` for the services that serve TLS with them (apid, trustd).

The certificate names the node's addresses (``CertSANs``), and a node that gets its address from
DHCP after apid started (a metal node booted from its disk, with no ``ip=``) has its certificate
re-issued then. Talos's apid and trustd take a new certificate without restarting; so do these:
each change is handed to ``apply``, which loads it into the listener's TLS context in place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from ichor.machined.cosi import EventType, State
from ichor.machined.resources import API_CERTIFICATES, API_CERTIFICATES_ID, ApiCertificatesSpec

__all__ = ["follow_api_certificates"]


async def follow_api_certificates(
    state: State,
    current: ApiCertificatesSpec,
    apply: Callable[[ApiCertificatesSpec], None],
    log_file: IO[str],
) -> None:
    """Call ``apply`` with every ``ApiCertificates`` that differs from ``current``, until cancelled."""
    async for event in state.watch(API_CERTIFICATES.default_namespace, API_CERTIFICATES, API_CERTIFICATES_ID):
        if event.type not in (EventType.CREATED, EventType.UPDATED):
            continue
        spec: ApiCertificatesSpec = event.resource.spec
        if spec == current or spec.server is None:
            continue
        apply(spec)
        current = spec
        log_file.write("serving the re-issued API certificate\n")
        log_file.flush()
