import datetime

from ichor.api.gen.common import common_pb2 as _common_pb2
from google.protobuf import any_pb2 as _any_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApplyConfigurationRequest(_message.Message):
    __slots__ = ("data", "mode", "dry_run", "try_mode_timeout")
    class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REBOOT: _ClassVar[ApplyConfigurationRequest.Mode]
        AUTO: _ClassVar[ApplyConfigurationRequest.Mode]
        NO_REBOOT: _ClassVar[ApplyConfigurationRequest.Mode]
        STAGED: _ClassVar[ApplyConfigurationRequest.Mode]
        TRY: _ClassVar[ApplyConfigurationRequest.Mode]
    REBOOT: ApplyConfigurationRequest.Mode
    AUTO: ApplyConfigurationRequest.Mode
    NO_REBOOT: ApplyConfigurationRequest.Mode
    STAGED: ApplyConfigurationRequest.Mode
    TRY: ApplyConfigurationRequest.Mode
    DATA_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    TRY_MODE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    mode: ApplyConfigurationRequest.Mode
    dry_run: bool
    try_mode_timeout: _duration_pb2.Duration
    def __init__(self, data: _Optional[bytes] = ..., mode: _Optional[_Union[ApplyConfigurationRequest.Mode, str]] = ..., dry_run: _Optional[bool] = ..., try_mode_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ApplyConfiguration(_message.Message):
    __slots__ = ("metadata", "warnings", "mode", "mode_details")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MODE_DETAILS_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    warnings: _containers.RepeatedScalarFieldContainer[str]
    mode: ApplyConfigurationRequest.Mode
    mode_details: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., warnings: _Optional[_Iterable[str]] = ..., mode: _Optional[_Union[ApplyConfigurationRequest.Mode, str]] = ..., mode_details: _Optional[str] = ...) -> None: ...

class ApplyConfigurationResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ApplyConfiguration]
    def __init__(self, messages: _Optional[_Iterable[_Union[ApplyConfiguration, _Mapping]]] = ...) -> None: ...

class RebootRequest(_message.Message):
    __slots__ = ("mode",)
    class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DEFAULT: _ClassVar[RebootRequest.Mode]
        POWERCYCLE: _ClassVar[RebootRequest.Mode]
    DEFAULT: RebootRequest.Mode
    POWERCYCLE: RebootRequest.Mode
    MODE_FIELD_NUMBER: _ClassVar[int]
    mode: RebootRequest.Mode
    def __init__(self, mode: _Optional[_Union[RebootRequest.Mode, str]] = ...) -> None: ...

class Reboot(_message.Message):
    __slots__ = ("metadata", "actor_id")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    actor_id: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., actor_id: _Optional[str] = ...) -> None: ...

class RebootResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Reboot]
    def __init__(self, messages: _Optional[_Iterable[_Union[Reboot, _Mapping]]] = ...) -> None: ...

class BootstrapRequest(_message.Message):
    __slots__ = ("recover_etcd", "recover_skip_hash_check")
    RECOVER_ETCD_FIELD_NUMBER: _ClassVar[int]
    RECOVER_SKIP_HASH_CHECK_FIELD_NUMBER: _ClassVar[int]
    recover_etcd: bool
    recover_skip_hash_check: bool
    def __init__(self, recover_etcd: _Optional[bool] = ..., recover_skip_hash_check: _Optional[bool] = ...) -> None: ...

class Bootstrap(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ...) -> None: ...

class BootstrapResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Bootstrap]
    def __init__(self, messages: _Optional[_Iterable[_Union[Bootstrap, _Mapping]]] = ...) -> None: ...

class SequenceEvent(_message.Message):
    __slots__ = ("sequence", "action", "error")
    class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NOOP: _ClassVar[SequenceEvent.Action]
        START: _ClassVar[SequenceEvent.Action]
        STOP: _ClassVar[SequenceEvent.Action]
    NOOP: SequenceEvent.Action
    START: SequenceEvent.Action
    STOP: SequenceEvent.Action
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    sequence: str
    action: SequenceEvent.Action
    error: _common_pb2.Error
    def __init__(self, sequence: _Optional[str] = ..., action: _Optional[_Union[SequenceEvent.Action, str]] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class PhaseEvent(_message.Message):
    __slots__ = ("phase", "action")
    class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        START: _ClassVar[PhaseEvent.Action]
        STOP: _ClassVar[PhaseEvent.Action]
    START: PhaseEvent.Action
    STOP: PhaseEvent.Action
    PHASE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    phase: str
    action: PhaseEvent.Action
    def __init__(self, phase: _Optional[str] = ..., action: _Optional[_Union[PhaseEvent.Action, str]] = ...) -> None: ...

class TaskEvent(_message.Message):
    __slots__ = ("task", "action")
    class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        START: _ClassVar[TaskEvent.Action]
        STOP: _ClassVar[TaskEvent.Action]
    START: TaskEvent.Action
    STOP: TaskEvent.Action
    TASK_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    task: str
    action: TaskEvent.Action
    def __init__(self, task: _Optional[str] = ..., action: _Optional[_Union[TaskEvent.Action, str]] = ...) -> None: ...

class ServiceStateEvent(_message.Message):
    __slots__ = ("service", "action", "message", "health")
    class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        INITIALIZED: _ClassVar[ServiceStateEvent.Action]
        PREPARING: _ClassVar[ServiceStateEvent.Action]
        WAITING: _ClassVar[ServiceStateEvent.Action]
        RUNNING: _ClassVar[ServiceStateEvent.Action]
        STOPPING: _ClassVar[ServiceStateEvent.Action]
        FINISHED: _ClassVar[ServiceStateEvent.Action]
        FAILED: _ClassVar[ServiceStateEvent.Action]
        SKIPPED: _ClassVar[ServiceStateEvent.Action]
        STARTING: _ClassVar[ServiceStateEvent.Action]
    INITIALIZED: ServiceStateEvent.Action
    PREPARING: ServiceStateEvent.Action
    WAITING: ServiceStateEvent.Action
    RUNNING: ServiceStateEvent.Action
    STOPPING: ServiceStateEvent.Action
    FINISHED: ServiceStateEvent.Action
    FAILED: ServiceStateEvent.Action
    SKIPPED: ServiceStateEvent.Action
    STARTING: ServiceStateEvent.Action
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    service: str
    action: ServiceStateEvent.Action
    message: str
    health: ServiceHealth
    def __init__(self, service: _Optional[str] = ..., action: _Optional[_Union[ServiceStateEvent.Action, str]] = ..., message: _Optional[str] = ..., health: _Optional[_Union[ServiceHealth, _Mapping]] = ...) -> None: ...

class ConfigLoadErrorEvent(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: str
    def __init__(self, error: _Optional[str] = ...) -> None: ...

class ConfigValidationErrorEvent(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: str
    def __init__(self, error: _Optional[str] = ...) -> None: ...

class AddressEvent(_message.Message):
    __slots__ = ("hostname", "addresses")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    addresses: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, hostname: _Optional[str] = ..., addresses: _Optional[_Iterable[str]] = ...) -> None: ...

class MachineStatusEvent(_message.Message):
    __slots__ = ("stage", "status")
    class MachineStage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[MachineStatusEvent.MachineStage]
        BOOTING: _ClassVar[MachineStatusEvent.MachineStage]
        INSTALLING: _ClassVar[MachineStatusEvent.MachineStage]
        MAINTENANCE: _ClassVar[MachineStatusEvent.MachineStage]
        RUNNING: _ClassVar[MachineStatusEvent.MachineStage]
        REBOOTING: _ClassVar[MachineStatusEvent.MachineStage]
        SHUTTING_DOWN: _ClassVar[MachineStatusEvent.MachineStage]
        RESETTING: _ClassVar[MachineStatusEvent.MachineStage]
        UPGRADING: _ClassVar[MachineStatusEvent.MachineStage]
    UNKNOWN: MachineStatusEvent.MachineStage
    BOOTING: MachineStatusEvent.MachineStage
    INSTALLING: MachineStatusEvent.MachineStage
    MAINTENANCE: MachineStatusEvent.MachineStage
    RUNNING: MachineStatusEvent.MachineStage
    REBOOTING: MachineStatusEvent.MachineStage
    SHUTTING_DOWN: MachineStatusEvent.MachineStage
    RESETTING: MachineStatusEvent.MachineStage
    UPGRADING: MachineStatusEvent.MachineStage
    class MachineStatus(_message.Message):
        __slots__ = ("ready", "unmet_conditions")
        class UnmetCondition(_message.Message):
            __slots__ = ("name", "reason")
            NAME_FIELD_NUMBER: _ClassVar[int]
            REASON_FIELD_NUMBER: _ClassVar[int]
            name: str
            reason: str
            def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...
        READY_FIELD_NUMBER: _ClassVar[int]
        UNMET_CONDITIONS_FIELD_NUMBER: _ClassVar[int]
        ready: bool
        unmet_conditions: _containers.RepeatedCompositeFieldContainer[MachineStatusEvent.MachineStatus.UnmetCondition]
        def __init__(self, ready: _Optional[bool] = ..., unmet_conditions: _Optional[_Iterable[_Union[MachineStatusEvent.MachineStatus.UnmetCondition, _Mapping]]] = ...) -> None: ...
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    stage: MachineStatusEvent.MachineStage
    status: MachineStatusEvent.MachineStatus
    def __init__(self, stage: _Optional[_Union[MachineStatusEvent.MachineStage, str]] = ..., status: _Optional[_Union[MachineStatusEvent.MachineStatus, _Mapping]] = ...) -> None: ...

class EventsRequest(_message.Message):
    __slots__ = ("tail_events", "tail_id", "tail_seconds", "with_actor_id")
    TAIL_EVENTS_FIELD_NUMBER: _ClassVar[int]
    TAIL_ID_FIELD_NUMBER: _ClassVar[int]
    TAIL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WITH_ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    tail_events: int
    tail_id: str
    tail_seconds: int
    with_actor_id: str
    def __init__(self, tail_events: _Optional[int] = ..., tail_id: _Optional[str] = ..., tail_seconds: _Optional[int] = ..., with_actor_id: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("metadata", "data", "id", "actor_id")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    data: _any_pb2.Any
    id: str
    actor_id: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., data: _Optional[_Union[_any_pb2.Any, _Mapping]] = ..., id: _Optional[str] = ..., actor_id: _Optional[str] = ...) -> None: ...

class ResetPartitionSpec(_message.Message):
    __slots__ = ("label", "wipe")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    WIPE_FIELD_NUMBER: _ClassVar[int]
    label: str
    wipe: bool
    def __init__(self, label: _Optional[str] = ..., wipe: _Optional[bool] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("graceful", "reboot", "system_partitions_to_wipe", "user_disks_to_wipe", "mode")
    class WipeMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ALL: _ClassVar[ResetRequest.WipeMode]
        SYSTEM_DISK: _ClassVar[ResetRequest.WipeMode]
        USER_DISKS: _ClassVar[ResetRequest.WipeMode]
    ALL: ResetRequest.WipeMode
    SYSTEM_DISK: ResetRequest.WipeMode
    USER_DISKS: ResetRequest.WipeMode
    GRACEFUL_FIELD_NUMBER: _ClassVar[int]
    REBOOT_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PARTITIONS_TO_WIPE_FIELD_NUMBER: _ClassVar[int]
    USER_DISKS_TO_WIPE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    graceful: bool
    reboot: bool
    system_partitions_to_wipe: _containers.RepeatedCompositeFieldContainer[ResetPartitionSpec]
    user_disks_to_wipe: _containers.RepeatedScalarFieldContainer[str]
    mode: ResetRequest.WipeMode
    def __init__(self, graceful: _Optional[bool] = ..., reboot: _Optional[bool] = ..., system_partitions_to_wipe: _Optional[_Iterable[_Union[ResetPartitionSpec, _Mapping]]] = ..., user_disks_to_wipe: _Optional[_Iterable[str]] = ..., mode: _Optional[_Union[ResetRequest.WipeMode, str]] = ...) -> None: ...

class Reset(_message.Message):
    __slots__ = ("metadata", "actor_id")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    actor_id: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., actor_id: _Optional[str] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Reset]
    def __init__(self, messages: _Optional[_Iterable[_Union[Reset, _Mapping]]] = ...) -> None: ...

class Shutdown(_message.Message):
    __slots__ = ("metadata", "actor_id")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    actor_id: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., actor_id: _Optional[str] = ...) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ("force",)
    FORCE_FIELD_NUMBER: _ClassVar[int]
    force: bool
    def __init__(self, force: _Optional[bool] = ...) -> None: ...

class ShutdownResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Shutdown]
    def __init__(self, messages: _Optional[_Iterable[_Union[Shutdown, _Mapping]]] = ...) -> None: ...

class UpgradeRequest(_message.Message):
    __slots__ = ("image", "preserve", "stage", "force", "reboot_mode")
    class RebootMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DEFAULT: _ClassVar[UpgradeRequest.RebootMode]
        POWERCYCLE: _ClassVar[UpgradeRequest.RebootMode]
    DEFAULT: UpgradeRequest.RebootMode
    POWERCYCLE: UpgradeRequest.RebootMode
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    PRESERVE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    REBOOT_MODE_FIELD_NUMBER: _ClassVar[int]
    image: str
    preserve: bool
    stage: bool
    force: bool
    reboot_mode: UpgradeRequest.RebootMode
    def __init__(self, image: _Optional[str] = ..., preserve: _Optional[bool] = ..., stage: _Optional[bool] = ..., force: _Optional[bool] = ..., reboot_mode: _Optional[_Union[UpgradeRequest.RebootMode, str]] = ...) -> None: ...

class Upgrade(_message.Message):
    __slots__ = ("metadata", "ack", "actor_id")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    ack: str
    actor_id: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., ack: _Optional[str] = ..., actor_id: _Optional[str] = ...) -> None: ...

class UpgradeResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Upgrade]
    def __init__(self, messages: _Optional[_Iterable[_Union[Upgrade, _Mapping]]] = ...) -> None: ...

class ServiceList(_message.Message):
    __slots__ = ("metadata", "services")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    services: _containers.RepeatedCompositeFieldContainer[ServiceInfo]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., services: _Optional[_Iterable[_Union[ServiceInfo, _Mapping]]] = ...) -> None: ...

class ServiceListResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ServiceList]
    def __init__(self, messages: _Optional[_Iterable[_Union[ServiceList, _Mapping]]] = ...) -> None: ...

class ServiceInfo(_message.Message):
    __slots__ = ("id", "state", "events", "health")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    id: str
    state: str
    events: ServiceEvents
    health: ServiceHealth
    def __init__(self, id: _Optional[str] = ..., state: _Optional[str] = ..., events: _Optional[_Union[ServiceEvents, _Mapping]] = ..., health: _Optional[_Union[ServiceHealth, _Mapping]] = ...) -> None: ...

class ServiceEvents(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ServiceEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[ServiceEvent, _Mapping]]] = ...) -> None: ...

class ServiceEvent(_message.Message):
    __slots__ = ("msg", "state", "ts")
    MSG_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    msg: str
    state: str
    ts: _timestamp_pb2.Timestamp
    def __init__(self, msg: _Optional[str] = ..., state: _Optional[str] = ..., ts: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ServiceHealth(_message.Message):
    __slots__ = ("unknown", "healthy", "last_message", "last_change")
    UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    LAST_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LAST_CHANGE_FIELD_NUMBER: _ClassVar[int]
    unknown: bool
    healthy: bool
    last_message: str
    last_change: _timestamp_pb2.Timestamp
    def __init__(self, unknown: _Optional[bool] = ..., healthy: _Optional[bool] = ..., last_message: _Optional[str] = ..., last_change: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ServiceStartRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ServiceStart(_message.Message):
    __slots__ = ("metadata", "resp")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    RESP_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    resp: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., resp: _Optional[str] = ...) -> None: ...

class ServiceStartResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ServiceStart]
    def __init__(self, messages: _Optional[_Iterable[_Union[ServiceStart, _Mapping]]] = ...) -> None: ...

class ServiceStopRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ServiceStop(_message.Message):
    __slots__ = ("metadata", "resp")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    RESP_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    resp: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., resp: _Optional[str] = ...) -> None: ...

class ServiceStopResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ServiceStop]
    def __init__(self, messages: _Optional[_Iterable[_Union[ServiceStop, _Mapping]]] = ...) -> None: ...

class ServiceRestartRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ServiceRestart(_message.Message):
    __slots__ = ("metadata", "resp")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    RESP_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    resp: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., resp: _Optional[str] = ...) -> None: ...

class ServiceRestartResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ServiceRestart]
    def __init__(self, messages: _Optional[_Iterable[_Union[ServiceRestart, _Mapping]]] = ...) -> None: ...

class CopyRequest(_message.Message):
    __slots__ = ("root_path",)
    ROOT_PATH_FIELD_NUMBER: _ClassVar[int]
    root_path: str
    def __init__(self, root_path: _Optional[str] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("root", "recurse", "recursion_depth", "types")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REGULAR: _ClassVar[ListRequest.Type]
        DIRECTORY: _ClassVar[ListRequest.Type]
        SYMLINK: _ClassVar[ListRequest.Type]
    REGULAR: ListRequest.Type
    DIRECTORY: ListRequest.Type
    SYMLINK: ListRequest.Type
    ROOT_FIELD_NUMBER: _ClassVar[int]
    RECURSE_FIELD_NUMBER: _ClassVar[int]
    RECURSION_DEPTH_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    root: str
    recurse: bool
    recursion_depth: int
    types: _containers.RepeatedScalarFieldContainer[ListRequest.Type]
    def __init__(self, root: _Optional[str] = ..., recurse: _Optional[bool] = ..., recursion_depth: _Optional[int] = ..., types: _Optional[_Iterable[_Union[ListRequest.Type, str]]] = ...) -> None: ...

class DiskUsageRequest(_message.Message):
    __slots__ = ("recursion_depth", "all", "threshold", "paths")
    RECURSION_DEPTH_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    recursion_depth: int
    all: bool
    threshold: int
    paths: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, recursion_depth: _Optional[int] = ..., all: _Optional[bool] = ..., threshold: _Optional[int] = ..., paths: _Optional[_Iterable[str]] = ...) -> None: ...

class FileInfo(_message.Message):
    __slots__ = ("metadata", "name", "size", "mode", "modified", "is_dir", "error", "link", "relative_name", "uid", "gid")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_FIELD_NUMBER: _ClassVar[int]
    IS_DIR_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    RELATIVE_NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    name: str
    size: int
    mode: int
    modified: int
    is_dir: bool
    error: str
    link: str
    relative_name: str
    uid: int
    gid: int
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., name: _Optional[str] = ..., size: _Optional[int] = ..., mode: _Optional[int] = ..., modified: _Optional[int] = ..., is_dir: _Optional[bool] = ..., error: _Optional[str] = ..., link: _Optional[str] = ..., relative_name: _Optional[str] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ...) -> None: ...

class DiskUsageInfo(_message.Message):
    __slots__ = ("metadata", "name", "size", "error", "relative_name")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RELATIVE_NAME_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    name: str
    size: int
    error: str
    relative_name: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., name: _Optional[str] = ..., size: _Optional[int] = ..., error: _Optional[str] = ..., relative_name: _Optional[str] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("path",)
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class Mounts(_message.Message):
    __slots__ = ("metadata", "stats")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    stats: _containers.RepeatedCompositeFieldContainer[MountStat]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., stats: _Optional[_Iterable[_Union[MountStat, _Mapping]]] = ...) -> None: ...

class MountsResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Mounts]
    def __init__(self, messages: _Optional[_Iterable[_Union[Mounts, _Mapping]]] = ...) -> None: ...

class MountStat(_message.Message):
    __slots__ = ("filesystem", "size", "available", "mounted_on")
    FILESYSTEM_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    MOUNTED_ON_FIELD_NUMBER: _ClassVar[int]
    filesystem: str
    size: int
    available: int
    mounted_on: str
    def __init__(self, filesystem: _Optional[str] = ..., size: _Optional[int] = ..., available: _Optional[int] = ..., mounted_on: _Optional[str] = ...) -> None: ...

class Version(_message.Message):
    __slots__ = ("metadata", "version", "platform", "features")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    version: VersionInfo
    platform: PlatformInfo
    features: FeaturesInfo
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., version: _Optional[_Union[VersionInfo, _Mapping]] = ..., platform: _Optional[_Union[PlatformInfo, _Mapping]] = ..., features: _Optional[_Union[FeaturesInfo, _Mapping]] = ...) -> None: ...

class VersionResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Version]
    def __init__(self, messages: _Optional[_Iterable[_Union[Version, _Mapping]]] = ...) -> None: ...

class VersionInfo(_message.Message):
    __slots__ = ("tag", "sha", "built", "go_version", "os", "arch")
    TAG_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    BUILT_FIELD_NUMBER: _ClassVar[int]
    GO_VERSION_FIELD_NUMBER: _ClassVar[int]
    OS_FIELD_NUMBER: _ClassVar[int]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    tag: str
    sha: str
    built: str
    go_version: str
    os: str
    arch: str
    def __init__(self, tag: _Optional[str] = ..., sha: _Optional[str] = ..., built: _Optional[str] = ..., go_version: _Optional[str] = ..., os: _Optional[str] = ..., arch: _Optional[str] = ...) -> None: ...

class PlatformInfo(_message.Message):
    __slots__ = ("name", "mode")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    name: str
    mode: str
    def __init__(self, name: _Optional[str] = ..., mode: _Optional[str] = ...) -> None: ...

class FeaturesInfo(_message.Message):
    __slots__ = ("rbac",)
    RBAC_FIELD_NUMBER: _ClassVar[int]
    rbac: bool
    def __init__(self, rbac: _Optional[bool] = ...) -> None: ...

class LogsRequest(_message.Message):
    __slots__ = ("namespace", "id", "driver", "follow", "tail_lines")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    TAIL_LINES_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    id: str
    driver: _common_pb2.ContainerDriver
    follow: bool
    tail_lines: int
    def __init__(self, namespace: _Optional[str] = ..., id: _Optional[str] = ..., driver: _Optional[_Union[_common_pb2.ContainerDriver, str]] = ..., follow: _Optional[bool] = ..., tail_lines: _Optional[int] = ...) -> None: ...

class LogsContainer(_message.Message):
    __slots__ = ("metadata", "ids")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., ids: _Optional[_Iterable[str]] = ...) -> None: ...

class LogsContainersResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[LogsContainer]
    def __init__(self, messages: _Optional[_Iterable[_Union[LogsContainer, _Mapping]]] = ...) -> None: ...

class RollbackRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Rollback(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ...) -> None: ...

class RollbackResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Rollback]
    def __init__(self, messages: _Optional[_Iterable[_Union[Rollback, _Mapping]]] = ...) -> None: ...

class ContainersRequest(_message.Message):
    __slots__ = ("namespace", "driver")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    driver: _common_pb2.ContainerDriver
    def __init__(self, namespace: _Optional[str] = ..., driver: _Optional[_Union[_common_pb2.ContainerDriver, str]] = ...) -> None: ...

class ContainerInfo(_message.Message):
    __slots__ = ("namespace", "id", "image", "pid", "status", "pod_id", "name", "network_namespace")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    POD_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NETWORK_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    id: str
    image: str
    pid: int
    status: str
    pod_id: str
    name: str
    network_namespace: str
    def __init__(self, namespace: _Optional[str] = ..., id: _Optional[str] = ..., image: _Optional[str] = ..., pid: _Optional[int] = ..., status: _Optional[str] = ..., pod_id: _Optional[str] = ..., name: _Optional[str] = ..., network_namespace: _Optional[str] = ...) -> None: ...

class Container(_message.Message):
    __slots__ = ("metadata", "containers")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    containers: _containers.RepeatedCompositeFieldContainer[ContainerInfo]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., containers: _Optional[_Iterable[_Union[ContainerInfo, _Mapping]]] = ...) -> None: ...

class ContainersResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Container]
    def __init__(self, messages: _Optional[_Iterable[_Union[Container, _Mapping]]] = ...) -> None: ...

class DmesgRequest(_message.Message):
    __slots__ = ("follow", "tail")
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    TAIL_FIELD_NUMBER: _ClassVar[int]
    follow: bool
    tail: bool
    def __init__(self, follow: _Optional[bool] = ..., tail: _Optional[bool] = ...) -> None: ...

class ProcessesResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Process]
    def __init__(self, messages: _Optional[_Iterable[_Union[Process, _Mapping]]] = ...) -> None: ...

class Process(_message.Message):
    __slots__ = ("metadata", "processes")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    processes: _containers.RepeatedCompositeFieldContainer[ProcessInfo]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., processes: _Optional[_Iterable[_Union[ProcessInfo, _Mapping]]] = ...) -> None: ...

class ProcessInfo(_message.Message):
    __slots__ = ("pid", "ppid", "state", "threads", "cpu_time", "virtual_memory", "resident_memory", "command", "executable", "args")
    PID_FIELD_NUMBER: _ClassVar[int]
    PPID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    CPU_TIME_FIELD_NUMBER: _ClassVar[int]
    VIRTUAL_MEMORY_FIELD_NUMBER: _ClassVar[int]
    RESIDENT_MEMORY_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    pid: int
    ppid: int
    state: str
    threads: int
    cpu_time: float
    virtual_memory: int
    resident_memory: int
    command: str
    executable: str
    args: str
    def __init__(self, pid: _Optional[int] = ..., ppid: _Optional[int] = ..., state: _Optional[str] = ..., threads: _Optional[int] = ..., cpu_time: _Optional[float] = ..., virtual_memory: _Optional[int] = ..., resident_memory: _Optional[int] = ..., command: _Optional[str] = ..., executable: _Optional[str] = ..., args: _Optional[str] = ...) -> None: ...

class RestartRequest(_message.Message):
    __slots__ = ("namespace", "id", "driver")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    id: str
    driver: _common_pb2.ContainerDriver
    def __init__(self, namespace: _Optional[str] = ..., id: _Optional[str] = ..., driver: _Optional[_Union[_common_pb2.ContainerDriver, str]] = ...) -> None: ...

class Restart(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ...) -> None: ...

class RestartResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Restart]
    def __init__(self, messages: _Optional[_Iterable[_Union[Restart, _Mapping]]] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("namespace", "driver")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    driver: _common_pb2.ContainerDriver
    def __init__(self, namespace: _Optional[str] = ..., driver: _Optional[_Union[_common_pb2.ContainerDriver, str]] = ...) -> None: ...

class Stats(_message.Message):
    __slots__ = ("metadata", "stats")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    stats: _containers.RepeatedCompositeFieldContainer[Stat]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., stats: _Optional[_Iterable[_Union[Stat, _Mapping]]] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Stats]
    def __init__(self, messages: _Optional[_Iterable[_Union[Stats, _Mapping]]] = ...) -> None: ...

class Stat(_message.Message):
    __slots__ = ("namespace", "id", "memory_usage", "cpu_usage", "pod_id", "name")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USAGE_FIELD_NUMBER: _ClassVar[int]
    CPU_USAGE_FIELD_NUMBER: _ClassVar[int]
    POD_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    id: str
    memory_usage: int
    cpu_usage: int
    pod_id: str
    name: str
    def __init__(self, namespace: _Optional[str] = ..., id: _Optional[str] = ..., memory_usage: _Optional[int] = ..., cpu_usage: _Optional[int] = ..., pod_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ("metadata", "meminfo")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MEMINFO_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    meminfo: MemInfo
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., meminfo: _Optional[_Union[MemInfo, _Mapping]] = ...) -> None: ...

class MemoryResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Memory]
    def __init__(self, messages: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ...) -> None: ...

class MemInfo(_message.Message):
    __slots__ = ("memtotal", "memfree", "memavailable", "buffers", "cached", "swapcached", "active", "inactive", "activeanon", "inactiveanon", "activefile", "inactivefile", "unevictable", "mlocked", "swaptotal", "swapfree", "dirty", "writeback", "anonpages", "mapped", "shmem", "slab", "sreclaimable", "sunreclaim", "kernelstack", "pagetables", "nfsunstable", "bounce", "writebacktmp", "commitlimit", "committedas", "vmalloctotal", "vmallocused", "vmallocchunk", "hardwarecorrupted", "anonhugepages", "shmemhugepages", "shmempmdmapped", "cmatotal", "cmafree", "hugepagestotal", "hugepagesfree", "hugepagesrsvd", "hugepagessurp", "hugepagesize", "directmap4k", "directmap2m", "directmap1g")
    MEMTOTAL_FIELD_NUMBER: _ClassVar[int]
    MEMFREE_FIELD_NUMBER: _ClassVar[int]
    MEMAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    BUFFERS_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    SWAPCACHED_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    INACTIVE_FIELD_NUMBER: _ClassVar[int]
    ACTIVEANON_FIELD_NUMBER: _ClassVar[int]
    INACTIVEANON_FIELD_NUMBER: _ClassVar[int]
    ACTIVEFILE_FIELD_NUMBER: _ClassVar[int]
    INACTIVEFILE_FIELD_NUMBER: _ClassVar[int]
    UNEVICTABLE_FIELD_NUMBER: _ClassVar[int]
    MLOCKED_FIELD_NUMBER: _ClassVar[int]
    SWAPTOTAL_FIELD_NUMBER: _ClassVar[int]
    SWAPFREE_FIELD_NUMBER: _ClassVar[int]
    DIRTY_FIELD_NUMBER: _ClassVar[int]
    WRITEBACK_FIELD_NUMBER: _ClassVar[int]
    ANONPAGES_FIELD_NUMBER: _ClassVar[int]
    MAPPED_FIELD_NUMBER: _ClassVar[int]
    SHMEM_FIELD_NUMBER: _ClassVar[int]
    SLAB_FIELD_NUMBER: _ClassVar[int]
    SRECLAIMABLE_FIELD_NUMBER: _ClassVar[int]
    SUNRECLAIM_FIELD_NUMBER: _ClassVar[int]
    KERNELSTACK_FIELD_NUMBER: _ClassVar[int]
    PAGETABLES_FIELD_NUMBER: _ClassVar[int]
    NFSUNSTABLE_FIELD_NUMBER: _ClassVar[int]
    BOUNCE_FIELD_NUMBER: _ClassVar[int]
    WRITEBACKTMP_FIELD_NUMBER: _ClassVar[int]
    COMMITLIMIT_FIELD_NUMBER: _ClassVar[int]
    COMMITTEDAS_FIELD_NUMBER: _ClassVar[int]
    VMALLOCTOTAL_FIELD_NUMBER: _ClassVar[int]
    VMALLOCUSED_FIELD_NUMBER: _ClassVar[int]
    VMALLOCCHUNK_FIELD_NUMBER: _ClassVar[int]
    HARDWARECORRUPTED_FIELD_NUMBER: _ClassVar[int]
    ANONHUGEPAGES_FIELD_NUMBER: _ClassVar[int]
    SHMEMHUGEPAGES_FIELD_NUMBER: _ClassVar[int]
    SHMEMPMDMAPPED_FIELD_NUMBER: _ClassVar[int]
    CMATOTAL_FIELD_NUMBER: _ClassVar[int]
    CMAFREE_FIELD_NUMBER: _ClassVar[int]
    HUGEPAGESTOTAL_FIELD_NUMBER: _ClassVar[int]
    HUGEPAGESFREE_FIELD_NUMBER: _ClassVar[int]
    HUGEPAGESRSVD_FIELD_NUMBER: _ClassVar[int]
    HUGEPAGESSURP_FIELD_NUMBER: _ClassVar[int]
    HUGEPAGESIZE_FIELD_NUMBER: _ClassVar[int]
    DIRECTMAP4K_FIELD_NUMBER: _ClassVar[int]
    DIRECTMAP2M_FIELD_NUMBER: _ClassVar[int]
    DIRECTMAP1G_FIELD_NUMBER: _ClassVar[int]
    memtotal: int
    memfree: int
    memavailable: int
    buffers: int
    cached: int
    swapcached: int
    active: int
    inactive: int
    activeanon: int
    inactiveanon: int
    activefile: int
    inactivefile: int
    unevictable: int
    mlocked: int
    swaptotal: int
    swapfree: int
    dirty: int
    writeback: int
    anonpages: int
    mapped: int
    shmem: int
    slab: int
    sreclaimable: int
    sunreclaim: int
    kernelstack: int
    pagetables: int
    nfsunstable: int
    bounce: int
    writebacktmp: int
    commitlimit: int
    committedas: int
    vmalloctotal: int
    vmallocused: int
    vmallocchunk: int
    hardwarecorrupted: int
    anonhugepages: int
    shmemhugepages: int
    shmempmdmapped: int
    cmatotal: int
    cmafree: int
    hugepagestotal: int
    hugepagesfree: int
    hugepagesrsvd: int
    hugepagessurp: int
    hugepagesize: int
    directmap4k: int
    directmap2m: int
    directmap1g: int
    def __init__(self, memtotal: _Optional[int] = ..., memfree: _Optional[int] = ..., memavailable: _Optional[int] = ..., buffers: _Optional[int] = ..., cached: _Optional[int] = ..., swapcached: _Optional[int] = ..., active: _Optional[int] = ..., inactive: _Optional[int] = ..., activeanon: _Optional[int] = ..., inactiveanon: _Optional[int] = ..., activefile: _Optional[int] = ..., inactivefile: _Optional[int] = ..., unevictable: _Optional[int] = ..., mlocked: _Optional[int] = ..., swaptotal: _Optional[int] = ..., swapfree: _Optional[int] = ..., dirty: _Optional[int] = ..., writeback: _Optional[int] = ..., anonpages: _Optional[int] = ..., mapped: _Optional[int] = ..., shmem: _Optional[int] = ..., slab: _Optional[int] = ..., sreclaimable: _Optional[int] = ..., sunreclaim: _Optional[int] = ..., kernelstack: _Optional[int] = ..., pagetables: _Optional[int] = ..., nfsunstable: _Optional[int] = ..., bounce: _Optional[int] = ..., writebacktmp: _Optional[int] = ..., commitlimit: _Optional[int] = ..., committedas: _Optional[int] = ..., vmalloctotal: _Optional[int] = ..., vmallocused: _Optional[int] = ..., vmallocchunk: _Optional[int] = ..., hardwarecorrupted: _Optional[int] = ..., anonhugepages: _Optional[int] = ..., shmemhugepages: _Optional[int] = ..., shmempmdmapped: _Optional[int] = ..., cmatotal: _Optional[int] = ..., cmafree: _Optional[int] = ..., hugepagestotal: _Optional[int] = ..., hugepagesfree: _Optional[int] = ..., hugepagesrsvd: _Optional[int] = ..., hugepagessurp: _Optional[int] = ..., hugepagesize: _Optional[int] = ..., directmap4k: _Optional[int] = ..., directmap2m: _Optional[int] = ..., directmap1g: _Optional[int] = ...) -> None: ...

class HostnameResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Hostname]
    def __init__(self, messages: _Optional[_Iterable[_Union[Hostname, _Mapping]]] = ...) -> None: ...

class Hostname(_message.Message):
    __slots__ = ("metadata", "hostname")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    hostname: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., hostname: _Optional[str] = ...) -> None: ...

class LoadAvgResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[LoadAvg]
    def __init__(self, messages: _Optional[_Iterable[_Union[LoadAvg, _Mapping]]] = ...) -> None: ...

class LoadAvg(_message.Message):
    __slots__ = ("metadata", "load1", "load5", "load15")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    LOAD1_FIELD_NUMBER: _ClassVar[int]
    LOAD5_FIELD_NUMBER: _ClassVar[int]
    LOAD15_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    load1: float
    load5: float
    load15: float
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., load1: _Optional[float] = ..., load5: _Optional[float] = ..., load15: _Optional[float] = ...) -> None: ...

class SystemStatResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[SystemStat]
    def __init__(self, messages: _Optional[_Iterable[_Union[SystemStat, _Mapping]]] = ...) -> None: ...

class SystemStat(_message.Message):
    __slots__ = ("metadata", "boot_time", "cpu_total", "cpu", "irq_total", "irq", "context_switches", "process_created", "process_running", "process_blocked", "soft_irq_total", "soft_irq")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    BOOT_TIME_FIELD_NUMBER: _ClassVar[int]
    CPU_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CPU_FIELD_NUMBER: _ClassVar[int]
    IRQ_TOTAL_FIELD_NUMBER: _ClassVar[int]
    IRQ_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_SWITCHES_FIELD_NUMBER: _ClassVar[int]
    PROCESS_CREATED_FIELD_NUMBER: _ClassVar[int]
    PROCESS_RUNNING_FIELD_NUMBER: _ClassVar[int]
    PROCESS_BLOCKED_FIELD_NUMBER: _ClassVar[int]
    SOFT_IRQ_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SOFT_IRQ_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    boot_time: int
    cpu_total: CPUStat
    cpu: _containers.RepeatedCompositeFieldContainer[CPUStat]
    irq_total: int
    irq: _containers.RepeatedScalarFieldContainer[int]
    context_switches: int
    process_created: int
    process_running: int
    process_blocked: int
    soft_irq_total: int
    soft_irq: SoftIRQStat
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., boot_time: _Optional[int] = ..., cpu_total: _Optional[_Union[CPUStat, _Mapping]] = ..., cpu: _Optional[_Iterable[_Union[CPUStat, _Mapping]]] = ..., irq_total: _Optional[int] = ..., irq: _Optional[_Iterable[int]] = ..., context_switches: _Optional[int] = ..., process_created: _Optional[int] = ..., process_running: _Optional[int] = ..., process_blocked: _Optional[int] = ..., soft_irq_total: _Optional[int] = ..., soft_irq: _Optional[_Union[SoftIRQStat, _Mapping]] = ...) -> None: ...

class CPUStat(_message.Message):
    __slots__ = ("user", "nice", "system", "idle", "iowait", "irq", "soft_irq", "steal", "guest", "guest_nice")
    USER_FIELD_NUMBER: _ClassVar[int]
    NICE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    IDLE_FIELD_NUMBER: _ClassVar[int]
    IOWAIT_FIELD_NUMBER: _ClassVar[int]
    IRQ_FIELD_NUMBER: _ClassVar[int]
    SOFT_IRQ_FIELD_NUMBER: _ClassVar[int]
    STEAL_FIELD_NUMBER: _ClassVar[int]
    GUEST_FIELD_NUMBER: _ClassVar[int]
    GUEST_NICE_FIELD_NUMBER: _ClassVar[int]
    user: float
    nice: float
    system: float
    idle: float
    iowait: float
    irq: float
    soft_irq: float
    steal: float
    guest: float
    guest_nice: float
    def __init__(self, user: _Optional[float] = ..., nice: _Optional[float] = ..., system: _Optional[float] = ..., idle: _Optional[float] = ..., iowait: _Optional[float] = ..., irq: _Optional[float] = ..., soft_irq: _Optional[float] = ..., steal: _Optional[float] = ..., guest: _Optional[float] = ..., guest_nice: _Optional[float] = ...) -> None: ...

class SoftIRQStat(_message.Message):
    __slots__ = ("hi", "timer", "net_tx", "net_rx", "block", "block_io_poll", "tasklet", "sched", "hrtimer", "rcu")
    HI_FIELD_NUMBER: _ClassVar[int]
    TIMER_FIELD_NUMBER: _ClassVar[int]
    NET_TX_FIELD_NUMBER: _ClassVar[int]
    NET_RX_FIELD_NUMBER: _ClassVar[int]
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    BLOCK_IO_POLL_FIELD_NUMBER: _ClassVar[int]
    TASKLET_FIELD_NUMBER: _ClassVar[int]
    SCHED_FIELD_NUMBER: _ClassVar[int]
    HRTIMER_FIELD_NUMBER: _ClassVar[int]
    RCU_FIELD_NUMBER: _ClassVar[int]
    hi: int
    timer: int
    net_tx: int
    net_rx: int
    block: int
    block_io_poll: int
    tasklet: int
    sched: int
    hrtimer: int
    rcu: int
    def __init__(self, hi: _Optional[int] = ..., timer: _Optional[int] = ..., net_tx: _Optional[int] = ..., net_rx: _Optional[int] = ..., block: _Optional[int] = ..., block_io_poll: _Optional[int] = ..., tasklet: _Optional[int] = ..., sched: _Optional[int] = ..., hrtimer: _Optional[int] = ..., rcu: _Optional[int] = ...) -> None: ...

class CPUInfoResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[CPUsInfo]
    def __init__(self, messages: _Optional[_Iterable[_Union[CPUsInfo, _Mapping]]] = ...) -> None: ...

class CPUsInfo(_message.Message):
    __slots__ = ("metadata", "cpu_info")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CPU_INFO_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    cpu_info: _containers.RepeatedCompositeFieldContainer[CPUInfo]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., cpu_info: _Optional[_Iterable[_Union[CPUInfo, _Mapping]]] = ...) -> None: ...

class CPUInfo(_message.Message):
    __slots__ = ("processor", "vendor_id", "cpu_family", "model", "model_name", "stepping", "microcode", "cpu_mhz", "cache_size", "physical_id", "siblings", "core_id", "cpu_cores", "apic_id", "initial_apic_id", "fpu", "fpu_exception", "cpu_id_level", "wp", "flags", "bugs", "bogo_mips", "cl_flush_size", "cache_alignment", "address_sizes", "power_management")
    PROCESSOR_FIELD_NUMBER: _ClassVar[int]
    VENDOR_ID_FIELD_NUMBER: _ClassVar[int]
    CPU_FAMILY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    STEPPING_FIELD_NUMBER: _ClassVar[int]
    MICROCODE_FIELD_NUMBER: _ClassVar[int]
    CPU_MHZ_FIELD_NUMBER: _ClassVar[int]
    CACHE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_ID_FIELD_NUMBER: _ClassVar[int]
    SIBLINGS_FIELD_NUMBER: _ClassVar[int]
    CORE_ID_FIELD_NUMBER: _ClassVar[int]
    CPU_CORES_FIELD_NUMBER: _ClassVar[int]
    APIC_ID_FIELD_NUMBER: _ClassVar[int]
    INITIAL_APIC_ID_FIELD_NUMBER: _ClassVar[int]
    FPU_FIELD_NUMBER: _ClassVar[int]
    FPU_EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    CPU_ID_LEVEL_FIELD_NUMBER: _ClassVar[int]
    WP_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    BUGS_FIELD_NUMBER: _ClassVar[int]
    BOGO_MIPS_FIELD_NUMBER: _ClassVar[int]
    CL_FLUSH_SIZE_FIELD_NUMBER: _ClassVar[int]
    CACHE_ALIGNMENT_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_SIZES_FIELD_NUMBER: _ClassVar[int]
    POWER_MANAGEMENT_FIELD_NUMBER: _ClassVar[int]
    processor: int
    vendor_id: str
    cpu_family: str
    model: str
    model_name: str
    stepping: str
    microcode: str
    cpu_mhz: float
    cache_size: str
    physical_id: str
    siblings: int
    core_id: str
    cpu_cores: int
    apic_id: str
    initial_apic_id: str
    fpu: str
    fpu_exception: str
    cpu_id_level: int
    wp: str
    flags: _containers.RepeatedScalarFieldContainer[str]
    bugs: _containers.RepeatedScalarFieldContainer[str]
    bogo_mips: float
    cl_flush_size: int
    cache_alignment: int
    address_sizes: str
    power_management: str
    def __init__(self, processor: _Optional[int] = ..., vendor_id: _Optional[str] = ..., cpu_family: _Optional[str] = ..., model: _Optional[str] = ..., model_name: _Optional[str] = ..., stepping: _Optional[str] = ..., microcode: _Optional[str] = ..., cpu_mhz: _Optional[float] = ..., cache_size: _Optional[str] = ..., physical_id: _Optional[str] = ..., siblings: _Optional[int] = ..., core_id: _Optional[str] = ..., cpu_cores: _Optional[int] = ..., apic_id: _Optional[str] = ..., initial_apic_id: _Optional[str] = ..., fpu: _Optional[str] = ..., fpu_exception: _Optional[str] = ..., cpu_id_level: _Optional[int] = ..., wp: _Optional[str] = ..., flags: _Optional[_Iterable[str]] = ..., bugs: _Optional[_Iterable[str]] = ..., bogo_mips: _Optional[float] = ..., cl_flush_size: _Optional[int] = ..., cache_alignment: _Optional[int] = ..., address_sizes: _Optional[str] = ..., power_management: _Optional[str] = ...) -> None: ...

class NetworkDeviceStatsResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[NetworkDeviceStats]
    def __init__(self, messages: _Optional[_Iterable[_Union[NetworkDeviceStats, _Mapping]]] = ...) -> None: ...

class NetworkDeviceStats(_message.Message):
    __slots__ = ("metadata", "total", "devices")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    total: NetDev
    devices: _containers.RepeatedCompositeFieldContainer[NetDev]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., total: _Optional[_Union[NetDev, _Mapping]] = ..., devices: _Optional[_Iterable[_Union[NetDev, _Mapping]]] = ...) -> None: ...

class NetDev(_message.Message):
    __slots__ = ("name", "rx_bytes", "rx_packets", "rx_errors", "rx_dropped", "rx_fifo", "rx_frame", "rx_compressed", "rx_multicast", "tx_bytes", "tx_packets", "tx_errors", "tx_dropped", "tx_fifo", "tx_collisions", "tx_carrier", "tx_compressed")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RX_BYTES_FIELD_NUMBER: _ClassVar[int]
    RX_PACKETS_FIELD_NUMBER: _ClassVar[int]
    RX_ERRORS_FIELD_NUMBER: _ClassVar[int]
    RX_DROPPED_FIELD_NUMBER: _ClassVar[int]
    RX_FIFO_FIELD_NUMBER: _ClassVar[int]
    RX_FRAME_FIELD_NUMBER: _ClassVar[int]
    RX_COMPRESSED_FIELD_NUMBER: _ClassVar[int]
    RX_MULTICAST_FIELD_NUMBER: _ClassVar[int]
    TX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TX_PACKETS_FIELD_NUMBER: _ClassVar[int]
    TX_ERRORS_FIELD_NUMBER: _ClassVar[int]
    TX_DROPPED_FIELD_NUMBER: _ClassVar[int]
    TX_FIFO_FIELD_NUMBER: _ClassVar[int]
    TX_COLLISIONS_FIELD_NUMBER: _ClassVar[int]
    TX_CARRIER_FIELD_NUMBER: _ClassVar[int]
    TX_COMPRESSED_FIELD_NUMBER: _ClassVar[int]
    name: str
    rx_bytes: int
    rx_packets: int
    rx_errors: int
    rx_dropped: int
    rx_fifo: int
    rx_frame: int
    rx_compressed: int
    rx_multicast: int
    tx_bytes: int
    tx_packets: int
    tx_errors: int
    tx_dropped: int
    tx_fifo: int
    tx_collisions: int
    tx_carrier: int
    tx_compressed: int
    def __init__(self, name: _Optional[str] = ..., rx_bytes: _Optional[int] = ..., rx_packets: _Optional[int] = ..., rx_errors: _Optional[int] = ..., rx_dropped: _Optional[int] = ..., rx_fifo: _Optional[int] = ..., rx_frame: _Optional[int] = ..., rx_compressed: _Optional[int] = ..., rx_multicast: _Optional[int] = ..., tx_bytes: _Optional[int] = ..., tx_packets: _Optional[int] = ..., tx_errors: _Optional[int] = ..., tx_dropped: _Optional[int] = ..., tx_fifo: _Optional[int] = ..., tx_collisions: _Optional[int] = ..., tx_carrier: _Optional[int] = ..., tx_compressed: _Optional[int] = ...) -> None: ...

class DiskStatsResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[DiskStats]
    def __init__(self, messages: _Optional[_Iterable[_Union[DiskStats, _Mapping]]] = ...) -> None: ...

class DiskStats(_message.Message):
    __slots__ = ("metadata", "total", "devices")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    total: DiskStat
    devices: _containers.RepeatedCompositeFieldContainer[DiskStat]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., total: _Optional[_Union[DiskStat, _Mapping]] = ..., devices: _Optional[_Iterable[_Union[DiskStat, _Mapping]]] = ...) -> None: ...

class DiskStat(_message.Message):
    __slots__ = ("name", "read_completed", "read_merged", "read_sectors", "read_time_ms", "write_completed", "write_merged", "write_sectors", "write_time_ms", "io_in_progress", "io_time_ms", "io_time_weighted_ms", "discard_completed", "discard_merged", "discard_sectors", "discard_time_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    READ_MERGED_FIELD_NUMBER: _ClassVar[int]
    READ_SECTORS_FIELD_NUMBER: _ClassVar[int]
    READ_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    WRITE_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    WRITE_MERGED_FIELD_NUMBER: _ClassVar[int]
    WRITE_SECTORS_FIELD_NUMBER: _ClassVar[int]
    WRITE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    IO_IN_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    IO_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    IO_TIME_WEIGHTED_MS_FIELD_NUMBER: _ClassVar[int]
    DISCARD_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    DISCARD_MERGED_FIELD_NUMBER: _ClassVar[int]
    DISCARD_SECTORS_FIELD_NUMBER: _ClassVar[int]
    DISCARD_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    read_completed: int
    read_merged: int
    read_sectors: int
    read_time_ms: int
    write_completed: int
    write_merged: int
    write_sectors: int
    write_time_ms: int
    io_in_progress: int
    io_time_ms: int
    io_time_weighted_ms: int
    discard_completed: int
    discard_merged: int
    discard_sectors: int
    discard_time_ms: int
    def __init__(self, name: _Optional[str] = ..., read_completed: _Optional[int] = ..., read_merged: _Optional[int] = ..., read_sectors: _Optional[int] = ..., read_time_ms: _Optional[int] = ..., write_completed: _Optional[int] = ..., write_merged: _Optional[int] = ..., write_sectors: _Optional[int] = ..., write_time_ms: _Optional[int] = ..., io_in_progress: _Optional[int] = ..., io_time_ms: _Optional[int] = ..., io_time_weighted_ms: _Optional[int] = ..., discard_completed: _Optional[int] = ..., discard_merged: _Optional[int] = ..., discard_sectors: _Optional[int] = ..., discard_time_ms: _Optional[int] = ...) -> None: ...

class EtcdLeaveClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EtcdLeaveCluster(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ...) -> None: ...

class EtcdLeaveClusterResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[EtcdLeaveCluster]
    def __init__(self, messages: _Optional[_Iterable[_Union[EtcdLeaveCluster, _Mapping]]] = ...) -> None: ...

class EtcdRemoveMemberByIDRequest(_message.Message):
    __slots__ = ("member_id",)
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    member_id: int
    def __init__(self, member_id: _Optional[int] = ...) -> None: ...

class EtcdRemoveMemberByID(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ...) -> None: ...

class EtcdRemoveMemberByIDResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[EtcdRemoveMemberByID]
    def __init__(self, messages: _Optional[_Iterable[_Union[EtcdRemoveMemberByID, _Mapping]]] = ...) -> None: ...

class EtcdForfeitLeadershipRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EtcdForfeitLeadership(_message.Message):
    __slots__ = ("metadata", "member")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    member: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., member: _Optional[str] = ...) -> None: ...

class EtcdForfeitLeadershipResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[EtcdForfeitLeadership]
    def __init__(self, messages: _Optional[_Iterable[_Union[EtcdForfeitLeadership, _Mapping]]] = ...) -> None: ...

class EtcdMemberListRequest(_message.Message):
    __slots__ = ("query_local",)
    QUERY_LOCAL_FIELD_NUMBER: _ClassVar[int]
    query_local: bool
    def __init__(self, query_local: _Optional[bool] = ...) -> None: ...

class EtcdMember(_message.Message):
    __slots__ = ("id", "hostname", "peer_urls", "client_urls", "is_learner")
    ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PEER_URLS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_URLS_FIELD_NUMBER: _ClassVar[int]
    IS_LEARNER_FIELD_NUMBER: _ClassVar[int]
    id: int
    hostname: str
    peer_urls: _containers.RepeatedScalarFieldContainer[str]
    client_urls: _containers.RepeatedScalarFieldContainer[str]
    is_learner: bool
    def __init__(self, id: _Optional[int] = ..., hostname: _Optional[str] = ..., peer_urls: _Optional[_Iterable[str]] = ..., client_urls: _Optional[_Iterable[str]] = ..., is_learner: _Optional[bool] = ...) -> None: ...

class EtcdMembers(_message.Message):
    __slots__ = ("metadata", "legacy_members", "members")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    LEGACY_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    legacy_members: _containers.RepeatedScalarFieldContainer[str]
    members: _containers.RepeatedCompositeFieldContainer[EtcdMember]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., legacy_members: _Optional[_Iterable[str]] = ..., members: _Optional[_Iterable[_Union[EtcdMember, _Mapping]]] = ...) -> None: ...

class EtcdMemberListResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[EtcdMembers]
    def __init__(self, messages: _Optional[_Iterable[_Union[EtcdMembers, _Mapping]]] = ...) -> None: ...

class EtcdSnapshotRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EtcdRecover(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ...) -> None: ...

class EtcdRecoverResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[EtcdRecover]
    def __init__(self, messages: _Optional[_Iterable[_Union[EtcdRecover, _Mapping]]] = ...) -> None: ...

class EtcdAlarmListResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[EtcdAlarm]
    def __init__(self, messages: _Optional[_Iterable[_Union[EtcdAlarm, _Mapping]]] = ...) -> None: ...

class EtcdAlarm(_message.Message):
    __slots__ = ("metadata", "member_alarms")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ALARMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    member_alarms: _containers.RepeatedCompositeFieldContainer[EtcdMemberAlarm]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., member_alarms: _Optional[_Iterable[_Union[EtcdMemberAlarm, _Mapping]]] = ...) -> None: ...

class EtcdMemberAlarm(_message.Message):
    __slots__ = ("member_id", "alarm")
    class AlarmType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NONE: _ClassVar[EtcdMemberAlarm.AlarmType]
        NOSPACE: _ClassVar[EtcdMemberAlarm.AlarmType]
        CORRUPT: _ClassVar[EtcdMemberAlarm.AlarmType]
    NONE: EtcdMemberAlarm.AlarmType
    NOSPACE: EtcdMemberAlarm.AlarmType
    CORRUPT: EtcdMemberAlarm.AlarmType
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ALARM_FIELD_NUMBER: _ClassVar[int]
    member_id: int
    alarm: EtcdMemberAlarm.AlarmType
    def __init__(self, member_id: _Optional[int] = ..., alarm: _Optional[_Union[EtcdMemberAlarm.AlarmType, str]] = ...) -> None: ...

class EtcdAlarmDisarmResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[EtcdAlarmDisarm]
    def __init__(self, messages: _Optional[_Iterable[_Union[EtcdAlarmDisarm, _Mapping]]] = ...) -> None: ...

class EtcdAlarmDisarm(_message.Message):
    __slots__ = ("metadata", "member_alarms")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ALARMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    member_alarms: _containers.RepeatedCompositeFieldContainer[EtcdMemberAlarm]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., member_alarms: _Optional[_Iterable[_Union[EtcdMemberAlarm, _Mapping]]] = ...) -> None: ...

class EtcdDefragmentResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[EtcdDefragment]
    def __init__(self, messages: _Optional[_Iterable[_Union[EtcdDefragment, _Mapping]]] = ...) -> None: ...

class EtcdDefragment(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ...) -> None: ...

class EtcdStatusResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[EtcdStatus]
    def __init__(self, messages: _Optional[_Iterable[_Union[EtcdStatus, _Mapping]]] = ...) -> None: ...

class EtcdStatus(_message.Message):
    __slots__ = ("metadata", "member_status")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MEMBER_STATUS_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    member_status: EtcdMemberStatus
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., member_status: _Optional[_Union[EtcdMemberStatus, _Mapping]] = ...) -> None: ...

class EtcdMemberStatus(_message.Message):
    __slots__ = ("protocol_version", "db_size", "db_size_in_use", "leader", "raft_index", "raft_term", "raft_applied_index", "errors", "is_learner", "member_id")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    DB_SIZE_FIELD_NUMBER: _ClassVar[int]
    DB_SIZE_IN_USE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    RAFT_INDEX_FIELD_NUMBER: _ClassVar[int]
    RAFT_TERM_FIELD_NUMBER: _ClassVar[int]
    RAFT_APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    IS_LEARNER_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    protocol_version: str
    db_size: int
    db_size_in_use: int
    leader: int
    raft_index: int
    raft_term: int
    raft_applied_index: int
    errors: _containers.RepeatedScalarFieldContainer[str]
    is_learner: bool
    member_id: int
    def __init__(self, protocol_version: _Optional[str] = ..., db_size: _Optional[int] = ..., db_size_in_use: _Optional[int] = ..., leader: _Optional[int] = ..., raft_index: _Optional[int] = ..., raft_term: _Optional[int] = ..., raft_applied_index: _Optional[int] = ..., errors: _Optional[_Iterable[str]] = ..., is_learner: _Optional[bool] = ..., member_id: _Optional[int] = ...) -> None: ...

class RouteConfig(_message.Message):
    __slots__ = ("network", "gateway", "metric")
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    network: str
    gateway: str
    metric: int
    def __init__(self, network: _Optional[str] = ..., gateway: _Optional[str] = ..., metric: _Optional[int] = ...) -> None: ...

class DHCPOptionsConfig(_message.Message):
    __slots__ = ("route_metric",)
    ROUTE_METRIC_FIELD_NUMBER: _ClassVar[int]
    route_metric: int
    def __init__(self, route_metric: _Optional[int] = ...) -> None: ...

class NetworkDeviceConfig(_message.Message):
    __slots__ = ("interface", "cidr", "mtu", "dhcp", "ignore", "dhcp_options", "routes")
    INTERFACE_FIELD_NUMBER: _ClassVar[int]
    CIDR_FIELD_NUMBER: _ClassVar[int]
    MTU_FIELD_NUMBER: _ClassVar[int]
    DHCP_FIELD_NUMBER: _ClassVar[int]
    IGNORE_FIELD_NUMBER: _ClassVar[int]
    DHCP_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    interface: str
    cidr: str
    mtu: int
    dhcp: bool
    ignore: bool
    dhcp_options: DHCPOptionsConfig
    routes: _containers.RepeatedCompositeFieldContainer[RouteConfig]
    def __init__(self, interface: _Optional[str] = ..., cidr: _Optional[str] = ..., mtu: _Optional[int] = ..., dhcp: _Optional[bool] = ..., ignore: _Optional[bool] = ..., dhcp_options: _Optional[_Union[DHCPOptionsConfig, _Mapping]] = ..., routes: _Optional[_Iterable[_Union[RouteConfig, _Mapping]]] = ...) -> None: ...

class NetworkConfig(_message.Message):
    __slots__ = ("hostname", "interfaces")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    INTERFACES_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    interfaces: _containers.RepeatedCompositeFieldContainer[NetworkDeviceConfig]
    def __init__(self, hostname: _Optional[str] = ..., interfaces: _Optional[_Iterable[_Union[NetworkDeviceConfig, _Mapping]]] = ...) -> None: ...

class InstallConfig(_message.Message):
    __slots__ = ("install_disk", "install_image")
    INSTALL_DISK_FIELD_NUMBER: _ClassVar[int]
    INSTALL_IMAGE_FIELD_NUMBER: _ClassVar[int]
    install_disk: str
    install_image: str
    def __init__(self, install_disk: _Optional[str] = ..., install_image: _Optional[str] = ...) -> None: ...

class MachineConfig(_message.Message):
    __slots__ = ("type", "install_config", "network_config", "kubernetes_version")
    class MachineType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TYPE_UNKNOWN: _ClassVar[MachineConfig.MachineType]
        TYPE_INIT: _ClassVar[MachineConfig.MachineType]
        TYPE_CONTROL_PLANE: _ClassVar[MachineConfig.MachineType]
        TYPE_WORKER: _ClassVar[MachineConfig.MachineType]
    TYPE_UNKNOWN: MachineConfig.MachineType
    TYPE_INIT: MachineConfig.MachineType
    TYPE_CONTROL_PLANE: MachineConfig.MachineType
    TYPE_WORKER: MachineConfig.MachineType
    TYPE_FIELD_NUMBER: _ClassVar[int]
    INSTALL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    NETWORK_CONFIG_FIELD_NUMBER: _ClassVar[int]
    KUBERNETES_VERSION_FIELD_NUMBER: _ClassVar[int]
    type: MachineConfig.MachineType
    install_config: InstallConfig
    network_config: NetworkConfig
    kubernetes_version: str
    def __init__(self, type: _Optional[_Union[MachineConfig.MachineType, str]] = ..., install_config: _Optional[_Union[InstallConfig, _Mapping]] = ..., network_config: _Optional[_Union[NetworkConfig, _Mapping]] = ..., kubernetes_version: _Optional[str] = ...) -> None: ...

class ControlPlaneConfig(_message.Message):
    __slots__ = ("endpoint",)
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    def __init__(self, endpoint: _Optional[str] = ...) -> None: ...

class CNIConfig(_message.Message):
    __slots__ = ("name", "urls")
    NAME_FIELD_NUMBER: _ClassVar[int]
    URLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    urls: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., urls: _Optional[_Iterable[str]] = ...) -> None: ...

class ClusterNetworkConfig(_message.Message):
    __slots__ = ("dns_domain", "cni_config")
    DNS_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    CNI_CONFIG_FIELD_NUMBER: _ClassVar[int]
    dns_domain: str
    cni_config: CNIConfig
    def __init__(self, dns_domain: _Optional[str] = ..., cni_config: _Optional[_Union[CNIConfig, _Mapping]] = ...) -> None: ...

class ClusterConfig(_message.Message):
    __slots__ = ("name", "control_plane", "cluster_network", "allow_scheduling_on_control_planes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTROL_PLANE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NETWORK_FIELD_NUMBER: _ClassVar[int]
    ALLOW_SCHEDULING_ON_CONTROL_PLANES_FIELD_NUMBER: _ClassVar[int]
    name: str
    control_plane: ControlPlaneConfig
    cluster_network: ClusterNetworkConfig
    allow_scheduling_on_control_planes: bool
    def __init__(self, name: _Optional[str] = ..., control_plane: _Optional[_Union[ControlPlaneConfig, _Mapping]] = ..., cluster_network: _Optional[_Union[ClusterNetworkConfig, _Mapping]] = ..., allow_scheduling_on_control_planes: _Optional[bool] = ...) -> None: ...

class GenerateConfigurationRequest(_message.Message):
    __slots__ = ("config_version", "cluster_config", "machine_config", "override_time")
    CONFIG_VERSION_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_CONFIG_FIELD_NUMBER: _ClassVar[int]
    MACHINE_CONFIG_FIELD_NUMBER: _ClassVar[int]
    OVERRIDE_TIME_FIELD_NUMBER: _ClassVar[int]
    config_version: str
    cluster_config: ClusterConfig
    machine_config: MachineConfig
    override_time: _timestamp_pb2.Timestamp
    def __init__(self, config_version: _Optional[str] = ..., cluster_config: _Optional[_Union[ClusterConfig, _Mapping]] = ..., machine_config: _Optional[_Union[MachineConfig, _Mapping]] = ..., override_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GenerateConfiguration(_message.Message):
    __slots__ = ("metadata", "data", "talosconfig")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TALOSCONFIG_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    data: _containers.RepeatedScalarFieldContainer[bytes]
    talosconfig: bytes
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., data: _Optional[_Iterable[bytes]] = ..., talosconfig: _Optional[bytes] = ...) -> None: ...

class GenerateConfigurationResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[GenerateConfiguration]
    def __init__(self, messages: _Optional[_Iterable[_Union[GenerateConfiguration, _Mapping]]] = ...) -> None: ...

class GenerateClientConfigurationRequest(_message.Message):
    __slots__ = ("roles", "crt_ttl")
    ROLES_FIELD_NUMBER: _ClassVar[int]
    CRT_TTL_FIELD_NUMBER: _ClassVar[int]
    roles: _containers.RepeatedScalarFieldContainer[str]
    crt_ttl: _duration_pb2.Duration
    def __init__(self, roles: _Optional[_Iterable[str]] = ..., crt_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class GenerateClientConfiguration(_message.Message):
    __slots__ = ("metadata", "ca", "crt", "key", "talosconfig")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CA_FIELD_NUMBER: _ClassVar[int]
    CRT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TALOSCONFIG_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    ca: bytes
    crt: bytes
    key: bytes
    talosconfig: bytes
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., ca: _Optional[bytes] = ..., crt: _Optional[bytes] = ..., key: _Optional[bytes] = ..., talosconfig: _Optional[bytes] = ...) -> None: ...

class GenerateClientConfigurationResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[GenerateClientConfiguration]
    def __init__(self, messages: _Optional[_Iterable[_Union[GenerateClientConfiguration, _Mapping]]] = ...) -> None: ...

class PacketCaptureRequest(_message.Message):
    __slots__ = ("interface", "promiscuous", "snap_len", "bpf_filter")
    INTERFACE_FIELD_NUMBER: _ClassVar[int]
    PROMISCUOUS_FIELD_NUMBER: _ClassVar[int]
    SNAP_LEN_FIELD_NUMBER: _ClassVar[int]
    BPF_FILTER_FIELD_NUMBER: _ClassVar[int]
    interface: str
    promiscuous: bool
    snap_len: int
    bpf_filter: _containers.RepeatedCompositeFieldContainer[BPFInstruction]
    def __init__(self, interface: _Optional[str] = ..., promiscuous: _Optional[bool] = ..., snap_len: _Optional[int] = ..., bpf_filter: _Optional[_Iterable[_Union[BPFInstruction, _Mapping]]] = ...) -> None: ...

class BPFInstruction(_message.Message):
    __slots__ = ("op", "jt", "jf", "k")
    OP_FIELD_NUMBER: _ClassVar[int]
    JT_FIELD_NUMBER: _ClassVar[int]
    JF_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    op: int
    jt: int
    jf: int
    k: int
    def __init__(self, op: _Optional[int] = ..., jt: _Optional[int] = ..., jf: _Optional[int] = ..., k: _Optional[int] = ...) -> None: ...

class NetstatRequest(_message.Message):
    __slots__ = ("filter", "feature", "l4proto", "netns")
    class Filter(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ALL: _ClassVar[NetstatRequest.Filter]
        CONNECTED: _ClassVar[NetstatRequest.Filter]
        LISTENING: _ClassVar[NetstatRequest.Filter]
    ALL: NetstatRequest.Filter
    CONNECTED: NetstatRequest.Filter
    LISTENING: NetstatRequest.Filter
    class Feature(_message.Message):
        __slots__ = ("pid",)
        PID_FIELD_NUMBER: _ClassVar[int]
        pid: bool
        def __init__(self, pid: _Optional[bool] = ...) -> None: ...
    class L4proto(_message.Message):
        __slots__ = ("tcp", "tcp6", "udp", "udp6", "udplite", "udplite6", "raw", "raw6")
        TCP_FIELD_NUMBER: _ClassVar[int]
        TCP6_FIELD_NUMBER: _ClassVar[int]
        UDP_FIELD_NUMBER: _ClassVar[int]
        UDP6_FIELD_NUMBER: _ClassVar[int]
        UDPLITE_FIELD_NUMBER: _ClassVar[int]
        UDPLITE6_FIELD_NUMBER: _ClassVar[int]
        RAW_FIELD_NUMBER: _ClassVar[int]
        RAW6_FIELD_NUMBER: _ClassVar[int]
        tcp: bool
        tcp6: bool
        udp: bool
        udp6: bool
        udplite: bool
        udplite6: bool
        raw: bool
        raw6: bool
        def __init__(self, tcp: _Optional[bool] = ..., tcp6: _Optional[bool] = ..., udp: _Optional[bool] = ..., udp6: _Optional[bool] = ..., udplite: _Optional[bool] = ..., udplite6: _Optional[bool] = ..., raw: _Optional[bool] = ..., raw6: _Optional[bool] = ...) -> None: ...
    class NetNS(_message.Message):
        __slots__ = ("hostnetwork", "netns", "allnetns")
        HOSTNETWORK_FIELD_NUMBER: _ClassVar[int]
        NETNS_FIELD_NUMBER: _ClassVar[int]
        ALLNETNS_FIELD_NUMBER: _ClassVar[int]
        hostnetwork: bool
        netns: _containers.RepeatedScalarFieldContainer[str]
        allnetns: bool
        def __init__(self, hostnetwork: _Optional[bool] = ..., netns: _Optional[_Iterable[str]] = ..., allnetns: _Optional[bool] = ...) -> None: ...
    FILTER_FIELD_NUMBER: _ClassVar[int]
    FEATURE_FIELD_NUMBER: _ClassVar[int]
    L4PROTO_FIELD_NUMBER: _ClassVar[int]
    NETNS_FIELD_NUMBER: _ClassVar[int]
    filter: NetstatRequest.Filter
    feature: NetstatRequest.Feature
    l4proto: NetstatRequest.L4proto
    netns: NetstatRequest.NetNS
    def __init__(self, filter: _Optional[_Union[NetstatRequest.Filter, str]] = ..., feature: _Optional[_Union[NetstatRequest.Feature, _Mapping]] = ..., l4proto: _Optional[_Union[NetstatRequest.L4proto, _Mapping]] = ..., netns: _Optional[_Union[NetstatRequest.NetNS, _Mapping]] = ...) -> None: ...

class ConnectRecord(_message.Message):
    __slots__ = ("l4proto", "localip", "localport", "remoteip", "remoteport", "state", "txqueue", "rxqueue", "tr", "timerwhen", "retrnsmt", "uid", "timeout", "inode", "ref", "pointer", "process", "netns")
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        RESERVED: _ClassVar[ConnectRecord.State]
        ESTABLISHED: _ClassVar[ConnectRecord.State]
        SYN_SENT: _ClassVar[ConnectRecord.State]
        SYN_RECV: _ClassVar[ConnectRecord.State]
        FIN_WAIT1: _ClassVar[ConnectRecord.State]
        FIN_WAIT2: _ClassVar[ConnectRecord.State]
        TIME_WAIT: _ClassVar[ConnectRecord.State]
        CLOSE: _ClassVar[ConnectRecord.State]
        CLOSEWAIT: _ClassVar[ConnectRecord.State]
        LASTACK: _ClassVar[ConnectRecord.State]
        LISTEN: _ClassVar[ConnectRecord.State]
        CLOSING: _ClassVar[ConnectRecord.State]
    RESERVED: ConnectRecord.State
    ESTABLISHED: ConnectRecord.State
    SYN_SENT: ConnectRecord.State
    SYN_RECV: ConnectRecord.State
    FIN_WAIT1: ConnectRecord.State
    FIN_WAIT2: ConnectRecord.State
    TIME_WAIT: ConnectRecord.State
    CLOSE: ConnectRecord.State
    CLOSEWAIT: ConnectRecord.State
    LASTACK: ConnectRecord.State
    LISTEN: ConnectRecord.State
    CLOSING: ConnectRecord.State
    class TimerActive(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        OFF: _ClassVar[ConnectRecord.TimerActive]
        ON: _ClassVar[ConnectRecord.TimerActive]
        KEEPALIVE: _ClassVar[ConnectRecord.TimerActive]
        TIMEWAIT: _ClassVar[ConnectRecord.TimerActive]
        PROBE: _ClassVar[ConnectRecord.TimerActive]
    OFF: ConnectRecord.TimerActive
    ON: ConnectRecord.TimerActive
    KEEPALIVE: ConnectRecord.TimerActive
    TIMEWAIT: ConnectRecord.TimerActive
    PROBE: ConnectRecord.TimerActive
    class Process(_message.Message):
        __slots__ = ("pid", "name")
        PID_FIELD_NUMBER: _ClassVar[int]
        NAME_FIELD_NUMBER: _ClassVar[int]
        pid: int
        name: str
        def __init__(self, pid: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...
    L4PROTO_FIELD_NUMBER: _ClassVar[int]
    LOCALIP_FIELD_NUMBER: _ClassVar[int]
    LOCALPORT_FIELD_NUMBER: _ClassVar[int]
    REMOTEIP_FIELD_NUMBER: _ClassVar[int]
    REMOTEPORT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TXQUEUE_FIELD_NUMBER: _ClassVar[int]
    RXQUEUE_FIELD_NUMBER: _ClassVar[int]
    TR_FIELD_NUMBER: _ClassVar[int]
    TIMERWHEN_FIELD_NUMBER: _ClassVar[int]
    RETRNSMT_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    POINTER_FIELD_NUMBER: _ClassVar[int]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    NETNS_FIELD_NUMBER: _ClassVar[int]
    l4proto: str
    localip: str
    localport: int
    remoteip: str
    remoteport: int
    state: ConnectRecord.State
    txqueue: int
    rxqueue: int
    tr: ConnectRecord.TimerActive
    timerwhen: int
    retrnsmt: int
    uid: int
    timeout: int
    inode: int
    ref: int
    pointer: int
    process: ConnectRecord.Process
    netns: str
    def __init__(self, l4proto: _Optional[str] = ..., localip: _Optional[str] = ..., localport: _Optional[int] = ..., remoteip: _Optional[str] = ..., remoteport: _Optional[int] = ..., state: _Optional[_Union[ConnectRecord.State, str]] = ..., txqueue: _Optional[int] = ..., rxqueue: _Optional[int] = ..., tr: _Optional[_Union[ConnectRecord.TimerActive, str]] = ..., timerwhen: _Optional[int] = ..., retrnsmt: _Optional[int] = ..., uid: _Optional[int] = ..., timeout: _Optional[int] = ..., inode: _Optional[int] = ..., ref: _Optional[int] = ..., pointer: _Optional[int] = ..., process: _Optional[_Union[ConnectRecord.Process, _Mapping]] = ..., netns: _Optional[str] = ...) -> None: ...

class Netstat(_message.Message):
    __slots__ = ("metadata", "connectrecord")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CONNECTRECORD_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    connectrecord: _containers.RepeatedCompositeFieldContainer[ConnectRecord]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., connectrecord: _Optional[_Iterable[_Union[ConnectRecord, _Mapping]]] = ...) -> None: ...

class NetstatResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Netstat]
    def __init__(self, messages: _Optional[_Iterable[_Union[Netstat, _Mapping]]] = ...) -> None: ...

class MetaWriteRequest(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: int
    value: bytes
    def __init__(self, key: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...

class MetaWrite(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ...) -> None: ...

class MetaWriteResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[MetaWrite]
    def __init__(self, messages: _Optional[_Iterable[_Union[MetaWrite, _Mapping]]] = ...) -> None: ...

class MetaDeleteRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: int
    def __init__(self, key: _Optional[int] = ...) -> None: ...

class MetaDelete(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ...) -> None: ...

class MetaDeleteResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[MetaDelete]
    def __init__(self, messages: _Optional[_Iterable[_Union[MetaDelete, _Mapping]]] = ...) -> None: ...

class ImageListRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: _common_pb2.ContainerdNamespace
    def __init__(self, namespace: _Optional[_Union[_common_pb2.ContainerdNamespace, str]] = ...) -> None: ...

class ImageListResponse(_message.Message):
    __slots__ = ("metadata", "name", "digest", "size", "created_at")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    name: str
    digest: str
    size: int
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., name: _Optional[str] = ..., digest: _Optional[str] = ..., size: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ImagePullRequest(_message.Message):
    __slots__ = ("namespace", "reference")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    namespace: _common_pb2.ContainerdNamespace
    reference: str
    def __init__(self, namespace: _Optional[_Union[_common_pb2.ContainerdNamespace, str]] = ..., reference: _Optional[str] = ...) -> None: ...

class ImagePull(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ...) -> None: ...

class ImagePullResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ImagePull]
    def __init__(self, messages: _Optional[_Iterable[_Union[ImagePull, _Mapping]]] = ...) -> None: ...
