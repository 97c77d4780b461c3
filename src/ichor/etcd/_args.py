"""etcd's command line, built from the machine config the way Talos builds it.

Talos's etcd service passes a fixed set of flags it owns (name, data dir, URLs, TLS files, the
corruption checks) and refuses any of them in ``cluster.etcd.extraArgs`` with ``extra arg "<name>"
is not allowed``; everything else in ``extraArgs`` is passed through or overrides a default
(``initial-cluster``, ``initial-cluster-state``, ``initial-advertise-peer-urls``,
``advertise-client-urls``). Flags are emitted sorted, as ``--key=value``.

Addresses follow Talos's etcd ``SpecController``: ``advertisedSubnets``/``listenSubnets`` are
CIDRs, ``!``-prefixed entries exclude; without ``advertisedSubnets`` the node's first address is
advertised; without ``listenSubnets`` etcd listens on the wildcard. A process node (``exclusive``)
shares the host's loopback with other nodes, so it binds only its own addresses - never the
wildcard or ``127.0.0.1``.

This module computes strings; it never reads the data directory or starts anything.
"""

from __future__ import annotations

__all__ = [
    "CIPHER_SUITES",
    "CLIENT_PORT",
    "DENIED_ARGS",
    "METRICS_PORT",
    "PEER_PORT",
    "EtcdAddresses",
    "build_args",
    "build_env",
    "etcd_url",
    "filter_addresses",
    "format_initial_cluster",
    "select_addresses",
]

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ichor.etcd._errors import EtcdConfigError
from ichor.etcd._pki import PKIPaths
from ichor.machinery import subnets
from ichor.machinery.errors import SubnetError

CLIENT_PORT = 2379
PEER_PORT = 2380
METRICS_PORT = 2381

# Talos sets these for etcd through the environment (TLS 1.2 AEAD suites only).
CIPHER_SUITES = (
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,"
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,"
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305"
)

# Flags Talos owns; `listen-metrics-urls` is Ichor's (a process node must not let etcd pick).
DENIED_ARGS = frozenset(
    {
        "name",
        "auto-tls",
        "peer-auto-tls",
        "data-dir",
        "listen-peer-urls",
        "listen-client-urls",
        "client-cert-auth",
        "cert-file",
        "key-file",
        "trusted-ca-file",
        "peer-client-cert-auth",
        "peer-cert-file",
        "peer-key-file",
        "peer-trusted-ca-file",
        "experimental-initial-corrupt-check",
        "experimental-watch-progress-notify-interval",
        "experimental-compact-hash-check-enabled",
        "listen-metrics-urls",
    }
)

_COMPACT_HASH_CHECK_SINCE = (3, 5, 5)
_CLUSTER_STATES = ("new", "existing")


@dataclass(frozen=True)
class EtcdAddresses:
    """Which addresses etcd advertises and listens on (plain IPs, no ports)."""

    advertised: tuple[str, ...]
    listen_peer: tuple[str, ...]
    listen_client: tuple[str, ...]

    @property
    def peer_urls(self) -> list[str]:
        return [etcd_url(a, PEER_PORT) for a in self.advertised]

    @property
    def client_urls(self) -> list[str]:
        return [etcd_url(a, CLIENT_PORT) for a in self.advertised]


def etcd_url(address: str, port: int, scheme: str = "https") -> str:
    """``https://10.0.0.1:2379``; IPv6 addresses are bracketed."""
    host = f"[{address}]" if ":" in address else address
    return f"{scheme}://{host}:{port}"


def filter_addresses(
    addresses: Iterable[str], cidrs: Iterable[str], *, setting: str = "subnets"
) -> list[str]:
    """Addresses inside any positive CIDR (all, when there is none) and inside no ``!CIDR``; order kept
    (:func:`ichor.machinery.subnets.filter_addresses`, as an etcd error)."""
    try:
        return subnets.filter_addresses(addresses, cidrs, setting=setting)
    except SubnetError as err:
        raise EtcdConfigError(str(err), hint=err.hint) from None


def select_addresses(
    node_addresses: Sequence[str],
    *,
    advertised_subnets: Sequence[str] = (),
    listen_subnets: Sequence[str] = (),
    exclusive: bool = False,
) -> EtcdAddresses:
    """etcd's advertised and listen addresses from the node's addresses and ``cluster.etcd`` subnets.

    ``exclusive``: the node owns only its addresses on a shared host (process nodes); listening
    falls back to the node's own addresses instead of the wildcard, and loopback is never added.
    """
    if not node_addresses:
        raise EtcdConfigError(
            "the node has no addresses to run etcd on", hint="check the node's network setup"
        )
    try:
        advertised = subnets.pick_advertised(
            node_addresses, advertised_subnets, setting="cluster.etcd.advertisedSubnets"
        )
    except SubnetError as err:
        raise EtcdConfigError(str(err), hint=err.hint) from None
    has_v6 = any(":" in a for a in filter_addresses(node_addresses, [], setting="node addresses"))
    if listen_subnets:
        listen_peer = filter_addresses(node_addresses, listen_subnets, setting="cluster.etcd.listenSubnets")
        if not listen_peer:
            raise EtcdConfigError(
                "no address of this node matches cluster.etcd.listenSubnets "
                f"{list(listen_subnets)} (node addresses: {', '.join(node_addresses)})",
                hint="fix cluster.etcd.listenSubnets to include one of the node's addresses",
            )
        loopback = [] if exclusive else ["::1" if has_v6 else "127.0.0.1"]
        listen_client = [*loopback, *listen_peer]
    elif exclusive:
        listen_peer = filter_addresses(node_addresses, [], setting="node addresses")
        listen_client = list(listen_peer)
    else:
        wildcard = "::" if has_v6 else "0.0.0.0"
        listen_peer = [wildcard]
        listen_client = [wildcard]
    return EtcdAddresses(tuple(advertised), tuple(listen_peer), tuple(listen_client))


def format_initial_cluster(members: Iterable[tuple[str, str]]) -> str:
    """etcd's ``--initial-cluster`` value from ``(name, peer URL)`` pairs: ``a=https://...,b=...``."""
    return ",".join(f"{name}={url}" for name, url in members)


def _check_extra_args(extra_args: Mapping[str, str]) -> None:
    for key, value in extra_args.items():
        if not key or key.startswith("-") or "=" in key:
            raise EtcdConfigError(
                f"invalid etcd extra arg name {key!r}",
                hint="cluster.etcd.extraArgs keys are flag names without leading dashes, e.g. 'election-timeout'",
            )
        if not isinstance(value, str):
            raise EtcdConfigError(
                f"etcd extra arg {key!r} must be a string, got {type(value).__name__}",
                hint=f'quote the value of {key} in cluster.etcd.extraArgs (e.g. "{value}")',
            )
        if key in DENIED_ARGS:
            raise EtcdConfigError(
                f'extra arg "{key}" is not allowed',
                hint=f"remove {key!r} from cluster.etcd.extraArgs: Talos sets it itself",
            )


def build_args(
    *,
    name: str,
    data_dir: Path,
    pki: PKIPaths,
    addresses: EtcdAddresses,
    initial_cluster: str | None = None,
    initial_cluster_state: str | None = None,
    extra_args: Mapping[str, str] | None = None,
    metrics: bool = True,
    etcd_version: tuple[int, int, int] = (3, 5, 13),
) -> list[str]:
    """etcd's arguments (without the binary), Talos's flags merged with ``cluster.etcd.extraArgs``.

    ``initial_cluster``/``initial_cluster_state`` are given only when the data directory is empty
    (a new member); ``initial-advertise-peer-urls`` is then set too. ``etcd_version`` drops flags
    the binary does not know (``experimental-compact-hash-check-enabled`` needs 3.5.5).
    """
    extra = dict(extra_args or {})
    _check_extra_args(extra)
    if initial_cluster_state is not None and initial_cluster_state not in _CLUSTER_STATES:
        raise EtcdConfigError(
            f"invalid initial cluster state {initial_cluster_state!r}",
            hint="initial-cluster-state is 'new' (bootstrap) or 'existing' (join)",
        )
    if not name:
        raise EtcdConfigError("etcd needs a member name", hint="set machine.network.hostname")

    def urls(hosts: Sequence[str], port: int, scheme: str = "https") -> str:
        return ",".join(etcd_url(h, port, scheme) for h in hosts)

    args: dict[str, str] = {
        "name": name,
        "auto-tls": "false",
        "peer-auto-tls": "false",
        "data-dir": str(data_dir),
        "listen-peer-urls": urls(addresses.listen_peer, PEER_PORT),
        "listen-client-urls": urls(addresses.listen_client, CLIENT_PORT),
        "client-cert-auth": "true",
        "cert-file": str(pki.server_crt),
        "key-file": str(pki.server_key),
        "trusted-ca-file": str(pki.ca_crt),
        "peer-client-cert-auth": "true",
        "peer-cert-file": str(pki.peer_crt),
        "peer-key-file": str(pki.peer_key),
        "peer-trusted-ca-file": str(pki.ca_crt),
        "experimental-initial-corrupt-check": "true",
        "experimental-watch-progress-notify-interval": "5s",
    }
    if etcd_version >= _COMPACT_HASH_CHECK_SINCE:
        args["experimental-compact-hash-check-enabled"] = "true"
    if metrics:
        args["listen-metrics-urls"] = urls(addresses.listen_client, METRICS_PORT, "http")
    fresh = initial_cluster is not None or initial_cluster_state is not None
    if initial_cluster_state is not None and "initial-cluster-state" not in extra:
        args["initial-cluster-state"] = initial_cluster_state
    if initial_cluster is not None and "initial-cluster" not in extra:
        args["initial-cluster"] = initial_cluster
    if fresh and "initial-advertise-peer-urls" not in extra:
        args["initial-advertise-peer-urls"] = urls(addresses.advertised, PEER_PORT)
    if "advertise-client-urls" not in extra:
        args["advertise-client-urls"] = urls(addresses.advertised, CLIENT_PORT)
    args.update(extra)
    return [f"--{key}={args[key]}" for key in sorted(args)]


def build_env(machine_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """etcd's environment: ``machine.env`` plus Talos's cipher-suite restriction."""
    env = dict(machine_env or {})
    env["ETCD_CIPHER_SUITES"] = CIPHER_SUITES
    return env
