import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Metadata(_message.Message):
    __slots__ = ("namespace", "type", "id", "version", "owner", "phase", "created", "updated", "finalizers", "labels", "annotations")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    FINALIZERS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    type: str
    id: str
    version: str
    owner: str
    phase: str
    created: _timestamp_pb2.Timestamp
    updated: _timestamp_pb2.Timestamp
    finalizers: _containers.RepeatedScalarFieldContainer[str]
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    def __init__(self, namespace: _Optional[str] = ..., type: _Optional[str] = ..., id: _Optional[str] = ..., version: _Optional[str] = ..., owner: _Optional[str] = ..., phase: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finalizers: _Optional[_Iterable[str]] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Spec(_message.Message):
    __slots__ = ("proto_spec", "yaml_spec")
    PROTO_SPEC_FIELD_NUMBER: _ClassVar[int]
    YAML_SPEC_FIELD_NUMBER: _ClassVar[int]
    proto_spec: bytes
    yaml_spec: str
    def __init__(self, proto_spec: _Optional[bytes] = ..., yaml_spec: _Optional[str] = ...) -> None: ...

class Resource(_message.Message):
    __slots__ = ("metadata", "spec")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    metadata: Metadata
    spec: Spec
    def __init__(self, metadata: _Optional[_Union[Metadata, _Mapping]] = ..., spec: _Optional[_Union[Spec, _Mapping]] = ...) -> None: ...

class LabelTerm(_message.Message):
    __slots__ = ("key", "op", "value", "invert")
    class Operation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        EXISTS: _ClassVar[LabelTerm.Operation]
        EQUAL: _ClassVar[LabelTerm.Operation]
        NOT_EXISTS: _ClassVar[LabelTerm.Operation]
        IN: _ClassVar[LabelTerm.Operation]
        LT: _ClassVar[LabelTerm.Operation]
        LTE: _ClassVar[LabelTerm.Operation]
        LT_NUMERIC: _ClassVar[LabelTerm.Operation]
        LTE_NUMERIC: _ClassVar[LabelTerm.Operation]
    EXISTS: LabelTerm.Operation
    EQUAL: LabelTerm.Operation
    NOT_EXISTS: LabelTerm.Operation
    IN: LabelTerm.Operation
    LT: LabelTerm.Operation
    LTE: LabelTerm.Operation
    LT_NUMERIC: LabelTerm.Operation
    LTE_NUMERIC: LabelTerm.Operation
    KEY_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    INVERT_FIELD_NUMBER: _ClassVar[int]
    key: str
    op: LabelTerm.Operation
    value: _containers.RepeatedScalarFieldContainer[str]
    invert: bool
    def __init__(self, key: _Optional[str] = ..., op: _Optional[_Union[LabelTerm.Operation, str]] = ..., value: _Optional[_Iterable[str]] = ..., invert: _Optional[bool] = ...) -> None: ...

class LabelQuery(_message.Message):
    __slots__ = ("terms",)
    TERMS_FIELD_NUMBER: _ClassVar[int]
    terms: _containers.RepeatedCompositeFieldContainer[LabelTerm]
    def __init__(self, terms: _Optional[_Iterable[_Union[LabelTerm, _Mapping]]] = ...) -> None: ...

class IDQuery(_message.Message):
    __slots__ = ("regexp",)
    REGEXP_FIELD_NUMBER: _ClassVar[int]
    regexp: str
    def __init__(self, regexp: _Optional[str] = ...) -> None: ...
