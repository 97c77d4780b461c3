"""The one exception tree of :mod:`ichor.etcd`.

::

    MachineryError (ichor.machinery.errors)
    └── EtcdError                       anything about running or talking to etcd; carries ``hint``
        ├── EtcdBinaryNotFoundError     no etcd/etcdutl binary found
        │   └── EtcdBuildError          etcd could not be built from its Go modules (no Go, no proxy, ...)
        ├── EtcdConfigError             arguments that cannot be built (extraArgs, subnets, addresses)
        ├── EtcdUnavailableError        no endpoint answered, no leader, request timed out
        │   └── EtcdTLSError            the TLS handshake failed or our certificate was refused
        ├── EtcdRequestError            etcd answered with a gRPC error (``status``, etcd's text)
        │   ├── EtcdNotFoundError       "member not found"
        │   ├── EtcdLearnerNotReadyError  "can only promote a learner member which is in sync with leader"
        │   ├── EtcdTooManyLearnersError  "too many learner members in cluster"
        │   ├── EtcdNotLeaderError      "not leader" (move-leader sent to a follower)
        │   └── EtcdNoSpaceError        "mvcc: database space exceeded" (NOSPACE alarm)
        └── EtcdSnapshotError           a snapshot that cannot be saved, read or restored

``str()`` is what a user sees after ``error:``; etcd's own message text is kept verbatim inside it
(``etcdserver: member not found``) because Talos shows it that way and people search for it.
This module only defines errors; it never decides when to retry.
"""

from __future__ import annotations

__all__ = [
    "EtcdBinaryNotFoundError",
    "EtcdBuildError",
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
]

from ichor.machinery.errors import MachineryError


class EtcdError(MachineryError):
    """Base of every error :mod:`ichor.etcd` raises on purpose."""


class EtcdBinaryNotFoundError(EtcdError):
    """No usable etcd, etcdctl or etcdutl binary."""


class EtcdBuildError(EtcdBinaryNotFoundError):
    """etcd could not be built from its official Go modules, or the build is not the version asked for."""


class EtcdConfigError(EtcdError):
    """etcd's command line cannot be built from the machine config (``cluster.etcd.*``)."""


class EtcdUnavailableError(EtcdError):
    """No etcd endpoint could serve the request (unreachable, no leader, timed out)."""


class EtcdTLSError(EtcdUnavailableError):
    """The TLS handshake with etcd failed, or etcd refused our client certificate."""


class EtcdRequestError(EtcdError):
    """etcd answered with a gRPC error; ``status`` is its gRPC status name, ``etcd_message`` its text."""

    def __init__(self, message: str, *, status: str, etcd_message: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.etcd_message = etcd_message


class EtcdNotFoundError(EtcdRequestError):
    """The member ID is not in the cluster (etcd: "member not found")."""


class EtcdLearnerNotReadyError(EtcdRequestError):
    """A learner cannot be promoted until its log has caught up with the leader's."""


class EtcdTooManyLearnersError(EtcdRequestError):
    """etcd allows a limited number of learners at once (one, in etcd 3.5)."""


class EtcdNotLeaderError(EtcdRequestError):
    """The request must be sent to the current leader (move-leader)."""


class EtcdNoSpaceError(EtcdRequestError):
    """The backend quota is exhausted and etcd raised the NOSPACE alarm."""


class EtcdSnapshotError(EtcdError):
    """A snapshot that cannot be saved, verified, inspected or restored."""
