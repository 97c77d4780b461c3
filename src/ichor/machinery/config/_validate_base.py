"""What every validation rule shares: the :class:`Mode`, the :class:`ValidationResult`, the report the
rules write errors and warnings into, and Go's parsing helpers (``net.ParseIP``, ``url.Parse``, ``%q``)
re-expressed so that messages match Talos's to the letter.

Nothing here knows a config field; the rules for each area live in the other ``_validate_*`` modules.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from ichor.machinery import goquote

from ._paths import PathElem, format_path


class Mode(StrEnum):
    """Where the machine runs; decides which rules apply (``talosctl validate --mode``)."""

    METAL = "metal"
    CLOUD = "cloud"
    CONTAINER = "container"

    @property
    def requires_install(self) -> bool:
        return self is Mode.METAL

    @property
    def in_container(self) -> bool:
        return self is Mode.CONTAINER


@dataclass
class ValidationResult:
    """Every error and warning found; ``ok`` when there are no errors."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


# --- Go helpers, re-expressed -------------------------------------------------------------------

_DNS_NAME = re.compile(r"^([a-zA-Z0-9_][a-zA-Z0-9_-]{0,62})(\.[a-zA-Z0-9_][a-zA-Z0-9_-]{0,62})*[._]?$")


def is_valid_dns_name(name: str) -> bool:
    if name == "" or len(name) - name.count(".") > 255:
        return False
    return _DNS_NAME.match(name) is not None


def _parse_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return "%" not in text


def _parse_cidr(text: str) -> bool:
    addr, sep, bits = text.partition("/")
    if not sep or not bits.isdigit() or not _parse_ip(addr):
        return False
    return int(bits) <= (32 if ":" not in addr else 128)


def _ip_or_cidr_error(text: str) -> str | None:
    if "/" in text:
        return None if _parse_cidr(text) else f"invalid CIDR address: {text}"
    return None if _parse_ip(text) else f"failed to parse IP address {_q(text)}"


def _subnet_or_address_ok(text: str) -> bool:
    return _parse_cidr(text) if "/" in text else _parse_ip(text)


def endpoint_uri_error(ep: str) -> str | None:
    """sideronet.ValidateEndpointURI: a URL with a host, bracketed IPv6 and a sane port."""
    try:
        parts = urllib.parse.urlsplit(ep)
    except ValueError as exc:
        return f"parse {_q(ep)}: {exc}"
    netloc = parts.netloc.rpartition("@")[2]
    if netloc.count(":") > 2 and ("[" not in netloc or "]" not in netloc):
        return "IPv6 addresses MUST be enclosed by square brackets"
    host, port = netloc, ""
    if netloc.startswith("["):
        host, _, rest = netloc.partition("]")
        host = host[1:]
        port = rest[1:] if rest.startswith(":") else ""
    elif ":" in netloc:
        host, _, port = netloc.rpartition(":")
    if host == "":
        return "hostname must not be blank"
    if port != "":
        if not port.isdigit():
            return f"parse {_q(ep)}: invalid port {_q(':' + port)} after host"
        if not 1 <= int(port) <= 65535:
            return "port number must be between 1 and 65535"
    return None


def _q(text: object) -> str:
    """Go's %q of ``text``'s string form, as Talos's validation messages print it."""
    return goquote.quote(str(text))


def _parse_request_uri_error(text: str) -> str | None:
    """net/url.ParseRequestURI's main refusals."""
    if text == "":
        return 'parse "": empty url'
    parts = urllib.parse.urlsplit(text)
    if not parts.scheme and not text.startswith("/"):
        return f"parse {_q(text)}: invalid URI for request"
    return None


def machine_type(value: str | None) -> str:
    """machine.ParseType: ``init``/``controlplane``/``worker`` (``join`` and ``""`` are worker)."""
    text = value or ""
    if text in ("init", "controlplane"):
        return text
    if text in ("worker", "join", ""):
        return "worker"
    return "unknown"


# --- the checker ---------------------------------------------------------------------------------


class _Report:
    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def _fmt(self, path: Sequence[PathElem], message: str) -> str:
        where = format_path(path) if path else ""
        text = f"{where}: {message}" if where else message
        return f"{self.prefix}: {text}" if self.prefix else text

    def error(self, path: Sequence[PathElem], message: str) -> None:
        self.errors.append(self._fmt(path, message))

    def warn(self, path: Sequence[PathElem], message: str) -> None:
        self.warnings.append(self._fmt(path, message))
