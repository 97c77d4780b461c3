from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class HostnameStatusSpec(_message.Message):
    __slots__ = ("hostname", "domainname")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    DOMAINNAME_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    domainname: str
    def __init__(self, hostname: _Optional[str] = ..., domainname: _Optional[str] = ...) -> None: ...
