"""Resource specs rebuilt from their YAML: real samples of every type for the encoding tests.

``tests/data/cosi_samples.yaml`` is what a real process cluster's nodes served
(``scripts/capture_cosi_samples.py``); :func:`spec_from_plain` turns a sample's plain spec back
into the spec class of its type by the class's type hints, the inverse of ``spec_to_plain``.
"""

from __future__ import annotations

import base64
import collections.abc
import dataclasses
import enum
import ipaddress
import types
import typing
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ichor.machined.cosi import go_url_text
from ichor.machinery import goduration
from ichor.machinery.yamlio import load_documents, to_plain

SAMPLES = Path(__file__).parent / "data" / "cosi_samples.yaml"

_IP_TYPES = (
    ipaddress.IPv4Address,
    ipaddress.IPv6Address,
    ipaddress.IPv4Interface,
    ipaddress.IPv6Interface,
    ipaddress.IPv4Network,
    ipaddress.IPv6Network,
)


def load_samples() -> list[dict[str, Any]]:
    return [to_plain(doc) for doc in load_documents(SAMPLES.read_text(), source=str(SAMPLES))]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def spec_from_plain(tp: Any, value: Any) -> Any:
    """``value`` (a spec's plain form) as an instance of the type hint ``tp``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return spec_from_plain(arg, value)
            except (TypeError, ValueError) as exc:
                errors.append(exc)
        raise ValueError(f"{value!r} fits none of {tp}: {errors}")
    if origin is tuple:
        return tuple(spec_from_plain(args[0], v) for v in value or ())
    if origin is list:
        return [spec_from_plain(args[0], v) for v in value or ()]
    if origin in (dict, collections.abc.Mapping):
        return {k: spec_from_plain(args[1], v) for k, v in (value or {}).items()}
    if origin is not None:
        raise TypeError(f"no rule for {tp}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise TypeError(f"{tp.__name__} needs a mapping, got {value!r}")
        hints = typing.get_type_hints(tp)
        kwargs = {}
        known = set()
        for f in dataclasses.fields(tp):
            key = f.metadata.get("yaml", _camel(f.name))
            known.add(key)
            if f.metadata.get("hidden") or key not in value or not f.init:
                continue
            kwargs[f.name] = spec_from_plain(hints[f.name], value[key])
        unknown = set(value) - known
        if unknown:
            raise ValueError(f"{tp.__name__} has no keys {sorted(unknown)}")
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if tp is bytes:
        if isinstance(value, list):  # Go []byte in Talos's YAML
            return bytes(value)
        return value if isinstance(value, bytes) else base64.b64decode(value)
    if tp is timedelta:
        return goduration.parse(value)
    if tp is datetime:
        return datetime.fromisoformat(value)
    if tp in _IP_TYPES:
        return tp(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise TypeError(f"{value!r} is not a bool")
        return value
    if tp is str and isinstance(value, list):  # text Talos holds as Go []byte
        return bytes(value).decode()
    if tp is str and isinstance(value, dict):  # a URL as Talos's YAML shows a Go *url.URL
        return go_url_text(value)
    if tp is str and value is None:  # a nil *url.URL
        return ""
    if tp in (int, float, str):
        if isinstance(value, bool) or not isinstance(value, tp):
            raise TypeError(f"{value!r} is not a {tp.__name__}")
        return value
    if isinstance(tp, type) and issubclass(tp, collections.abc.Mapping):
        return tp(value)
    if hasattr(tp, "model_validate"):
        return tp.model_validate(value)
    raise TypeError(f"no rule for {tp}")
