"""Keys, CAs and certificates shaped exactly like the ones Talos makes.

Talos (through ``siderolabs/crypto``) has fixed habits that other tools depend on, and files written
here must be interchangeable with Talos's:

* PEM types: ECDSA keys are SEC1 ``EC PRIVATE KEY``, RSA keys PKCS#1 ``RSA PRIVATE KEY``, Ed25519
  keys PKCS#8 DER under the non-standard label ``ED25519 PRIVATE KEY``. Reading also accepts
  generic PKCS#8 ``PRIVATE KEY`` (kubeadm and OpenSSL write it).
* A CA carries KeyUsage ``DigitalSignature|CertSign`` (critical), ExtKeyUsage
  ``ServerAuth, ClientAuth``, BasicConstraints ``CA:TRUE`` without path length (critical), and a
  SubjectKeyIdentifier = SHA-1 of the public key; its subject holds only Organization.
* A leaf carries KeyUsage ``DigitalSignature`` (critical), the ExtKeyUsages asked for, no
  BasicConstraints, and an AuthorityKeyIdentifier pointing at the CA.
* Serial numbers are random below 2**128; times are whole seconds.

This package turns bytes into keys and certificates and back. It knows nothing of secrets bundles,
talosconfig files or YAML, and never touches the filesystem. Every malformed input raises
:class:`~ichor.machinery.errors.PKIError`.

``_pem`` reads and writes PEM blocks (certificates, CSRs, fingerprints), ``_keys`` makes and encodes
private keys, ``_certs`` makes CAs, leaves and CSRs (:class:`CertKey`).
"""

from __future__ import annotations

__all__ = [
    "PEM_CERTIFICATE",
    "PEM_CERTIFICATE_REQUEST",
    "PEM_EC_PRIVATE_KEY",
    "PEM_ED25519_PRIVATE_KEY",
    "PEM_PRIVATE_KEY",
    "PEM_RSA_PRIVATE_KEY",
    "CertKey",
    "PrivateKey",
    "encode_private_key",
    "issue_certificate",
    "issued_by_any",
    "key_algorithm",
    "load_certificate",
    "load_certificates",
    "load_csr",
    "load_into_ssl_context",
    "load_private_key",
    "new_csr",
    "new_ecdsa_ca",
    "new_ecdsa_key",
    "new_ed25519_ca",
    "new_ed25519_key",
    "new_key_like",
    "new_keypair",
    "new_rsa_ca",
    "new_rsa_key",
    "new_self_signed_ca",
    "spki_fingerprint",
    "spki_sha256",
    "utc_now",
]

from ._certs import (
    CertKey,
    issue_certificate,
    new_csr,
    new_ecdsa_ca,
    new_ed25519_ca,
    new_key_like,
    new_keypair,
    new_rsa_ca,
    new_self_signed_ca,
    utc_now,
)
from ._keys import (
    PrivateKey,
    encode_private_key,
    key_algorithm,
    load_into_ssl_context,
    load_private_key,
    new_ecdsa_key,
    new_ed25519_key,
    new_rsa_key,
)
from ._keys import PublicKey as PublicKey
from ._pem import (
    PEM_CERTIFICATE,
    PEM_CERTIFICATE_REQUEST,
    PEM_EC_PRIVATE_KEY,
    PEM_ED25519_PRIVATE_KEY,
    PEM_PRIVATE_KEY,
    PEM_RSA_PRIVATE_KEY,
    issued_by_any,
    load_certificate,
    load_certificates,
    load_csr,
    spki_fingerprint,
    spki_sha256,
)
