from ichor.api.gen.resource.definitions.enums import enums_pb2 as _enums_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MachineConfigSpec(_message.Message):
    __slots__ = ("yaml_marshalled",)
    YAML_MARSHALLED_FIELD_NUMBER: _ClassVar[int]
    yaml_marshalled: bytes
    def __init__(self, yaml_marshalled: _Optional[bytes] = ...) -> None: ...

class MachineTypeSpec(_message.Message):
    __slots__ = ("machine_type",)
    MACHINE_TYPE_FIELD_NUMBER: _ClassVar[int]
    machine_type: _enums_pb2.MachineType
    def __init__(self, machine_type: _Optional[_Union[_enums_pb2.MachineType, str]] = ...) -> None: ...
