"""Encryption of affiliate data and endpoints with the cluster secret, as Talos's discovery client does.

The discovery server stores opaque blobs; only nodes holding ``cluster.secret`` can read them:

* affiliate data: AES-GCM, a random 12-byte nonce in front of the sealed message;
* endpoints: AES block by block (ECB) over ``len(message) || message`` padded with zeros to the
  block size, so equal endpoints encrypt equally and the server can deduplicate them.

This module only transforms bytes; it never talks to the network and never logs.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ichor.discovery._errors import DecryptError, DiscoveryConfigError

__all__ = ["NONCE_SIZE", "AffiliateCipher"]

NONCE_SIZE = 12
_BLOCK = 16


class AffiliateCipher:
    """Seals and opens affiliate data and endpoints with one cluster key (16, 24 or 32 bytes)."""

    def __init__(self, key: bytes) -> None:
        if len(key) not in (16, 24, 32):
            raise DiscoveryConfigError(
                f"cluster secret is {len(key)} bytes long; AES needs 16, 24 or 32 (Talos generates 32)",
                hint="set cluster.secret to the base64 of 32 random bytes (talosctl gen secrets does)",
            )
        self._gcm = AESGCM(key)
        self._block = Cipher(algorithms.AES(key), modes.ECB())

    def seal_data(self, plain: bytes, *, nonce: bytes | None = None) -> bytes:
        nonce = os.urandom(NONCE_SIZE) if nonce is None else nonce
        return nonce + self._gcm.encrypt(nonce, plain, None)

    def open_data(self, sealed: bytes) -> bytes:
        if len(sealed) < NONCE_SIZE:
            raise DecryptError(f"affiliate data is {len(sealed)} bytes, shorter than its nonce")
        try:
            return self._gcm.decrypt(sealed[:NONCE_SIZE], sealed[NONCE_SIZE:], None)
        except InvalidTag:
            raise DecryptError(
                "affiliate data does not decrypt with this cluster's key",
                hint="the affiliate belongs to a node with a different cluster.secret",
            ) from None

    def seal_endpoint(self, plain: bytes) -> bytes:
        if len(plain) > 255:
            raise ValueError(f"endpoint message of {len(plain)} bytes does not fit a one-byte length")
        data = bytes([len(plain)]) + plain
        data += b"\0" * (-len(data) % _BLOCK)
        encryptor = self._block.encryptor()
        return encryptor.update(data) + encryptor.finalize()

    def open_endpoint(self, sealed: bytes) -> bytes:
        if not sealed or len(sealed) % _BLOCK:
            raise DecryptError(f"endpoint of {len(sealed)} bytes is not a whole number of AES blocks")
        decryptor = self._block.decryptor()
        data = decryptor.update(sealed) + decryptor.finalize()
        size = data[0]
        if size > len(data) - 1 or any(data[1 + size :]):
            raise DecryptError("endpoint does not decrypt with this cluster's key")
        return data[1 : 1 + size]
