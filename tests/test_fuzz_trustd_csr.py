"""Fuzz: trustd's Certificate RPC with random and garbled CSRs answers a clear status, never a crash.

A worker sends trustd a PEM CSR with the cluster token; whatever the bytes, the answer is a
certificate or ``InvalidArgument`` naming what is wrong -- never ``Unknown`` (a traceback) -- and a
certificate never carries a role (no ``O``), whatever the CSR asked for.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID
from fuzz_budget import budget
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from hypothesis import given
from hypothesis import strategies as st

from ichor.api.gen.security import security_pb2
from ichor.machined.trustd import SecurityService
from ichor.machinery import pki
from ichor.machinery.pki._pem import _pem as pem_encode

pytestmark = pytest.mark.fuzz

CA = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
SERVICE = SecurityService(CA, "token", [CA.crt])
KEY = ec.generate_private_key(ec.SECP256R1())
ED_KEY = ed25519.Ed25519PrivateKey.generate()


class _Stream:
    """What the handler reads from and writes to (grpclib's server stream, in memory)."""

    def __init__(self, request: security_pb2.CertificateRequest) -> None:
        self.metadata = {"token": "token"}
        self._request: Any = request
        self.sent: list[Any] = []

    async def recv_message(self) -> Any:
        request, self._request = self._request, None
        return request

    async def send_message(self, message: Any) -> None:
        self.sent.append(message)


def _answer(csr: bytes) -> security_pb2.CertificateResponse | Status:
    stream = _Stream(security_pb2.CertificateRequest(csr=csr))
    try:
        asyncio.run(SERVICE.Certificate(stream))  # type: ignore[arg-type]
    except GRPCError as exc:
        return exc.status
    (reply,) = stream.sent
    return reply  # type: ignore[no-any-return]


def _csr(attributes: list[x509.NameAttribute], key: Any = KEY) -> bytes:
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attributes))
    algorithm = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return builder.sign(key, algorithm).public_bytes(serialization.Encoding.PEM)


VALID = _csr([x509.NameAttribute(NameOID.COMMON_NAME, "worker-1")])


def _check(answer: security_pb2.CertificateResponse | Status) -> None:
    if isinstance(answer, Status):
        assert answer is Status.INVALID_ARGUMENT
        return
    crt = pki.load_certificate(answer.crt)
    assert crt.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME) == [], "a role through trustd"


def test_a_valid_csr_gets_a_certificate_without_roles() -> None:
    answer = _answer(_csr([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "os:admin"),
                           x509.NameAttribute(NameOID.COMMON_NAME, "worker-1")]))  # fmt: skip
    assert not isinstance(answer, Status)
    _check(answer)


@budget(150)
@given(st.binary(max_size=2048))
def test_random_bytes(data: bytes) -> None:
    _check(_answer(data))


@budget(150)
@given(st.data())
def test_garbled_csrs(data: st.DataObject) -> None:
    csr = bytearray(VALID)
    for _ in range(data.draw(st.integers(1, 4))):
        where = data.draw(st.integers(0, len(csr) - 1))
        csr[where] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        csr = csr[: data.draw(st.integers(0, len(csr)))]
    _check(_answer(bytes(csr)))


# Subjects cryptography's builder accepts only unvalidated: what a Go or OpenSSL client can send.
_names = st.text(max_size=200)


# cryptography warns (and goes on) when it parses a name X.509 says is too short or too long.
@pytest.mark.filterwarnings("ignore:Attribute's length must be:UserWarning")
@budget(60)
@given(cn=_names, org=st.lists(_names, max_size=3), ed=st.booleans())
def test_csrs_with_odd_subjects(cn: str, org: list[str], ed: bool) -> None:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o, _validate=False) for o in org]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, cn, _validate=False))
    try:
        csr = _csr(attributes, ED_KEY if ed else KEY)
    except ValueError:
        return  # not encodable at all (e.g. surrogates): no client can send it either
    _check(_answer(csr))


def test_a_csr_whose_signature_does_not_match_is_refused() -> None:
    other = _csr(
        [x509.NameAttribute(NameOID.COMMON_NAME, "worker-1")], ec.generate_private_key(ec.SECP256R1())
    )
    good, bad = x509.load_pem_x509_csr(VALID), x509.load_pem_x509_csr(other)
    # The request body of one CSR with the signature of another.
    forged = good.tbs_certrequest_bytes + bad.public_bytes(serialization.Encoding.DER)[-72:]
    assert _answer(pem_encode("CERTIFICATE REQUEST", forged)) is Status.INVALID_ARGUMENT
