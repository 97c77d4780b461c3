"""A node's etcd certificates, issued from the cluster's etcd CA the way Talos issues them.

Talos (``EtcdController`` + ``etcd.CertificateGenerator``) gives every control-plane node, from
``cluster.etcd.ca``:

* ``server`` - CN = hostname, SANs = hostname (+ FQDN), ``localhost``, the node's addresses,
  ``127.0.0.1`` (and ``::1`` when the node has an IPv6 address); ServerAuth + ClientAuth.
* ``peer``   - CN = hostname, SANs = hostname (+ FQDN) and the node's addresses; ServerAuth +
  ClientAuth (peers dial each other with it).
* ``admin``  - CN = ``talos``, no SANs, ClientAuth only: what machined uses to talk to etcd.

All three live 87600 h (10 years) and use a fresh key of the CA's family (ECDSA P-256 for Talos's
etcd CA). They are written under ``/system/secrets/etcd`` as ``ca.crt``, ``ca.key``,
``server.{crt,key}``, ``peer.{crt,key}`` and ``admin.{crt,key}``.

This module issues and writes; it never starts etcd or decides when certificates are renewed.
"""

from __future__ import annotations

__all__ = ["CERT_TTL", "ETCD_PKI_DIR", "EtcdCerts", "PKIPaths", "issue_certs", "write_pki"]

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from ichor.etcd._errors import EtcdConfigError
from ichor.machinery.files import write_atomic
from ichor.machinery.pki import CertKey, new_keypair

CERT_TTL = timedelta(hours=87600)
ETCD_PKI_DIR = "/system/secrets/etcd"
"""The Talos path of the etcd PKI directory (resolve it through the node's Layout)."""

ADMIN_COMMON_NAME = "talos"


@dataclass(frozen=True)
class PKIPaths:
    """Talos's file names in an etcd PKI directory."""

    directory: Path

    @property
    def ca_crt(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def server_crt(self) -> Path:
        return self.directory / "server.crt"

    @property
    def server_key(self) -> Path:
        return self.directory / "server.key"

    @property
    def peer_crt(self) -> Path:
        return self.directory / "peer.crt"

    @property
    def peer_key(self) -> Path:
        return self.directory / "peer.key"

    @property
    def admin_crt(self) -> Path:
        return self.directory / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.directory / "admin.key"


@dataclass(frozen=True)
class EtcdCerts:
    """The CA (``key`` may be empty) and the three key pairs of one node."""

    ca: CertKey
    server: CertKey
    peer: CertKey
    admin: CertKey


def _check_addresses(addresses: Sequence[str]) -> list[str]:
    out: list[str] = []
    for address in addresses:
        try:
            out.append(str(ipaddress.ip_address(address)))
        except ValueError:
            raise EtcdConfigError(
                f"invalid node address {address!r} for the etcd certificates",
                hint="node addresses must be plain IP addresses (no port, no CIDR prefix)",
            ) from None
    return out


def issue_certs(
    ca: CertKey,
    *,
    hostname: str,
    addresses: Sequence[str],
    domain: str = "",
    shared_loopback: bool = False,
    now: datetime | None = None,
) -> EtcdCerts:
    """Issue a node's server, peer and admin certificates from the etcd CA (needs its key).

    ``shared_loopback``: the node is a process on a host whose loopback other nodes share
    (addresses 127.x). The kernel then sends its peer connections from ``127.0.0.1``, and etcd
    checks a peer's client certificate against the address the connection comes from, so the peer
    certificate also names ``127.0.0.1``. Talos on a machine never needs this.
    """
    if not hostname:
        raise EtcdConfigError(
            "cannot issue etcd certificates without a hostname", hint="set machine.network.hostname"
        )
    ips = _check_addresses(addresses)
    dns = [hostname] + ([f"{hostname}.{domain}"] if domain else [])
    local_ips = ["127.0.0.1"]
    if any(ipaddress.ip_address(ip).version == 6 for ip in ips):
        local_ips.append("::1")
    server = new_keypair(
        ca,
        common_name=hostname,
        ttl=CERT_TTL,
        server=True,
        client=True,
        dns_names=[*dns, "localhost"],
        ip_addresses=[*ips, *local_ips],
        now=now,
    )
    peer = new_keypair(
        ca,
        common_name=hostname,
        ttl=CERT_TTL,
        server=True,
        client=True,
        dns_names=dns,
        ip_addresses=[*ips, "127.0.0.1"] if shared_loopback else ips,
        now=now,
    )
    admin = new_keypair(ca, common_name=ADMIN_COMMON_NAME, ttl=CERT_TTL, server=False, client=True, now=now)
    return EtcdCerts(ca=ca, server=server, peer=peer, admin=admin)


def write_pki(directory: Path, certs: EtcdCerts) -> PKIPaths:
    """Write ``certs`` under ``directory`` with Talos's file names, each 0600, atomically."""
    paths = PKIPaths(directory)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(paths.ca_crt, certs.ca.crt)
    if certs.ca.key:
        write_atomic(paths.ca_key, certs.ca.key)
    for crt, key, pair in (
        (paths.server_crt, paths.server_key, certs.server),
        (paths.peer_crt, paths.peer_key, certs.peer),
        (paths.admin_crt, paths.admin_key, certs.admin),
    ):
        write_atomic(key, pair.key)
        write_atomic(crt, pair.crt)
    return paths
