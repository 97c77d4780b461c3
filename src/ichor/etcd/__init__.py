"""etcd for Ichor control-plane nodes: find the binary, issue its PKI, build its command line,
talk to it over mutual TLS, and save/restore snapshots - all the Talos way.

* :func:`find_binaries`, :func:`etcd_version` - the etcd/etcdctl/etcdutl binaries.
* :func:`build_etcd`, :func:`built_bin_dir` - build Talos's etcd version from its Go modules
  (``python -m ichor.etcd.build``).
* :func:`issue_certs`, :func:`write_pki`, :class:`PKIPaths` - server/peer/admin certificates from
  ``cluster.etcd.ca`` under ``/system/secrets/etcd`` with Talos's names, subjects and SANs.
* :func:`select_addresses`, :func:`build_args`, :func:`build_env` - etcd's flags from the node's
  addresses and ``cluster.etcd`` (``advertisedSubnets``, ``listenSubnets``, ``extraArgs``).
* :class:`EtcdClient` - async etcd v3 client (KV, Cluster, Maintenance) with endpoint failover.
* :func:`save_snapshot`, :func:`snapshot_info`, :func:`restore_snapshot`.
* :func:`take_backup`, :func:`list_backups`, :class:`BackupFile` - the scheduled backups' files
  (names, verified saves, retention).

Errors form one tree under :class:`EtcdError` (see ``ichor.etcd._errors``). This package does not
supervise the etcd process or decide bootstrap/join: machined's etcd service does, with these parts.
"""

from __future__ import annotations

from ichor.etcd._args import (
    CIPHER_SUITES,
    CLIENT_PORT,
    DENIED_ARGS,
    METRICS_PORT,
    PEER_PORT,
    EtcdAddresses,
    build_args,
    build_env,
    etcd_url,
    filter_addresses,
    format_initial_cluster,
    select_addresses,
)
from ichor.etcd._backups import (
    BACKUP_PREFIX,
    BackupFile,
    SaveSnapshot,
    backup_name,
    list_backups,
    prune_backups,
    take_backup,
)
from ichor.etcd._binaries import BIN_DIR_ENV, EtcdBinaries, etcd_version, find_binaries
from ichor.etcd._build import build_etcd, built_bin_dir, verify_build
from ichor.etcd._client import EtcdClient, parse_endpoint
from ichor.etcd._errors import (
    EtcdBinaryNotFoundError,
    EtcdBuildError,
    EtcdConfigError,
    EtcdError,
    EtcdLearnerNotReadyError,
    EtcdNoSpaceError,
    EtcdNotFoundError,
    EtcdNotLeaderError,
    EtcdRequestError,
    EtcdSnapshotError,
    EtcdTLSError,
    EtcdTooManyLearnersError,
    EtcdUnavailableError,
)
from ichor.etcd._pki import CERT_TTL, ETCD_PKI_DIR, EtcdCerts, PKIPaths, issue_certs, write_pki
from ichor.etcd._snapshot import restore_snapshot, save_snapshot, snapshot_info, verify_snapshot
from ichor.etcd._types import KV, Alarm, HealthResult, Member, RangeResult, SnapshotInfo, Status

__all__ = [
    "BACKUP_PREFIX",
    "BIN_DIR_ENV",
    "CERT_TTL",
    "CIPHER_SUITES",
    "CLIENT_PORT",
    "DENIED_ARGS",
    "ETCD_PKI_DIR",
    "KV",
    "METRICS_PORT",
    "PEER_PORT",
    "Alarm",
    "BackupFile",
    "EtcdAddresses",
    "EtcdBinaries",
    "EtcdBinaryNotFoundError",
    "EtcdBuildError",
    "EtcdCerts",
    "EtcdClient",
    "EtcdConfigError",
    "EtcdError",
    "EtcdLearnerNotReadyError",
    "EtcdNoSpaceError",
    "EtcdNotFoundError",
    "EtcdNotLeaderError",
    "EtcdRequestError",
    "EtcdSnapshotError",
    "EtcdTLSError",
    "EtcdTooManyLearnersError",
    "EtcdUnavailableError",
    "HealthResult",
    "Member",
    "PKIPaths",
    "RangeResult",
    "SaveSnapshot",
    "SnapshotInfo",
    "Status",
    "backup_name",
    "build_args",
    "build_env",
    "build_etcd",
    "built_bin_dir",
    "etcd_url",
    "etcd_version",
    "filter_addresses",
    "find_binaries",
    "format_initial_cluster",
    "issue_certs",
    "list_backups",
    "parse_endpoint",
    "prune_backups",
    "restore_snapshot",
    "save_snapshot",
    "select_addresses",
    "snapshot_info",
    "take_backup",
    "verify_build",
    "verify_snapshot",
    "write_pki",
]
