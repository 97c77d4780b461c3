"""``machine.kubelet.credentialProviderConfig`` as the kubelet reads it, rendered as Talos 1.7 does. Pure.

Talos 1.7 passes the mapping through the kubelet's typed ``CredentialProviderConfig``
(``kubelet.config.k8s.io/v1beta1``) and writes what comes out to
``/etc/kubernetes/kubelet-credentialproviderconfig.yaml`` (mode 0600), then runs the kubelet with
``--image-credential-provider-config`` naming that file and ``--image-credential-provider-bin-dir
/usr/local/lib/kubelet/credentialproviders`` (where system extensions put provider binaries).
Going through the type does three things this module does too:

* fields the type does not have are dropped; ``providers``, a provider's ``matchImages``,
  ``apiVersion``, ``name`` and ``defaultCacheDuration`` are always written (``null`` / ``""`` when
  absent), ``args`` and ``env`` only when set;
* ``defaultCacheDuration`` is a Go duration, written back in Go's form (``12h`` -> ``12h0m0s``);
* a value of the wrong type is refused (:class:`~ichor.machinery.errors.ConfigError` naming the
  key under ``machine.kubelet.credentialProviderConfig``), where Talos fails writing the file.

Keys come out sorted, in the YAML style of the Kubernetes serializer (two-space indent, sequences
not indented under their key). Whether the providers make sense is the kubelet's to say: it refuses
to start on a config it rejects, or a provider binary missing from the bin dir.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from ruamel.yaml import YAML

from ichor.machinery.errors import ConfigError

__all__ = [
    "BIN_DIR",
    "CONFIG_FILE",
    "CONFIG_KEY",
    "credential_provider_args",
    "format_go_duration",
    "parse_go_duration",
    "render_credential_provider_config",
    "typed_credential_provider_config",
]

CONFIG_FILE = "/etc/kubernetes/kubelet-credentialproviderconfig.yaml"
BIN_DIR = "/usr/local/lib/kubelet/credentialproviders"
CONFIG_KEY = "machine.kubelet.credentialProviderConfig"

_UNITS = {
    "ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9,
    "h": 3600 * 10**9,
}  # fmt: skip
_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")
_MAX = (1 << 63) - 1


def parse_go_duration(text: str) -> int:
    """Nanoseconds of a Go duration (``time.ParseDuration``: ``1h30m``, ``1.5s``, ``-2m``, ``0``)."""
    rest = text
    sign = -1 if rest[:1] == "-" else 1
    rest = rest[1:] if rest[:1] in "+-" else rest
    if rest == "0":
        return 0
    if not rest:
        raise ValueError(f'time: invalid duration "{text}"')
    total = Fraction(0)
    while rest:
        match = _PART.match(rest)
        assert match is not None  # every group may be empty
        whole, fraction, unit = match.groups()
        if not whole and not fraction:
            raise ValueError(f'time: invalid duration "{text}"')
        if not unit:
            raise ValueError(f'time: missing unit in duration "{text}"')
        if unit not in _UNITS:  # a unit ends where the next number starts ("1h30m")
            raise ValueError(f'time: unknown unit "{unit}" in duration "{text}"')
        value = Fraction(int(whole or "0")) + (
            Fraction(int(fraction), 10 ** len(fraction)) if fraction else 0
        )
        total += value * _UNITS[unit]
        rest = rest[match.end() :]
    nanoseconds = int(total)  # Go truncates the fraction of a nanosecond
    if nanoseconds > _MAX:
        raise ValueError(f'time: invalid duration "{text}"')
    return sign * nanoseconds


def _fraction(value: int, digits: int) -> str:
    """``value`` / 10**digits as Go prints it: the integer, then ``.`` and digits without trailing 0s."""
    whole, part = divmod(value, 10**digits)
    decimals = str(part).rjust(digits, "0").rstrip("0")
    return f"{whole}.{decimals}" if decimals else str(whole)


def format_go_duration(nanoseconds: int) -> str:
    """Go's ``time.Duration.String()``: ``0s``, ``1.5µs``, ``300ms``, ``1m30s``, ``12h0m0s``."""
    sign = "-" if nanoseconds < 0 else ""
    value = abs(nanoseconds)
    if value == 0:
        return "0s"
    if value < 10**3:
        return f"{sign}{value}ns"
    if value < 10**6:
        return f"{sign}{_fraction(value, 3)}µs"
    if value < 10**9:
        return f"{sign}{_fraction(value, 6)}ms"
    seconds, part = divmod(value, 10**9)
    text = f"{_fraction((seconds % 60) * 10**9 + part, 9)}s"
    minutes = seconds // 60
    if minutes:
        text = f"{minutes % 60}m{text}"
        if minutes // 60:
            text = f"{minutes // 60}h{text}"
    return sign + text


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _string(value: Any, key: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(
            f"{key}: expected a string, got {_kind(value)} {value!r}", hint=f"give {key} as a string"
        )
    return value


def _strings(value: Any, key: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise ConfigError(
            f"{key}: expected a list of strings, got {_kind(value)} {value!r}",
            hint=f"give {key} as a list of strings",
        )
    return [_string(item, f"{key}[{index}]") for index, item in enumerate(value)]


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{key}: expected a mapping, got {_kind(value)} {value!r}", hint=f"give {key} as a mapping"
        )
    return value


def _duration(value: Any, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(
            f"{key}: expected a duration string, got {_kind(value)} {value!r}",
            hint=f'give {key} as a Go duration such as "12h" or "30m"',
        )
    try:
        return format_go_duration(parse_go_duration(value))
    except ValueError as err:
        raise ConfigError(
            f"{key}: {err}", hint=f'give {key} as a Go duration such as "12h" or "30m"'
        ) from None


def _provider(value: Any, key: str) -> dict[str, Any]:
    provider = _mapping(value, key)
    out: dict[str, Any] = {
        "apiVersion": _string(provider.get("apiVersion"), f"{key}.apiVersion"),
        "defaultCacheDuration": _duration(
            provider.get("defaultCacheDuration"), f"{key}.defaultCacheDuration"
        ),
        "matchImages": _strings(provider.get("matchImages"), f"{key}.matchImages"),
        "name": _string(provider.get("name"), f"{key}.name"),
    }
    args = _strings(provider.get("args"), f"{key}.args")
    if args:
        out["args"] = args
    env = provider.get("env")
    if env is not None and not isinstance(env, list):
        raise ConfigError(
            f"{key}.env: expected a list of name/value pairs, got {_kind(env)} {env!r}",
            hint=f"give {key}.env as a list of {{name, value}}",
        )
    entries = [_mapping(item, f"{key}.env[{i}]") for i, item in enumerate(env or [])]
    if entries:
        out["env"] = [
            {"name": _string(e.get("name"), f"{key}.env[{i}].name"),
             "value": _string(e.get("value"), f"{key}.env[{i}].value")}
            for i, e in enumerate(entries)
        ]  # fmt: skip
    return dict(sorted(out.items()))


def typed_credential_provider_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` as it comes out of the kubelet's typed ``CredentialProviderConfig`` (see the module
    doc), keys sorted; raises ConfigError naming the key whose value has the wrong type."""
    out: dict[str, Any] = {}
    for field in ("apiVersion", "kind"):
        value = _string(config.get(field), f"{CONFIG_KEY}.{field}")
        if value:
            out[field] = value
    providers = config.get("providers")
    if providers is not None and not isinstance(providers, list):
        raise ConfigError(
            f"{CONFIG_KEY}.providers: expected a list, got {_kind(providers)} {providers!r}",
            hint=f"give {CONFIG_KEY}.providers as a list of providers",
        )
    out["providers"] = (
        None
        if providers is None
        else [_provider(p, f"{CONFIG_KEY}.providers[{i}]") for i, p in enumerate(providers)]
    )
    return out


def _null(representer: Any, _data: None) -> Any:
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def render_credential_provider_config(config: Mapping[str, Any]) -> str:
    """The file's text: :func:`typed_credential_provider_config` in the Kubernetes serializer's YAML."""
    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=2, offset=0)
    yaml.width = 1 << 20
    yaml.representer.add_representer(type(None), _null)
    buf = io.StringIO()
    yaml.dump(typed_credential_provider_config(config), buf)
    return buf.getvalue()


def credential_provider_args(config: Mapping[str, Any]) -> dict[str, str]:
    """The kubelet flags Talos adds when a credential provider config is set (over ``extraArgs``)."""
    if not config:
        return {}
    return {"image-credential-provider-bin-dir": BIN_DIR, "image-credential-provider-config": CONFIG_FILE}
