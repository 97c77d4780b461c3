"""Go's strconv.Quote: the outputs of Go's own quote tests (strconv/quote_test.go)."""

from __future__ import annotations

import os

import pytest

from ichor.machinery.goquote import quote


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\a\b\f\r\n\t\v", r'"\a\b\f\r\n\t\v"'),
        ("\\", r'"\\"'),
        ('say "hi"', r'"say \"hi\""'),
        ("\u263a", '"☺"'),
        ("\U0010ffff", r'"\U0010ffff"'),
        ("\x04", r'"\x04"'),
        ("\x7f", r'"\x7f"'),
        ("\x01é", '"\\x01é"'),
        ("!\u00a0!\u2000!\u3000!", r'"!\u00a0!\u2000!\u3000!"'),  # only the ASCII space is printable
        ("\u0085", r'"\u0085"'),  # a C1 control is \u, not \x
        ("\ufeff", r'"\ufeff"'),
        ("日本語 /var/lib/etcd", '"日本語 /var/lib/etcd"'),
        ("", '""'),
    ],
)
def test_quote_like_go(text: str, expected: str) -> None:
    assert quote(text) == expected


def test_bytes_that_are_not_utf8_print_as_hex_like_go() -> None:
    # Go: strconv.Quote("abc\xffdef") == `"abc\xffdef"`; Python sees such a path through surrogateescape
    assert quote(os.fsdecode(b"abc\xffdef")) == r'"abc\xffdef"'


def test_runner_argument_escapes() -> None:
    # moved from test_services_api with the function (was machined.services._runners.go_quote)
    assert quote('say "hi"\\\n\t') == '"say \\"hi\\"\\\\\\n\\t"'
    assert quote("\x01é") == '"\\x01é"'
