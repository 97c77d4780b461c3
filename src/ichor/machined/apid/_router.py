"""Where a call goes, from its metadata alone (Talos's apid director).

1. ``proxyfrom`` present: another apid already routed it -> local machined.
2. ``node`` with more than one value -> InvalidArgument.
3. Without forwarding (a worker has no client certificate), a single ``node``/``nodes`` value that
   names this node is served locally.
4. ``nodes`` -> one-to-many to every value (never for COSI methods).
5. ``node`` -> one-to-one to that node.
6. neither -> local machined.

Decides only; opens no connections.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from multidict import MultiMapping

from ichor.machinery.constants import NO_FORWARDING

from ._methods import COSI_PREFIX

NODE_KEY = "node"
NODES_KEY = "nodes"
PROXYFROM_KEY = "proxyfrom"


class RouteKind(StrEnum):
    LOCAL = "local"
    ONE_TO_ONE = "one-to-one"
    ONE_TO_MANY = "one-to-many"


@dataclass(frozen=True)
class Route:
    kind: RouteKind
    targets: tuple[str, ...] = ()


LOCAL = Route(RouteKind.LOCAL)


def _values(metadata: MultiMapping[str | bytes], key: str) -> list[str]:
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in metadata.getall(key, [])]


def _has_port(target: str) -> bool:
    if target.startswith("["):
        return "]:" in target
    # A bare IPv6 address has several colons and no port; host:port has exactly one.
    return target.count(":") == 1


def check_target(target: str) -> str:
    """Talos refuses empty targets and ``host:port`` ones: apid always dials port 50000."""
    if not target or _has_port(target):
        raise GRPCError(Status.INTERNAL, f'invalid target "{target}"')
    return target


def route(
    method: str,
    metadata: MultiMapping[str | bytes],
    *,
    forwarding: bool,
    is_local_target: Callable[[str], bool],
) -> Route:
    """The route for a call to ``method`` carrying ``metadata``; refusals raise ``GRPCError``."""
    if PROXYFROM_KEY in metadata:
        return LOCAL
    nodes = _values(metadata, NODES_KEY)
    node = _values(metadata, NODE_KEY)
    if len(node) > 1:
        raise GRPCError(Status.INVALID_ARGUMENT, "node metadata must be single-valued")
    if not forwarding:
        if node and is_local_target(node[0]):
            node = []
        if len(nodes) == 1 and is_local_target(nodes[0]):
            nodes = []
    if nodes:
        if method.startswith(COSI_PREFIX):
            raise GRPCError(Status.INVALID_ARGUMENT, "one-2-many proxying is not supported for COSI methods")
        _require_forwarding(forwarding)
        return Route(RouteKind.ONE_TO_MANY, tuple(check_target(t) for t in nodes))
    if node:
        _require_forwarding(forwarding)
        return Route(RouteKind.ONE_TO_ONE, (check_target(node[0]),))
    return LOCAL


def _require_forwarding(forwarding: bool) -> None:
    if not forwarding:
        raise GRPCError(Status.PERMISSION_DENIED, NO_FORWARDING)


def local_target_checker(addresses: Iterable[str]) -> Callable[[str], bool]:
    """``is_local_target`` for a node known by ``addresses`` (its IPs, hostname, ...)."""
    known = frozenset(addresses)
    return known.__contains__
