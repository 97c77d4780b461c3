from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class EtcFileSpecSpec(_message.Message):
    __slots__ = ("contents", "mode")
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    contents: bytes
    mode: int
    def __init__(self, contents: _Optional[bytes] = ..., mode: _Optional[int] = ...) -> None: ...

class EtcFileStatusSpec(_message.Message):
    __slots__ = ("spec_version",)
    SPEC_VERSION_FIELD_NUMBER: _ClassVar[int]
    spec_version: str
    def __init__(self, spec_version: _Optional[str] = ...) -> None: ...
