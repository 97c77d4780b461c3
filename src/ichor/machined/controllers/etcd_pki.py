"""Area ``etcd``: this control plane's etcd PKI as Talos 1.7 reports it.

* ``secrets.EtcdController``: EtcdRootSecrets + the etcd service's files -> EtcdSecrets ``etcd``
  (sensitive): etcd's server, peer and admin key pairs, plus the kube-apiserver's etcd client pair
  (KubernetesDynamicCerts ``etcdAPIServer``, where Ichor keeps it);
* ``etcd.PKIController``: EtcdSecrets -> PKIStatus ``etcd``: ready, with the version of the
  EtcdSecrets it reports, as Talos's.

Talos issues EtcdSecrets first and writes the files from them; Ichor's etcd service issues the key
pairs from ``cluster.etcd.ca`` and writes them (``/system/secrets/etcd``: ``ca.crt``, ``ca.key``,
``server``, ``peer``, ``admin``) as it starts etcd, so the EtcdSecrets here are what is on disk,
once every file is there and ``ca.crt`` is the CA of ``cluster.etcd.ca`` (until then a wait says
so, ``talosctl get waits``). They are read again when the etcd service or the secrets change, and
every :data:`RECHECK` seconds while not there. Only control planes have EtcdRootSecrets, so only
they have either. Nothing here writes a file.
"""

from __future__ import annotations

from ichor import etcd as etcdlib
from ichor.machined.cosi import (
    Controller,
    ControllerContext,
    Input,
    Output,
    SkipReconcile,
    TransformController,
)
from ichor.machined.platform import Layout
from ichor.machined.resources import ETCD_ROOT_ID, ETCD_ROOT_SECRETS, SERVICES, PEMCertificateAndKey
from ichor.machined.resources._etcd_pki import (
    ETCD_PKI_ID,
    ETCD_SECRETS,
    ETCD_SECRETS_ID,
    PKI_STATUSES,
    EtcdCertsSpec,
    PKIStatusSpec,
)
from ichor.machined.resources._k8s import K8S_DYNAMIC_CERTS, K8S_DYNAMIC_CERTS_ID

__all__ = ["RECHECK", "EtcdSecretsController", "pki_status_controller"]

RECHECK = 5.0


class EtcdSecretsController(Controller):
    name = "secrets.EtcdController"
    inputs = (
        Input(ETCD_ROOT_SECRETS, id=ETCD_ROOT_ID),
        Input(SERVICES, id="etcd"),
        Input(K8S_DYNAMIC_CERTS, id=K8S_DYNAMIC_CERTS_ID),
    )
    outputs = (Output(ETCD_SECRETS),)
    reads = "(/system/secrets/etcd)"

    def __init__(self, layout: Layout, *, recheck: float = RECHECK) -> None:
        self._paths = etcdlib.PKIPaths(layout.etcd_pki_dir)
        self._recheck = recheck

    async def run(self, ctx: ControllerContext) -> None:
        retry: float | None = None
        while True:
            await ctx.changed(timeout=retry)
            retry = None
            root = ctx.get_or_none(ETCD_ROOT_SECRETS, ETCD_ROOT_ID)
            if root is None or root.spec.etcd_ca is None:
                ctx.clear_waiting()
                ctx.clean_up_outputs(ETCD_SECRETS, set())
                continue
            dynamic = ctx.get_or_none(K8S_DYNAMIC_CERTS, K8S_DYNAMIC_CERTS_ID)
            spec = self._from_disk(root.spec.etcd_ca.crt, dynamic.spec.etcd_api_server if dynamic else None)
            if spec is None:
                ctx.clean_up_outputs(ETCD_SECRETS, set())
                ctx.waiting("etcd PKI", f"{self._paths.directory} does not hold the PKI of cluster.etcd.ca yet",
                            retry_after=self._recheck)  # fmt: skip
                retry = self._recheck
                continue
            ctx.clear_waiting()
            ctx.modify(ETCD_SECRETS, ETCD_SECRETS_ID, spec)

    def _from_disk(self, ca_crt: bytes, api_server: PEMCertificateAndKey | None) -> EtcdCertsSpec | None:
        p = self._paths
        try:
            if p.ca_crt.read_bytes().strip() != ca_crt.strip() or not p.ca_key.is_file():
                return None
            pairs = [
                PEMCertificateAndKey(crt.read_bytes(), key.read_bytes())
                for crt, key in (
                    (p.server_crt, p.server_key),
                    (p.peer_crt, p.peer_key),
                    (p.admin_crt, p.admin_key),
                )
            ]
        except OSError:
            return None
        return EtcdCertsSpec(
            etcd=pairs[0], etcd_peer=pairs[1], etcd_admin=pairs[2], etcd_api_server=api_server
        )


def pki_status_controller() -> TransformController[PKIStatusSpec]:
    def derive(ctx: ControllerContext) -> dict[str, PKIStatusSpec]:
        secrets = ctx.get_or_none(ETCD_SECRETS, ETCD_SECRETS_ID)
        if secrets is None:
            raise SkipReconcile  # Talos's status stays as it was until new secrets are written
        return {ETCD_PKI_ID: PKIStatusSpec(ready=True, version=str(secrets.metadata.version))}

    return TransformController(
        "etcd.PKIController", inputs=[Input(ETCD_SECRETS, id=ETCD_SECRETS_ID)], output=PKI_STATUSES,
        map_inputs=derive,
    )  # fmt: skip
