from ichor.api.gen.common import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConfigSpec(_message.Message):
    __slots__ = ("advertise_valid_subnets", "advertise_exclude_subnets", "image", "extra_args", "listen_valid_subnets", "listen_exclude_subnets")
    class ExtraArgsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ADVERTISE_VALID_SUBNETS_FIELD_NUMBER: _ClassVar[int]
    ADVERTISE_EXCLUDE_SUBNETS_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_ARGS_FIELD_NUMBER: _ClassVar[int]
    LISTEN_VALID_SUBNETS_FIELD_NUMBER: _ClassVar[int]
    LISTEN_EXCLUDE_SUBNETS_FIELD_NUMBER: _ClassVar[int]
    advertise_valid_subnets: _containers.RepeatedScalarFieldContainer[str]
    advertise_exclude_subnets: _containers.RepeatedScalarFieldContainer[str]
    image: str
    extra_args: _containers.ScalarMap[str, str]
    listen_valid_subnets: _containers.RepeatedScalarFieldContainer[str]
    listen_exclude_subnets: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, advertise_valid_subnets: _Optional[_Iterable[str]] = ..., advertise_exclude_subnets: _Optional[_Iterable[str]] = ..., image: _Optional[str] = ..., extra_args: _Optional[_Mapping[str, str]] = ..., listen_valid_subnets: _Optional[_Iterable[str]] = ..., listen_exclude_subnets: _Optional[_Iterable[str]] = ...) -> None: ...

class MemberSpec(_message.Message):
    __slots__ = ("member_id",)
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    def __init__(self, member_id: _Optional[str] = ...) -> None: ...

class PKIStatusSpec(_message.Message):
    __slots__ = ("ready", "version")
    READY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    version: str
    def __init__(self, ready: _Optional[bool] = ..., version: _Optional[str] = ...) -> None: ...

class SpecSpec(_message.Message):
    __slots__ = ("name", "advertised_addresses", "image", "extra_args", "listen_peer_addresses", "listen_client_addresses")
    class ExtraArgsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ADVERTISED_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_ARGS_FIELD_NUMBER: _ClassVar[int]
    LISTEN_PEER_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    LISTEN_CLIENT_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    name: str
    advertised_addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    image: str
    extra_args: _containers.ScalarMap[str, str]
    listen_peer_addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    listen_client_addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    def __init__(self, name: _Optional[str] = ..., advertised_addresses: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ..., image: _Optional[str] = ..., extra_args: _Optional[_Mapping[str, str]] = ..., listen_peer_addresses: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ..., listen_client_addresses: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ...) -> None: ...
