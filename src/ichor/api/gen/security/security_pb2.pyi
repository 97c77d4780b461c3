from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class CertificateRequest(_message.Message):
    __slots__ = ("csr",)
    CSR_FIELD_NUMBER: _ClassVar[int]
    csr: bytes
    def __init__(self, csr: _Optional[bytes] = ...) -> None: ...

class CertificateResponse(_message.Message):
    __slots__ = ("ca", "crt")
    CA_FIELD_NUMBER: _ClassVar[int]
    CRT_FIELD_NUMBER: _ClassVar[int]
    ca: bytes
    crt: bytes
    def __init__(self, ca: _Optional[bytes] = ..., crt: _Optional[bytes] = ...) -> None: ...
