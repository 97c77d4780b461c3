"""KubeSpan's pure parts: a node's WireGuard key pair and its address on the KubeSpan network.

* :func:`ula_prefix` - Talos's unique local /64 for a cluster and a purpose (RFC 4193 ``fd``, the
  last 16 bytes of SHA-256 of the cluster id, the purpose in byte 7; KubeSpan's purpose is 2);
* :func:`eui64_address` - a MAC's modified EUI-64 interface id (RFC 4291 appendix A) in a prefix,
  as a /128: the node's KubeSpan address;
* :func:`new_private_key` / :func:`public_key` - WireGuard's Curve25519 keys in base64, the private
  key clamped as ``wg genkey`` clamps it.

No I/O; :mod:`ichor.machined.controllers.kubespan` keeps the identity in STATE.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import os

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ichor.machinery.errors import KubeSpanError

__all__ = [
    "ULA_KUBESPAN",
    "ULA_SIDEROLINK",
    "KubeSpanError",
    "eui64_address",
    "new_private_key",
    "public_key",
    "ula_prefix",
]

ULA_KUBESPAN = 0x02
"""Talos's ``network.ULAKubeSpan`` purpose byte."""
ULA_SIDEROLINK = 0x03
"""Talos's ``network.ULASideroLink`` purpose byte (point-to-point addresses: never a KubeSpan endpoint)."""


def ula_prefix(cluster_id: str, purpose: int) -> ipaddress.IPv6Network:
    """The cluster's unique local /64 for ``purpose``."""
    data = bytearray(hashlib.sha256(cluster_id.encode()).digest()[-16:])
    data[0] = 0xFD
    data[7] = purpose
    return ipaddress.IPv6Network((bytes(data[:8]) + bytes(8), 64))


def eui64_address(prefix: ipaddress.IPv6Network, mac: str) -> ipaddress.IPv6Network:
    """The /128 of ``mac``'s modified EUI-64 interface id in ``prefix`` (a 48-bit MAC)."""
    try:
        raw = bytes.fromhex(mac.replace(":", "").replace("-", ""))
    except ValueError:
        raw = b""
    if len(raw) != 6:
        raise KubeSpanError(f"failed to parse MAC into EUI-64 address: {mac!r} is not a 48-bit MAC")
    interface = bytes([raw[0] ^ 0x02]) + raw[1:3] + b"\xff\xfe" + raw[3:]
    address = ipaddress.IPv6Address(prefix.network_address.packed[:8] + interface)
    return ipaddress.IPv6Network((address, 128))


def new_private_key() -> str:
    """A new WireGuard private key (base64, clamped)."""
    key = bytearray(os.urandom(32))
    key[0] &= 248
    key[31] = (key[31] & 127) | 64
    return base64.b64encode(bytes(key)).decode()


def public_key(private_key: str) -> str:
    """The WireGuard public key of a base64 private key."""
    try:
        raw = base64.b64decode(private_key, validate=True)
    except binascii.Error:
        raw = b""
    if len(raw) != 32:
        raise KubeSpanError("a WireGuard private key is 32 bytes in base64")
    public = X25519PrivateKey.from_private_bytes(raw).public_key()
    return base64.b64encode(public.public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
