"""Area ``etcd``: ``etcd.PKIStatusController``, EtcdRootSecrets + the etcd service -> PKIStatus ``etcd``.

Talos's PKI controller writes etcd's PKI and then reports it ready with the version of the secrets
it wrote. Ichor's etcd service writes the same files (``/system/secrets/etcd``: ``ca.crt``,
``ca.key`` and the server, peer and admin key pairs) as it starts etcd, so this controller reports
what is on disk: ready once every file is there and ``ca.crt`` is the CA of ``cluster.etcd.ca``,
with the EtcdRootSecrets version it matched (until then it waits, ``talosctl get waits``). It is re-checked when the etcd service or the root
secrets change, and every :data:`RECHECK` seconds while not ready. Only control planes have
EtcdRootSecrets, so only they have the status. It never writes a file.
"""

from __future__ import annotations

from ichor import etcd as etcdlib
from ichor.machined.cosi import Controller, ControllerContext, Input, Output
from ichor.machined.platform import Layout
from ichor.machined.resources import ETCD_ROOT_ID, ETCD_ROOT_SECRETS, SERVICES
from ichor.machined.resources._etcd_pki import ETCD_PKI_ID, PKI_STATUSES, PKIStatusSpec

__all__ = ["RECHECK", "PKIStatusController"]

RECHECK = 5.0


class PKIStatusController(Controller):
    name = "etcd.PKIStatusController"
    inputs = (Input(ETCD_ROOT_SECRETS, id=ETCD_ROOT_ID), Input(SERVICES, id="etcd"))
    outputs = (Output(PKI_STATUSES),)
    reads = "(/system/secrets/etcd)"

    def __init__(self, layout: Layout, *, recheck: float = RECHECK) -> None:
        self._paths = etcdlib.PKIPaths(layout.etcd_pki_dir)
        self._recheck = recheck

    async def run(self, ctx: ControllerContext) -> None:
        retry: float | None = None
        while True:
            await ctx.changed(timeout=retry)
            root = ctx.get_or_none(ETCD_ROOT_SECRETS, ETCD_ROOT_ID)
            if root is None or root.spec.etcd_ca is None:
                retry = None
                ctx.clear_waiting()
                ctx.clean_up_outputs(PKI_STATUSES, set())
                continue
            if not self._on_disk(root.spec.etcd_ca.crt):
                # Talos writes the status only once the PKI is written: until then, say why not
                ctx.clean_up_outputs(PKI_STATUSES, set())
                ctx.waiting("etcd PKI", f"{self._paths.directory} does not hold the PKI of cluster.etcd.ca yet",
                            retry_after=self._recheck)  # fmt: skip
                retry = self._recheck
                continue
            ctx.clear_waiting()
            ctx.modify(
                PKI_STATUSES, ETCD_PKI_ID, PKIStatusSpec(ready=True, version=str(root.metadata.version))
            )
            retry = None

    def _on_disk(self, ca_crt: bytes) -> bool:
        p = self._paths
        files = (
            p.ca_crt,
            p.ca_key,
            p.server_crt,
            p.server_key,
            p.peer_crt,
            p.peer_key,
            p.admin_crt,
            p.admin_key,
        )
        try:
            return all(f.is_file() for f in files) and p.ca_crt.read_bytes().strip() == ca_crt.strip()
        except OSError:
            return False
