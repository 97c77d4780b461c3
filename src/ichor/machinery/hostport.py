"""``host:port`` text, as Go's ``net.SplitHostPort`` / ``net.JoinHostPort`` read and write it: an IPv6
host in brackets (``[fd00::3]:51820``). Callers wrap the ``ValueError`` in their own error, naming
the key the text came from."""

from __future__ import annotations

import ipaddress

__all__ = ["join_host_port", "split_host_port"]


def split_host_port(text: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host without brackets, port 0-65535); ``ValueError`` when
    there is no host, no port, or a port that is not a number in range."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def join_host_port(host: str | ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> str:
    """``host:port``, an IPv6 address in brackets."""
    text = str(host)
    return f"[{text}]:{port}" if ":" in text else f"{text}:{port}"
