"""Plain results of etcd calls, decoupled from the generated protobuf classes.

Frozen dataclasses only; nothing here talks to etcd.
"""

from __future__ import annotations

__all__ = ["KV", "Alarm", "HealthResult", "Member", "RangeResult", "SnapshotInfo", "Status"]

from dataclasses import dataclass


@dataclass(frozen=True)
class KV:
    """One stored key (``version`` counts modifications since creation)."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0


@dataclass(frozen=True)
class RangeResult:
    kvs: list[KV]
    revision: int
    count: int


@dataclass(frozen=True)
class Member:
    """A cluster member; ``name`` and ``client_urls`` are empty until it has started."""

    id: int
    name: str
    peer_urls: tuple[str, ...]
    client_urls: tuple[str, ...]
    is_learner: bool

    @property
    def hex_id(self) -> str:
        """The member ID as Talos and etcdctl print it."""
        return f"{self.id:x}"


@dataclass(frozen=True)
class Status:
    """One member's view (``Maintenance.Status`` of one endpoint)."""

    endpoint: str
    member_id: int
    leader: int
    version: str
    db_size: int
    db_size_in_use: int
    raft_index: int
    raft_term: int
    raft_applied_index: int
    errors: tuple[str, ...]
    is_learner: bool


@dataclass(frozen=True)
class Alarm:
    member_id: int
    alarm: str
    """``NOSPACE`` or ``CORRUPT``."""


@dataclass(frozen=True)
class HealthResult:
    """A quorum read of one endpoint: ``healthy`` or the ``error`` that made it fail."""

    endpoint: str
    healthy: bool
    took: float
    error: str | None = None


@dataclass(frozen=True)
class SnapshotInfo:
    """What ``etcdutl snapshot status`` reports of a snapshot file."""

    hash: int
    revision: int
    total_keys: int
    total_size: int
