import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Affiliate(_message.Message):
    __slots__ = ("id", "data", "endpoints")
    ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    data: bytes
    endpoints: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, id: _Optional[str] = ..., data: _Optional[bytes] = ..., endpoints: _Optional[_Iterable[bytes]] = ...) -> None: ...

class HelloRequest(_message.Message):
    __slots__ = ("cluster_id", "client_version")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    client_version: str
    def __init__(self, cluster_id: _Optional[str] = ..., client_version: _Optional[str] = ...) -> None: ...

class RedirectMessage(_message.Message):
    __slots__ = ("endpoint",)
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    def __init__(self, endpoint: _Optional[str] = ...) -> None: ...

class HelloResponse(_message.Message):
    __slots__ = ("redirect", "client_ip")
    REDIRECT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_IP_FIELD_NUMBER: _ClassVar[int]
    redirect: RedirectMessage
    client_ip: bytes
    def __init__(self, redirect: _Optional[_Union[RedirectMessage, _Mapping]] = ..., client_ip: _Optional[bytes] = ...) -> None: ...

class AffiliateUpdateRequest(_message.Message):
    __slots__ = ("cluster_id", "affiliate_id", "affiliate_data", "affiliate_endpoints", "ttl")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    AFFILIATE_ID_FIELD_NUMBER: _ClassVar[int]
    AFFILIATE_DATA_FIELD_NUMBER: _ClassVar[int]
    AFFILIATE_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    affiliate_id: str
    affiliate_data: bytes
    affiliate_endpoints: _containers.RepeatedScalarFieldContainer[bytes]
    ttl: _duration_pb2.Duration
    def __init__(self, cluster_id: _Optional[str] = ..., affiliate_id: _Optional[str] = ..., affiliate_data: _Optional[bytes] = ..., affiliate_endpoints: _Optional[_Iterable[bytes]] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AffiliateUpdateResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AffiliateDeleteRequest(_message.Message):
    __slots__ = ("cluster_id", "affiliate_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    AFFILIATE_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    affiliate_id: str
    def __init__(self, cluster_id: _Optional[str] = ..., affiliate_id: _Optional[str] = ...) -> None: ...

class AffiliateDeleteResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("cluster_id",)
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    def __init__(self, cluster_id: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("affiliates",)
    AFFILIATES_FIELD_NUMBER: _ClassVar[int]
    affiliates: _containers.RepeatedCompositeFieldContainer[Affiliate]
    def __init__(self, affiliates: _Optional[_Iterable[_Union[Affiliate, _Mapping]]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("cluster_id",)
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    def __init__(self, cluster_id: _Optional[str] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ("affiliates", "deleted")
    AFFILIATES_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    affiliates: _containers.RepeatedCompositeFieldContainer[Affiliate]
    deleted: bool
    def __init__(self, affiliates: _Optional[_Iterable[_Union[Affiliate, _Mapping]]] = ..., deleted: _Optional[bool] = ...) -> None: ...
