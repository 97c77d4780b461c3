"""Machine config documents of Ichor's own (no Talos release has them), beside the generated models.

``EtcdBackupConfig`` (``apiVersion: v1alpha1``): scheduled etcd snapshots on the control planes::

    apiVersion: v1alpha1
    kind: EtcdBackupConfig
    schedule: "0 */12 * * *"      # cron, UTC; default twice a day (k3s's default)
    retention: 5                  # snapshots kept on each node; default 5
    path: /var/lib/etcd-backups   # default; must be under /var (EPHEMERAL), outside /var/lib/etcd
    compress: false               # gzip each snapshot (<name>.db.gz); default false

Decoded with the same rules as Talos's kinds (unknown keys and wrong types refused with their YAML
path); the rules on values are ``_validate_documents._validate_etcd_backup``. The properties give
each field with its default, so no reader keeps a default of its own. This module must not be
overwritten by ``scripts/gen_config_models.py``: the schema it reads is Talos's, these kinds are not.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_BACKUP_PATH",
    "DEFAULT_BACKUP_RETENTION",
    "DEFAULT_BACKUP_SCHEDULE",
    "ICHOR_CHILDREN",
    "ICHOR_KIND_MODELS",
    "EtcdBackupConfigV1Alpha1",
]

from typing import Literal

from pydantic import Field, StrictBool, StrictInt

from ._models import YamlStr, _Base

DEFAULT_BACKUP_SCHEDULE = "0 */12 * * *"
"""Twice a day, at 00:00 and 12:00 UTC (k3s's ``etcd-snapshot-schedule-cron`` default)."""
DEFAULT_BACKUP_RETENTION = 5
DEFAULT_BACKUP_PATH = "/var/lib/etcd-backups"


class EtcdBackupConfigV1Alpha1(_Base):
    "Ichor's EtcdBackupConfig document (apiVersion v1alpha1): scheduled etcd snapshots on control planes."

    api_version: Literal["v1alpha1"] | None = Field(
        default=None, alias="apiVersion", description="apiVersion is the API version of the resource."
    )
    kind: Literal["EtcdBackupConfig"] | None = Field(
        default=None, alias="kind", description="kind is the kind of the resource."
    )
    schedule_: YamlStr | None = Field(
        default=None,
        alias="schedule",
        description="When to take a snapshot: a cron schedule in UTC (five fields, @daily-style descriptors or `@every <duration>`).\nDefault: `0 */12 * * *` (twice a day).",
    )
    retention_: StrictInt | None = Field(
        default=None,
        alias="retention",
        description="How many snapshots each control plane keeps (the newest); older ones are deleted after a new snapshot is verified.\nDefault: 5.",
    )
    path_: YamlStr | None = Field(
        default=None,
        alias="path",
        description="The directory the snapshots go to, under /var.\nDefault: /var/lib/etcd-backups.",
    )
    compress_: StrictBool | None = Field(default=None, alias="compress", description="Compress each snapshot with gzip (`.db.gz`).\nDefault: false.")  # fmt: skip

    @property
    def schedule(self) -> str:
        return self.schedule_ if self.schedule_ is not None else DEFAULT_BACKUP_SCHEDULE

    @property
    def retention(self) -> int:
        return self.retention_ if self.retention_ is not None else DEFAULT_BACKUP_RETENTION

    @property
    def path(self) -> str:
        return self.path_ if self.path_ is not None else DEFAULT_BACKUP_PATH

    @property
    def compress(self) -> bool:
        return bool(self.compress_)


ICHOR_KIND_MODELS: dict[tuple[str, str], type[_Base]] = {
    ("v1alpha1", "EtcdBackupConfig"): EtcdBackupConfigV1Alpha1,
}
"""(apiVersion, kind) -> model, for the kinds only Ichor knows."""

ICHOR_CHILDREN: dict[str, dict[str, tuple[str, str]]] = {"EtcdBackupConfigV1Alpha1": {}}
"""As ``_models.CHILDREN``: these documents have no nested models."""
