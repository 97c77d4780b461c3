import datetime

from ichor.api.gen.common import common_pb2 as _common_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from ichor.api.gen.resource.definitions.enums import enums_pb2 as _enums_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DevicesStatusSpec(_message.Message):
    __slots__ = ("ready",)
    READY_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    def __init__(self, ready: _Optional[bool] = ...) -> None: ...

class EventSinkConfigSpec(_message.Message):
    __slots__ = ("endpoint",)
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    def __init__(self, endpoint: _Optional[str] = ...) -> None: ...

class ExtensionServiceConfigFile(_message.Message):
    __slots__ = ("content", "mount_path")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MOUNT_PATH_FIELD_NUMBER: _ClassVar[int]
    content: str
    mount_path: str
    def __init__(self, content: _Optional[str] = ..., mount_path: _Optional[str] = ...) -> None: ...

class ExtensionServiceConfigSpec(_message.Message):
    __slots__ = ("files", "environment")
    FILES_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[ExtensionServiceConfigFile]
    environment: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, files: _Optional[_Iterable[_Union[ExtensionServiceConfigFile, _Mapping]]] = ..., environment: _Optional[_Iterable[str]] = ...) -> None: ...

class ExtensionServiceConfigStatusSpec(_message.Message):
    __slots__ = ("spec_version",)
    SPEC_VERSION_FIELD_NUMBER: _ClassVar[int]
    spec_version: str
    def __init__(self, spec_version: _Optional[str] = ...) -> None: ...

class KernelModuleSpecSpec(_message.Message):
    __slots__ = ("name", "parameters")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    parameters: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., parameters: _Optional[_Iterable[str]] = ...) -> None: ...

class KernelParamSpecSpec(_message.Message):
    __slots__ = ("value", "ignore_errors")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    IGNORE_ERRORS_FIELD_NUMBER: _ClassVar[int]
    value: str
    ignore_errors: bool
    def __init__(self, value: _Optional[str] = ..., ignore_errors: _Optional[bool] = ...) -> None: ...

class KernelParamStatusSpec(_message.Message):
    __slots__ = ("current", "default", "unsupported")
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    UNSUPPORTED_FIELD_NUMBER: _ClassVar[int]
    current: str
    default: str
    unsupported: bool
    def __init__(self, current: _Optional[str] = ..., default: _Optional[str] = ..., unsupported: _Optional[bool] = ...) -> None: ...

class KmsgLogConfigSpec(_message.Message):
    __slots__ = ("destinations",)
    DESTINATIONS_FIELD_NUMBER: _ClassVar[int]
    destinations: _containers.RepeatedCompositeFieldContainer[_common_pb2.URL]
    def __init__(self, destinations: _Optional[_Iterable[_Union[_common_pb2.URL, _Mapping]]] = ...) -> None: ...

class MachineStatusSpec(_message.Message):
    __slots__ = ("stage", "status")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    stage: _enums_pb2.RuntimeMachineStage
    status: MachineStatusStatus
    def __init__(self, stage: _Optional[_Union[_enums_pb2.RuntimeMachineStage, str]] = ..., status: _Optional[_Union[MachineStatusStatus, _Mapping]] = ...) -> None: ...

class MachineStatusStatus(_message.Message):
    __slots__ = ("ready", "unmet_conditions")
    READY_FIELD_NUMBER: _ClassVar[int]
    UNMET_CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    unmet_conditions: _containers.RepeatedCompositeFieldContainer[UnmetCondition]
    def __init__(self, ready: _Optional[bool] = ..., unmet_conditions: _Optional[_Iterable[_Union[UnmetCondition, _Mapping]]] = ...) -> None: ...

class MaintenanceServiceConfigSpec(_message.Message):
    __slots__ = ("listen_address", "reachable_addresses")
    LISTEN_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REACHABLE_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    listen_address: str
    reachable_addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    def __init__(self, listen_address: _Optional[str] = ..., reachable_addresses: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ...) -> None: ...

class MetaKeySpec(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: str
    def __init__(self, value: _Optional[str] = ...) -> None: ...

class MetaLoadedSpec(_message.Message):
    __slots__ = ("done",)
    DONE_FIELD_NUMBER: _ClassVar[int]
    done: bool
    def __init__(self, done: _Optional[bool] = ...) -> None: ...

class MountStatusSpec(_message.Message):
    __slots__ = ("source", "target", "filesystem_type", "options", "encrypted", "encryption_providers")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    FILESYSTEM_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    source: str
    target: str
    filesystem_type: str
    options: _containers.RepeatedScalarFieldContainer[str]
    encrypted: bool
    encryption_providers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, source: _Optional[str] = ..., target: _Optional[str] = ..., filesystem_type: _Optional[str] = ..., options: _Optional[_Iterable[str]] = ..., encrypted: _Optional[bool] = ..., encryption_providers: _Optional[_Iterable[str]] = ...) -> None: ...

class PlatformMetadataSpec(_message.Message):
    __slots__ = ("platform", "hostname", "region", "zone", "instance_type", "instance_id", "provider_id", "spot")
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_ID_FIELD_NUMBER: _ClassVar[int]
    SPOT_FIELD_NUMBER: _ClassVar[int]
    platform: str
    hostname: str
    region: str
    zone: str
    instance_type: str
    instance_id: str
    provider_id: str
    spot: bool
    def __init__(self, platform: _Optional[str] = ..., hostname: _Optional[str] = ..., region: _Optional[str] = ..., zone: _Optional[str] = ..., instance_type: _Optional[str] = ..., instance_id: _Optional[str] = ..., provider_id: _Optional[str] = ..., spot: _Optional[bool] = ...) -> None: ...

class SecurityStateSpec(_message.Message):
    __slots__ = ("secure_boot", "uki_signing_key_fingerprint", "pcr_signing_key_fingerprint")
    SECURE_BOOT_FIELD_NUMBER: _ClassVar[int]
    UKI_SIGNING_KEY_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    PCR_SIGNING_KEY_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    secure_boot: bool
    uki_signing_key_fingerprint: str
    pcr_signing_key_fingerprint: str
    def __init__(self, secure_boot: _Optional[bool] = ..., uki_signing_key_fingerprint: _Optional[str] = ..., pcr_signing_key_fingerprint: _Optional[str] = ...) -> None: ...

class UniqueMachineTokenSpec(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class UnmetCondition(_message.Message):
    __slots__ = ("name", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class WatchdogTimerConfigSpec(_message.Message):
    __slots__ = ("device", "timeout")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    device: str
    timeout: _duration_pb2.Duration
    def __init__(self, device: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WatchdogTimerStatusSpec(_message.Message):
    __slots__ = ("device", "timeout", "feed_interval")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    FEED_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    device: str
    timeout: _duration_pb2.Duration
    feed_interval: _duration_pb2.Duration
    def __init__(self, device: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., feed_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...
