"""The resource model: metadata, typed specs and resource type declarations.

A resource is ``(metadata, spec)``. Metadata is COSI's: namespace, type, id, version (1 on create,
+1 per write, 0 meaning "undefined" for tombstones), owner, phase, timestamps, labels, annotations,
finalizers. The spec is a frozen dataclass (or pydantic model) per type; it is rendered to plain
data and YAML with Talos's camelCase keys so ``talosctl get -o yaml`` shows what Talos would.

This module holds values only: it never stores resources and never talks to the event loop.
"""

from __future__ import annotations

import base64
import builtins
import dataclasses
import enum
import ipaddress
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from ichor.machined.cosi._naming import validate_type_name
from ichor.machinery import goduration
from ichor.machinery.yamlio import dump_document, from_plain

__all__ = [
    "Clock",
    "EmptySpec",
    "Metadata",
    "Phase",
    "PrintColumn",
    "Resource",
    "ResourceType",
    "format_time",
    "go_url_plain",
    "go_url_text",
    "resource_to_plain",
    "spec_to_plain",
    "spec_to_yaml",
    "utc_now",
]

S = TypeVar("S")

Clock = Callable[[], datetime]
"""Returns the current time (timezone-aware); injected wherever time is read."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class Phase(enum.StrEnum):
    RUNNING = "running"
    TEARING_DOWN = "tearingDown"


@dataclasses.dataclass(frozen=True)
class PrintColumn:
    """An extra ``talosctl get`` table column: a header and a k8s-style JSONPath over the spec."""

    name: str
    json_path: str


@dataclasses.dataclass(frozen=True)
class EmptySpec:
    """The spec of tombstones and of types that carry nothing but their id."""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclasses.dataclass(frozen=True)
class Metadata:
    namespace: str
    type: str
    id: str
    version: int = 0
    owner: str = ""
    phase: Phase = Phase.RUNNING
    created: datetime = _EPOCH
    updated: datetime = _EPOCH
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    finalizers: tuple[str, ...] = ()

    @property
    def version_string(self) -> str:
        """The version as COSI writes it on the wire: a decimal, or ``undefined`` for 0."""
        return str(self.version) if self.version > 0 else "undefined"

    def __str__(self) -> str:
        # COSI's resource reference format, used verbatim in its error messages.
        return f"{self.type}({self.namespace}/{self.id}@{self.version_string})"


@dataclasses.dataclass(frozen=True)
class Resource(Generic[S]):
    metadata: Metadata
    spec: S

    @property
    def id(self) -> str:
        return self.metadata.id

    @property
    def is_tombstone(self) -> bool:
        return self.metadata.version == 0

    @staticmethod
    def tombstone(namespace: str, type: str, id: str) -> Resource[EmptySpec]:
        """Metadata-only stand-in for a resource that does not exist (version ``undefined``)."""
        return Resource(Metadata(namespace=namespace, type=type, id=id), EmptySpec())

    def with_spec(self, spec: S) -> Resource[S]:
        return dataclasses.replace(self, spec=spec)

    def with_labels(self, labels: Mapping[str, str]) -> Resource[S]:
        return dataclasses.replace(self, metadata=dataclasses.replace(self.metadata, labels=dict(labels)))


@dataclasses.dataclass(frozen=True)
class ResourceType(Generic[S]):
    """A resource type, declared once: everything ``get`` and the runtime need to know about it.

    ``type`` is COSI's canonical name, ``<PluralCamelCase>.<suffix>`` (e.g.
    ``MachineStatuses.runtime.talos.dev``). Columns are evaluated over the spec's plain form.
    """

    type: str
    default_namespace: str
    spec_class: builtins.type[S]
    aliases: tuple[str, ...] = ()
    print_columns: tuple[PrintColumn, ...] = ()
    sensitive: bool = False
    display_type: str | None = None
    """Overrides the singular display name when the generic English rules get it wrong."""

    def __post_init__(self) -> None:
        validate_type_name(self.type)

    def new(
        self,
        id: str,
        spec: S,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Resource[S]:
        """A resource of this type, not yet stored (version ``undefined``)."""
        if not isinstance(spec, self.spec_class):
            raise TypeError(f"{self.type} needs a {self.spec_class.__name__} spec, got {type(spec).__name__}")
        if not id:
            raise ValueError(f"{self.type}: resource id must not be empty")
        meta = Metadata(
            namespace=namespace or self.default_namespace,
            type=self.type,
            id=id,
            labels=dict(labels or {}),
            annotations=dict(annotations or {}),
        )
        return Resource(meta, spec)


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, fractional seconds only when present (as Go prints times)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text + "Z"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _is_empty(value: Any) -> bool:
    if callable(getattr(value, "is_zero", None)):
        return bool(value.is_zero())  # a struct with Go's IsZero, omitted when zero
    return (
        value is None
        or value == ""
        or value == 0
        or value is False
        or (hasattr(value, "__len__") and len(value) == 0)
    )


_GO_URL_KEYS = ("scheme", "opaque", "user", "host", "path", "fragment", "rawquery", "rawpath",
                "rawfragment", "forcequery", "omithost")  # fmt: skip


def go_url_plain(text: str) -> dict[str, Any] | None:
    """A URL as Talos's YAML shows a Go ``*url.URL`` (its struct, keys lower-cased); ``None`` for ""."""
    if not text:
        return None
    parts = urllib.parse.urlsplit(text)
    return {
        "scheme": parts.scheme, "opaque": "", "user": None, "host": parts.netloc, "path": parts.path,
        "fragment": parts.fragment, "rawquery": parts.query, "rawpath": "", "rawfragment": "",
        "forcequery": False, "omithost": False,
    }  # fmt: skip


def go_url_text(plain: Mapping[str, Any]) -> str:
    """The text of a URL from :func:`go_url_plain`'s form."""
    text = f"{plain.get('scheme', '')}://{plain.get('host', '')}{plain.get('path', '')}"
    if plain.get("rawquery"):
        text += "?" + str(plain["rawquery"])
    if plain.get("fragment"):
        text += "#" + str(plain["fragment"])
    return text


def spec_to_plain(spec: Any) -> Any:
    """Plain data (dicts, lists, str, int, float, bool, None) with Talos's YAML key names.

    Dataclass fields are camelCased; ``field(metadata={"yaml": "nodeIP"})`` overrides a key and
    ``{"omitempty": True}`` drops empty values, like Go's ``yaml:"...,omitempty"``. ``bytes`` are
    Go ``[]byte``, which Talos's YAML writes as a sequence of numbers (the only form Go reads back
    into a ``[]byte``), as is a ``str`` field with ``{"binary": True}`` (text here, bytes in Talos);
    ``{"base64": True}`` makes bytes plain base64 instead (Go's PEM types marshal themselves so).
    ``{"zero": "netrom"}`` names an enum field's Go zero value, shown for "" (Go's YAML has no empty
    enum: ``LinkSpec``'s ``type`` of a physical link is ``netrom``, number 0).
    """
    if dataclasses.is_dataclass(spec) and not isinstance(spec, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(spec):
            if f.metadata.get("hidden"):
                continue  # carried along for machined (a parsed form), never shown
            value = getattr(spec, f.name)
            if f.metadata.get("omitempty") and _is_empty(value):
                continue
            if value == "" and "zero" in f.metadata:
                plain: Any = f.metadata["zero"]  # an enum's Go zero value, by its name
            elif f.metadata.get("base64") and isinstance(value, bytes):
                plain = base64.b64encode(value).decode("ascii")  # Go's PEM types do so
            elif f.metadata.get("binary") and isinstance(value, str):
                plain = list(value.encode())  # text held as Go []byte
            elif f.metadata.get("url") and isinstance(value, str):
                plain = go_url_plain(value)
            elif f.metadata.get("url") and isinstance(value, tuple | list):
                plain = [go_url_plain(v) for v in value]  # Go's []*url.URL
            else:
                plain = spec_to_plain(value)
            out[f.metadata.get("yaml", _camel(f.name))] = plain
        return out
    if hasattr(spec, "model_dump") and callable(spec.model_dump):
        return spec_to_plain(spec.model_dump(mode="json", by_alias=True))
    if isinstance(spec, enum.Enum):
        return spec_to_plain(spec.value)
    if isinstance(spec, bool | int | float | str) or spec is None:
        return spec
    if isinstance(spec, datetime):
        return format_time(spec)
    if isinstance(spec, timedelta):
        return goduration.format(spec)  # Go's Duration.String(), as Talos's YAML shows it
    if isinstance(spec, Mapping):
        return {str(k): spec_to_plain(v) for k, v in spec.items()}
    if isinstance(spec, list | tuple | set | frozenset):
        items = sorted(spec) if isinstance(spec, set | frozenset) else spec
        return [spec_to_plain(v) for v in items]
    if isinstance(spec, bytes):
        return list(spec)  # Go's YAML (Talos's yaml.v3) writes a []byte as a sequence of numbers
    if isinstance(
        spec, ipaddress.IPv4Address | ipaddress.IPv6Address | ipaddress.IPv4Network | ipaddress.IPv6Network
    ):
        return str(spec)
    raise TypeError(f"cannot render {type(spec).__name__} in a resource spec")


def spec_to_yaml(spec: Any) -> str:
    """The spec as COSI's ``yaml_spec``: never empty (an empty spec is ``{}``)."""
    return dump_document(from_plain(spec_to_plain(spec)))


def resource_to_plain(resource: Resource[Any]) -> dict[str, Any]:
    """``{metadata, spec}`` as ``talosctl get -o yaml``/``-o json`` show a resource."""
    meta = resource.metadata
    out_meta: dict[str, Any] = {
        "namespace": meta.namespace,
        "type": meta.type,
        "id": meta.id,
        "version": meta.version_string,
        "owner": meta.owner,
        "phase": str(meta.phase),
        "created": format_time(meta.created),
        "updated": format_time(meta.updated),
    }
    if meta.labels:
        out_meta["labels"] = dict(meta.labels)
    if meta.annotations:
        out_meta["annotations"] = dict(meta.annotations)
    if meta.finalizers:
        out_meta["finalizers"] = list(meta.finalizers)
    return {"metadata": out_meta, "spec": spec_to_plain(resource.spec)}
