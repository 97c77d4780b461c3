"""Endpoint strings as users type them -> ``host``/``port`` to dial (talosctl's normalisation)."""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

from ichor.client._errors import ClientError

APID_PORT = 50000


@dataclass(frozen=True)
class Endpoint:
    """One dial target; ``host`` is unbracketed (IPv6) and is what the server certificate must name."""

    host: str
    port: int
    raw: str

    @property
    def address(self) -> str:
        """``host:port``, IPv6 in brackets (also the HTTP/2 ``:authority``)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def is_ip(self) -> bool:
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            return False
        return True

    def __str__(self) -> str:
        return self.address


def _port(text: str, raw: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ClientError(
            f"invalid endpoint {raw!r}: port {text!r} is not a number between 1 and 65535",
            hint="write endpoints as <host>, <host>:<port> or https://<host>[:<port>]",
        )
    return int(text)


def _split(text: str, raw: str) -> tuple[str, int | None]:
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ClientError(f"invalid endpoint {raw!r}: unbalanced brackets")
        return host, _port(rest[1:], raw) if rest else None
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, _port(port, raw)
    return text, None  # a bare name, IPv4, or an unbracketed IPv6 address


def parse_endpoint(raw: str, *, default_port: int = APID_PORT) -> Endpoint:
    """Normalise like talosctl: no port -> ``:50000``; ``https://host`` -> ``host:443``;
    ``scheme://host:port`` -> ``host:port``."""
    text = raw.strip()
    if "://" in text:
        parts = urllib.parse.urlsplit(text)
        host, port = _split(parts.netloc.rpartition("@")[2], raw)
        if port is None and parts.scheme == "https":
            port = 443
    else:
        host, port = _split(text, raw)
    if not host:
        raise ClientError(
            f"invalid endpoint {raw!r}: no host",
            hint="write endpoints as <host>, <host>:<port> or https://<host>[:<port>]",
        )
    return Endpoint(host=host, port=default_port if port is None else port, raw=raw)


def parse_endpoints(raws: Iterable[str], *, default_port: int = APID_PORT) -> list[Endpoint]:
    """Every non-empty entry (comma lists are split), normalised, duplicates dropped, order kept."""
    out: dict[str, Endpoint] = {}
    for raw in raws:
        for part in raw.split(","):
            if part.strip():
                ep = parse_endpoint(part, default_port=default_port)
                out.setdefault(ep.address, ep)
    return list(out.values())
