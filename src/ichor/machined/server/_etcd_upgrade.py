"""The etcd side of ``talosctl upgrade`` on a control plane, as Talos 1.7: the upgrade mutex and the
checks before an upgrade (Talos's ``ValidateForUpgrade``), with Talos's texts.

* :func:`upgrade_mutex`: etcd's concurrency mutex ``talos:v1:etcdUpgradeMutex`` taken with
  ``TryLock`` (a key ``<prefix>/<lease hex>`` bound to a 60 s lease; the holder is the key with the
  lowest create revision). It guards only the checks, never the upgrade itself: two control planes
  asked at once cannot both pass the checks on the same membership, and the one that finds it held
  fails at once (Talos does not wait) with :data:`MUTEX_LOCKED`. The key goes when the checks end
  (the lease is revoked), or within 60 s when its holder dies.
* :func:`upgrade_refusal`: the rules, in Talos's order, over the member list and a health probe per
  member: without ``--preserve`` a single member is refused (:data:`ETCD_SINGLE_MEMBER`); two
  members are refused even with ``--preserve`` (one down loses quorum); then, member by member, one
  not started (no name yet) or not answering a quorum read of ``health`` within
  :data:`QUORUM_CHECK_TIMEOUT` is refused, named by its 16-digit hex id.

``--force`` skips all of this (no etcd client, no mutex, no checks): the caller decides. Nothing here
changes the membership; leaving etcd is the upgrade sequence's (``EtcdOperations.leave_for_upgrade``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from ichor.etcd import EtcdError, Member
from ichor.machined.controllers.network.vip import ElectionStore

__all__ = [
    "ETCD_SINGLE_MEMBER",
    "MUTEX_LOCKED",
    "QUORUM_CHECK_TIMEOUT",
    "UPGRADE_MUTEX_PREFIX",
    "UPGRADE_MUTEX_TTL",
    "UpgradeMutexError",
    "upgrade_mutex",
    "upgrade_refusal",
]

UPGRADE_MUTEX_PREFIX = "talos:v1:etcdUpgradeMutex"
"""Talos's ``constants.EtcdTalosEtcdUpgradeMutex``."""
UPGRADE_MUTEX_TTL = 60
"""Seconds of the mutex's lease (Talos's ``MinimumEtcdUpgradeLeaseLockSeconds``): how long a holder
that died keeps it."""
QUORUM_CHECK_TIMEOUT = 15.0
"""Seconds a member has to answer the quorum read (Talos's ``QuorumCheckTimeout``)."""
ETCD_SINGLE_MEMBER = (
    "only 1 etcd member found; assuming this is not an HA setup and refusing to upgrade; "
    "if this is a single-node cluster, use --preserve to upgrade"
)
MUTEX_LOCKED = "mutex: Locked by another session"
"""etcd's ``concurrency.ErrLocked``."""

Probe = Callable[[Member], Awaitable[str | None]]


class UpgradeMutexError(Exception):
    """The mutex could not be taken; the text is Talos's (after ``failed to acquire upgrade mutex: ``)."""


async def _keep_alive(store: ElectionStore, lease: int) -> None:
    while True:
        await asyncio.sleep(UPGRADE_MUTEX_TTL / 3)
        await store.lease_keepalive(lease, timeout=UPGRADE_MUTEX_TTL / 3)


@contextlib.asynccontextmanager
async def upgrade_mutex(store: ElectionStore, prefix: str = UPGRADE_MUTEX_PREFIX) -> AsyncIterator[str]:
    """Hold the upgrade mutex for the block (TryLock: :class:`UpgradeMutexError` when another
    session holds it); yields the key held."""
    try:
        lease = await store.lease_grant(UPGRADE_MUTEX_TTL)
    except EtcdError as err:
        raise UpgradeMutexError(f"error establishing etcd concurrency session: {err}") from None
    try:
        key = f"{prefix}/{lease:x}"
        try:
            created = await store.create(key, "", lease=lease)
            if created is None:  # a fresh lease's key cannot exist: etcd lost track of it
                raise EtcdError(f"mutex key {key} already exists")
            held = await store.get(f"{prefix}/", prefix=True)
        except EtcdError as err:
            raise UpgradeMutexError(f"error trying to lock etcd upgrade mutex: {err}") from None
        if any(kv.create_revision < created for kv in held.kvs):
            raise UpgradeMutexError(f"error trying to lock etcd upgrade mutex: {MUTEX_LOCKED}")
        keepalive = asyncio.ensure_future(_keep_alive(store, lease))
        try:
            yield key
        finally:
            keepalive.cancel()
            await asyncio.gather(keepalive, return_exceptions=True)
    finally:  # TryLock's own key goes too when it lost (the lease carries it)
        with contextlib.suppress(EtcdError, OSError, TimeoutError):
            await store.lease_revoke(lease, timeout=3.0)


async def upgrade_refusal(members: Sequence[Member], *, preserve: bool, probe: Probe) -> str | None:
    """Why Talos refuses to upgrade a control plane of this membership (None: it may); ``probe``
    answers why a member is not healthy (None when it is) and is asked in member order, stopping at
    the first refusal as Talos does."""
    if not preserve and len(members) == 1:
        return ETCD_SINGLE_MEMBER
    if len(members) == 2:
        return f"etcd member count({len(members)}) is insufficient to maintain quorum if upgrade commences"
    for member in members:
        if not member.name:  # etcd names a member once it has started
            return f"etcd member {member.id:016x} is not started, all members must be running to perform an upgrade"
        problem = await probe(member)
        if problem is not None:
            return (
                f"etcd member {member.id:016x} is not healthy; all members must be healthy to perform an "
                f"upgrade: {problem}"
            )
    return None
