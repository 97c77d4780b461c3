"""``host:port`` as Go's net.SplitHostPort/JoinHostPort read and write it."""

from __future__ import annotations

import ipaddress

import pytest

from ichor.machinery.hostport import join_host_port, split_host_port


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.5.0.2:51820", ("10.5.0.2", 51820)),
        ("[fd00::3]:0", ("fd00::3", 0)),
        ("sink.lab:4002", ("sink.lab", 4002)),
    ],
)
def test_split(text: str, expected: tuple[str, int]) -> None:
    assert split_host_port(text) == expected


@pytest.mark.parametrize("text", ["10.5.0.2", ":4002", "host:", "host:port", "host:65536", "host:-1"])
def test_split_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not host:port"):
        split_host_port(text)


def test_join_brackets_ipv6_only() -> None:
    assert join_host_port(ipaddress.ip_address("fd00::3"), 51820) == "[fd00::3]:51820"
    assert join_host_port("10.5.0.2", 50000) == "10.5.0.2:50000"
    assert split_host_port(join_host_port("fd00::3", 1)) == ("fd00::3", 1)
