"""The cluster secrets bundle (``secrets.yaml``): everything that makes two configs one cluster.

The on-disk form is Talos's, key for key (lowercase names, this order)::

    cluster:    {id, secret}
    secrets:    {bootstraptoken, aescbcencryptionsecret?, secretboxencryptionsecret?}
    trustdinfo: {token}
    certs:      {etcd: {crt, key}, k8s: {crt, key}, k8saggregator: {crt, key},
                 k8sserviceaccount: {key}, os: {crt, key}}

with ``crt``/``key`` holding base64 of PEM. Generated bundles use secretbox for contracts >= 1.3 and
AES-CBC before. A bundle can also be rebuilt from a control plane machine config or from a kubeadm
PKI directory.

This module builds, checks, reads and writes bundles; it does not write files (callers use
:func:`ichor.machinery.files.write_atomic`) and does not build machine configs.
"""

from __future__ import annotations

__all__ = [
    "CA_VALIDITY",
    "SecretsBundle",
    "new_cluster_id",
    "new_cluster_secret",
    "new_encryption_secret",
    "new_token",
]

import base64
import binascii
import re
import secrets as _random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from os import PathLike, urandom
from pathlib import Path
from typing import Any

from ichor.machinery.contract import CURRENT_CONTRACT, VersionContract
from ichor.machinery.errors import MachineryError, PKIError, SecretsError
from ichor.machinery.pki import (
    CertKey,
    load_certificate,
    load_private_key,
    new_ecdsa_ca,
    new_ecdsa_key,
    new_ed25519_ca,
    new_rsa_key,
)

CA_VALIDITY = timedelta(hours=87600)
"""Talos's CA lifetime: 10 years."""

_TOKEN_CHARS = "0123456789abcdefghijklmnopqrstuvwxyz"
TOKEN_PATTERN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")

_BUNDLE_HINT = "regenerate it with `talosctl gen secrets`, or fix the file by hand"


def new_token() -> str:
    """A kubeadm-style token ``[a-z0-9]{6}.[a-z0-9]{16}`` (bootstrap and trustd tokens)."""

    def part(n: int) -> str:
        return "".join(_random.choice(_TOKEN_CHARS) for _ in range(n))

    return f"{part(6)}.{part(16)}"


def new_cluster_id() -> str:
    """32 random bytes, URL-safe base64 with padding (Talos's ``cluster.id``)."""
    return base64.urlsafe_b64encode(urandom(32)).decode("ascii")


def new_cluster_secret() -> str:
    """32 random bytes, standard base64 (the discovery service AES key)."""
    return base64.b64encode(urandom(32)).decode("ascii")


def new_encryption_secret() -> str:
    """32 random bytes, standard base64 (secretbox / AES-CBC key for Kubernetes secrets at rest)."""
    return base64.b64encode(urandom(32)).decode("ascii")


@dataclass
class SecretsBundle:
    """A Talos secrets bundle. ``k8s_service_account_key`` is PEM bytes; certificate pairs are PEM."""

    cluster_id: str
    cluster_secret: str
    bootstrap_token: str
    secretbox_encryption_secret: str
    aescbc_encryption_secret: str | None
    trustd_token: str
    etcd: CertKey
    k8s: CertKey
    k8s_aggregator: CertKey
    k8s_service_account_key: bytes
    os: CertKey

    # --- building ---------------------------------------------------------------------------

    @classmethod
    def generate(
        cls, contract: VersionContract = CURRENT_CONTRACT, now: datetime | None = None
    ) -> SecretsBundle:
        """A fresh bundle with the algorithms and lifetimes Talos uses for ``contract``."""
        secretbox, aescbc = _encryption_secrets(contract)
        return cls(
            cluster_id=new_cluster_id(),
            cluster_secret=new_cluster_secret(),
            bootstrap_token=new_token(),
            secretbox_encryption_secret=secretbox,
            aescbc_encryption_secret=aescbc,
            trustd_token=new_token(),
            etcd=new_ecdsa_ca(organization="etcd", ttl=CA_VALIDITY, now=now),
            k8s=new_ecdsa_ca(organization="kubernetes", ttl=CA_VALIDITY, now=now),
            k8s_aggregator=_new_aggregator_ca(now),
            k8s_service_account_key=_new_service_account_key(contract),
            os=new_ed25519_ca(organization="talos", ttl=CA_VALIDITY, now=now),
        )

    @classmethod
    def from_kubernetes_pki(
        cls,
        directory: str | PathLike[str],
        bootstrap_token: str,
        contract: VersionContract = CURRENT_CONTRACT,
        now: datetime | None = None,
    ) -> SecretsBundle:
        """Reuse a kubeadm PKI directory (``/etc/kubernetes/pki``): its Kubernetes, etcd and
        front-proxy CAs and ``sa.key``; everything else (OS CA, tokens, cluster identity) is new.

        An empty ``bootstrap_token`` gets a fresh one.
        """
        root = Path(directory)
        hint = "pass a kubeadm PKI directory (e.g. /etc/kubernetes/pki) to --from-kubernetes-pki"
        if not root.exists():
            raise SecretsError(f"Kubernetes PKI directory {str(root)!r} does not exist", hint=hint)
        if not root.is_dir():
            raise SecretsError(f"{str(root)!r} is not a directory", hint=hint)
        if bootstrap_token and not TOKEN_PATTERN.match(bootstrap_token):
            raise SecretsError(
                f"invalid bootstrap token {bootstrap_token!r}: must match [a-z0-9]{{6}}.[a-z0-9]{{16}}",
                hint="pass a kubeadm token (see `kubeadm token list`) to -t/--kubernetes-bootstrap-token, "
                "or omit it to generate one",
            )

        def pair(crt_name: str, key_name: str) -> CertKey:
            value = CertKey(_read(root / crt_name, hint), _read(root / key_name, hint))
            _check_pair(value, f"{root / crt_name} / {key_name}")
            return value

        k8s = pair("ca.crt", "ca.key")
        etcd = pair("etcd/ca.crt", "etcd/ca.key")
        aggregator = pair("front-proxy-ca.crt", "front-proxy-ca.key")
        sa_path = root / "sa.key"
        sa_key = _read(sa_path, hint)
        _check_key(sa_key, str(sa_path))

        secretbox, aescbc = _encryption_secrets(contract)
        return cls(
            cluster_id=new_cluster_id(),
            cluster_secret=new_cluster_secret(),
            bootstrap_token=bootstrap_token or new_token(),
            secretbox_encryption_secret=secretbox,
            aescbc_encryption_secret=aescbc,
            trustd_token=new_token(),
            etcd=etcd,
            k8s=k8s,
            k8s_aggregator=aggregator,
            k8s_service_account_key=sa_key,
            os=new_ed25519_ca(organization="talos", ttl=CA_VALIDITY, now=now),
        )

    @classmethod
    def from_controlplane_config(cls, raw: Mapping[str, Any]) -> SecretsBundle:
        """Extract the bundle from a control plane's v1alpha1 config document (a mapping).

        Worker configs do not carry the CA keys and are refused with a hint.
        """
        problems: list[str] = []
        hint = "pass a controlplane machine config (controlplane.yaml); worker configs lack the CA keys"

        def get(path: str) -> Any:
            node: Any = raw
            for part in path.strip(".").split("."):
                if not isinstance(node, Mapping) or part not in node or node[part] is None:
                    return None
                node = node[part]
            return node

        def text(path: str, *, required: bool = True) -> str:
            value = get(path)
            if value is None or value == "":
                if required:
                    problems.append(f"{path} is required")
                return ""
            if not isinstance(value, str):
                problems.append(f"{path} must be a string")
                return ""
            return str(value)

        def pair(path: str) -> CertKey:
            crt, key = text(f"{path}.crt"), text(f"{path}.key")
            return _decode_pair(crt, key, path, problems)

        if get(".machine") is None or get(".cluster") is None:
            raise SecretsError("the machine config has no .machine or .cluster section", hint=hint)
        token = text(".cluster.token")
        sa_key = _decode_key(text(".cluster.serviceAccount.key"), ".cluster.serviceAccount.key", problems)
        bundle = cls(
            cluster_id=text(".cluster.id", required=False),
            cluster_secret=text(".cluster.secret", required=False),
            bootstrap_token=token,
            secretbox_encryption_secret=text(".cluster.secretboxEncryptionSecret", required=False),
            aescbc_encryption_secret=text(".cluster.aescbcEncryptionSecret", required=False) or None,
            trustd_token=text(".machine.token"),
            etcd=pair(".cluster.etcd.ca"),
            k8s=pair(".cluster.ca"),
            k8s_aggregator=pair(".cluster.aggregatorCA"),
            k8s_service_account_key=sa_key,
            os=pair(".machine.ca"),
        )
        if not bundle.secretbox_encryption_secret and not bundle.aescbc_encryption_secret:
            problems.append(
                "one of [.cluster.secretboxEncryptionSecret, .cluster.aescbcEncryptionSecret] is required"
            )
        if problems:
            raise SecretsError(
                "cannot extract secrets from the machine config: " + "; ".join(problems), hint=hint
            )
        return bundle

    # --- reading ----------------------------------------------------------------------------

    @classmethod
    def from_yaml(cls, text: str | bytes, *, source: str = "<input>") -> SecretsBundle:
        """Parse and fully check a bundle; every problem is reported with its key path."""
        from ichor.machinery.yamlio import load_documents, to_plain

        docs = load_documents(text, source=source)
        if len(docs) != 1 or not isinstance(docs[0], Mapping):
            raise SecretsError(f"{source}: a secrets bundle is a single YAML mapping", hint=_BUNDLE_HINT)
        raw = to_plain(docs[0])
        problems: list[str] = []

        def section(name: str) -> Mapping[str, Any] | None:
            value = raw.get(name)
            if value is None:
                problems.append(f"{name} is required")
                return None
            if not isinstance(value, Mapping):
                problems.append(f"{name} must be a mapping")
                return None
            return value

        def field(sec: Mapping[str, Any] | None, prefix: str, name: str, *, required: bool = True) -> str:
            if sec is None:
                return ""
            value = sec.get(name)
            if value is None or value == "":
                if required:
                    problems.append(f"{prefix}.{name} is required")
                return ""
            if not isinstance(value, str):
                problems.append(f"{prefix}.{name} must be a string")
                return ""
            return value

        cluster = section("cluster")
        secrets = section("secrets")
        trustd = section("trustdinfo")
        certs = section("certs")

        def cert_pair(name: str) -> CertKey:
            sub = certs.get(name) if certs is not None else None
            if certs is not None and sub is None:
                problems.append(f"certs.{name} is required")
            if not isinstance(sub, Mapping):
                if sub is not None:
                    problems.append(f"certs.{name} must be a mapping")
                return CertKey(b"", b"")
            crt = field(sub, f"certs.{name}", "crt")
            key = field(sub, f"certs.{name}", "key")
            return _decode_pair(crt, key, f"certs.{name}", problems)

        sa_section = certs.get("k8sserviceaccount") if certs is not None else None
        sa_key = b""
        if certs is not None and not isinstance(sa_section, Mapping):
            problems.append(
                "certs.k8sserviceaccount is required"
                if sa_section is None
                else "certs.k8sserviceaccount must be a mapping"
            )
        elif sa_section is not None:
            sa_key = _decode_key(
                field(sa_section, "certs.k8sserviceaccount", "key"), "certs.k8sserviceaccount.key", problems
            )

        bundle = cls(
            cluster_id=field(cluster, "cluster", "id"),
            cluster_secret=field(cluster, "cluster", "secret"),
            bootstrap_token=field(secrets, "secrets", "bootstraptoken"),
            secretbox_encryption_secret=field(
                secrets, "secrets", "secretboxencryptionsecret", required=False
            ),
            aescbc_encryption_secret=field(secrets, "secrets", "aescbcencryptionsecret", required=False)
            or None,
            trustd_token=field(trustd, "trustdinfo", "token"),
            etcd=cert_pair("etcd"),
            k8s=cert_pair("k8s"),
            k8s_aggregator=cert_pair("k8saggregator"),
            k8s_service_account_key=sa_key,
            os=cert_pair("os"),
        )
        if secrets is not None:
            if not bundle.secretbox_encryption_secret and not bundle.aescbc_encryption_secret:
                problems.append(
                    "one of [secrets.secretboxencryptionsecret, secrets.aescbcencryptionsecret] is required"
                )
            elif bundle.secretbox_encryption_secret and bundle.aescbc_encryption_secret:
                problems.append(
                    "only one of [secrets.secretboxencryptionsecret, secrets.aescbcencryptionsecret] is allowed"
                )
        if problems:
            raise SecretsError(f"{source}: invalid secrets bundle: " + "; ".join(problems), hint=_BUNDLE_HINT)
        return bundle

    @classmethod
    def load(cls, path: str | PathLike[str]) -> SecretsBundle:
        """Read and check a bundle file."""
        target = Path(path)
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            raise SecretsError(
                f"secrets bundle {str(target)!r} does not exist",
                hint="create one with `talosctl gen secrets`, or pass the right path",
            ) from None
        except OSError as exc:
            raise SecretsError(f"cannot read secrets bundle {str(target)!r}: {exc.strerror}") from None
        return cls.from_yaml(data, source=str(target))

    # --- writing ----------------------------------------------------------------------------

    def to_plain(self) -> dict[str, Any]:
        """The bundle as nested dicts in Talos's key order."""
        secrets: dict[str, str] = {"bootstraptoken": self.bootstrap_token}
        if self.aescbc_encryption_secret:
            secrets["aescbcencryptionsecret"] = self.aescbc_encryption_secret
        if self.secretbox_encryption_secret:
            secrets["secretboxencryptionsecret"] = self.secretbox_encryption_secret

        def pair(value: CertKey) -> dict[str, str]:
            return {"crt": value.crt_b64(), "key": value.key_b64()}

        return {
            "cluster": {"id": self.cluster_id, "secret": self.cluster_secret},
            "secrets": secrets,
            "trustdinfo": {"token": self.trustd_token},
            "certs": {
                "etcd": pair(self.etcd),
                "k8s": pair(self.k8s),
                "k8saggregator": pair(self.k8s_aggregator),
                "k8sserviceaccount": {"key": base64.b64encode(self.k8s_service_account_key).decode("ascii")},
                "os": pair(self.os),
            },
        }

    def to_yaml(self) -> str:
        """Talos's exact serialization (4-space indent, Talos key names and order)."""
        from ichor.machinery.yamlio import dump_document, from_plain

        return dump_document(from_plain(self.to_plain()))


# --- helpers ----------------------------------------------------------------------------------


def _encryption_secrets(contract: VersionContract) -> tuple[str, str | None]:
    if contract.secretbox_encryption_supported:
        return new_encryption_secret(), None
    return "", new_encryption_secret()


def _new_aggregator_ca(now: datetime | None) -> CertKey:
    # Talos asks for CN=front-proxy, but its CA builder only copies Organization into the subject:
    # real bundles carry an empty subject, so ours do too.
    return new_ecdsa_ca(ttl=CA_VALIDITY, now=now)


def _new_service_account_key(contract: VersionContract) -> bytes:
    return new_rsa_key(4096) if contract.use_rsa_service_account_key else new_ecdsa_key()


def _read(path: Path, hint: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise SecretsError(f"{str(path)!r} does not exist", hint=hint) from None
    except OSError as exc:
        raise SecretsError(f"cannot read {str(path)!r}: {exc.strerror}", hint=hint) from None


def _guard(problems: list[str], where: str, fn: Callable[[], Any]) -> bool:
    try:
        fn()
    except MachineryError as exc:
        problems.append(f"{where} is invalid: {exc}")
        return False
    return True


def _check_pair(value: CertKey, where: str) -> None:
    try:
        value.check_pair(what=where)
    except PKIError as exc:
        raise SecretsError(str(exc), hint=exc.hint) from None


def _check_key(data: bytes, where: str) -> None:
    try:
        load_private_key(data, what=where)
    except PKIError as exc:
        raise SecretsError(str(exc), hint=exc.hint) from None


def _b64(text: str, where: str, problems: list[str]) -> bytes | None:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        problems.append(f"{where} is not valid base64")
        return None


def _decode_pair(crt: str, key: str, where: str, problems: list[str]) -> CertKey:
    if not crt or not key:
        return CertKey(b"", b"")
    crt_pem = _b64(crt, f"{where}.crt", problems)
    key_pem = _b64(key, f"{where}.key", problems)
    if crt_pem is None or key_pem is None:
        return CertKey(crt_pem or b"", key_pem or b"")
    value = CertKey(crt_pem, key_pem)
    ok = _guard(problems, f"{where}.crt", lambda: load_certificate(crt_pem))
    ok = _guard(problems, f"{where}.key", lambda: load_private_key(key_pem)) and ok
    if ok:
        _guard(problems, where, lambda: value.check_pair(what="certificate"))
    return value


def _decode_key(text: str, where: str, problems: list[str]) -> bytes:
    if not text:
        return b""
    pem = _b64(text, where, problems)
    if pem is None:
        return b""
    _guard(problems, where, lambda: load_private_key(pem))
    return pem
