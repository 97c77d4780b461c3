"""Area ``secrets``: ``secrets.TrustdController``, ApiCertificates + MachineType -> TrustdCertificates
``trustd`` on control planes (trustd runs there only).

Talos issues trustd its own server pair from the OS CA; Ichor's trustd serves apid's server pair
(``services/trustd.py`` follows ApiCertificates), so the resource reports that pair and the CAs
apid accepts: what a client of trustd really meets. A worker has none.
"""

from __future__ import annotations

from ichor.machined.cosi import ControllerContext, Input, SkipReconcile, TransformController
from ichor.machined.resources import API_CERTIFICATES, API_CERTIFICATES_ID, MACHINE_TYPE_ID, MACHINE_TYPES
from ichor.machined.resources._trustd import TRUSTD_CERTIFICATES, TRUSTD_ID, TrustdCertsSpec

__all__ = ["trustd_certificates_controller"]


def trustd_certificates_controller() -> TransformController[TrustdCertsSpec]:
    def derive(ctx: ControllerContext) -> dict[str, TrustdCertsSpec]:
        machine_type = ctx.get_or_none(MACHINE_TYPES, MACHINE_TYPE_ID)
        if machine_type is None:
            raise SkipReconcile
        if not machine_type.spec.is_control_plane:
            return {}
        certs = ctx.get_or_none(API_CERTIFICATES, API_CERTIFICATES_ID)
        if certs is None or certs.spec.server is None:
            raise SkipReconcile
        return {TRUSTD_ID: TrustdCertsSpec(accepted_cas=certs.spec.accepted_cas, server=certs.spec.server)}

    return TransformController(
        "secrets.TrustdController",
        inputs=[Input(API_CERTIFICATES, id=API_CERTIFICATES_ID), Input(MACHINE_TYPES, id=MACHINE_TYPE_ID)],
        output=TRUSTD_CERTIFICATES, map_inputs=derive,
    )  # fmt: skip
