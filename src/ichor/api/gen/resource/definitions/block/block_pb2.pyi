from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class DeviceSpec(_message.Message):
    __slots__ = ("type", "major", "minor", "partition_name", "partition_number", "generation", "device_path", "parent")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MAJOR_FIELD_NUMBER: _ClassVar[int]
    MINOR_FIELD_NUMBER: _ClassVar[int]
    PARTITION_NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_NUMBER_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    DEVICE_PATH_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    type: str
    major: int
    minor: int
    partition_name: str
    partition_number: int
    generation: int
    device_path: str
    parent: str
    def __init__(self, type: _Optional[str] = ..., major: _Optional[int] = ..., minor: _Optional[int] = ..., partition_name: _Optional[str] = ..., partition_number: _Optional[int] = ..., generation: _Optional[int] = ..., device_path: _Optional[str] = ..., parent: _Optional[str] = ...) -> None: ...

class DiscoveredVolumeSpec(_message.Message):
    __slots__ = ("size", "sector_size", "io_size", "name", "uuid", "label", "block_size", "filesystem_block_size", "probed_size", "partition_uuid", "partition_type", "partition_label", "partition_index", "type", "device_path", "parent")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SECTOR_SIZE_FIELD_NUMBER: _ClassVar[int]
    IO_SIZE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    FILESYSTEM_BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    PROBED_SIZE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_UUID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_TYPE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_LABEL_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_PATH_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    size: int
    sector_size: int
    io_size: int
    name: str
    uuid: str
    label: str
    block_size: int
    filesystem_block_size: int
    probed_size: int
    partition_uuid: str
    partition_type: str
    partition_label: str
    partition_index: int
    type: str
    device_path: str
    parent: str
    def __init__(self, size: _Optional[int] = ..., sector_size: _Optional[int] = ..., io_size: _Optional[int] = ..., name: _Optional[str] = ..., uuid: _Optional[str] = ..., label: _Optional[str] = ..., block_size: _Optional[int] = ..., filesystem_block_size: _Optional[int] = ..., probed_size: _Optional[int] = ..., partition_uuid: _Optional[str] = ..., partition_type: _Optional[str] = ..., partition_label: _Optional[str] = ..., partition_index: _Optional[int] = ..., type: _Optional[str] = ..., device_path: _Optional[str] = ..., parent: _Optional[str] = ...) -> None: ...
