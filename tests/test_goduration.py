"""Go durations: the examples of Go's own time package tests, and format/parse round trips."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ichor.machinery import goduration
from ichor.machinery.errors import DurationError

US = timedelta(microseconds=1)
MS = timedelta(milliseconds=1)
S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)
GO_MAX_US = ((1 << 63) - 1) // 1000  # the largest whole number of microseconds in a Go Duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Go's parseDurationTests (time_test.go), rounded to timedelta's microseconds
        ("0", timedelta(0)),
        ("5s", 5 * S),
        ("30s", 30 * S),
        ("1478s", 1478 * S),
        ("-5s", -5 * S),
        ("+5s", 5 * S),
        ("-0", timedelta(0)),
        ("+0", timedelta(0)),
        ("5.0s", 5 * S),
        ("5.6s", 5 * S + 600 * MS),
        ("5.s", 5 * S),
        (".5s", 500 * MS),
        ("1.0s", S),
        ("1.00s", S),
        ("1.004s", S + 4 * MS),
        ("1.0040s", S + 4 * MS),
        ("100.00100s", 100 * S + MS),
        ("11us", 11 * US),
        ("12µs", 12 * US),
        ("12μs", 12 * US),
        ("13ms", 13 * MS),
        ("15m", 15 * M),
        ("16h", 16 * H),
        ("3h30m", 3 * H + 30 * M),
        ("10.5s4m", 4 * M + 10 * S + 500 * MS),
        ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
        ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US),
        ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
        ("52763797000ns", 52763797 * US),
        ("0.3333333333333333333h", 20 * M),
        ("9223372036854775807ns", GO_MAX_US * US + US),  # 2^63-1 ns, rounded up
        ("9223372036s854ms775us807ns", GO_MAX_US * US + US),
        ("9223372036854775.807us", GO_MAX_US * US + US),
        ("-9223372036854775808ns", -(GO_MAX_US * US + US)),
        ("-2562047h47m16.854775808s", -(2562047 * H + 47 * M + 16 * S + 854776 * US)),
        ("0.100000000000000000000h", 6 * M),
        ("0.830103483285477580700h", 49 * M + 48 * S + 372540 * US),  # Go: 49m48.372539827s
        ("1500ns", 2 * US),  # half a microsecond rounds to even
        ("2500ns", 2 * US),
        # examples from Ichor's callers
        ("8760h", 8760 * H),
        ("1h30m", 90 * M),
        ("500ms", 500 * MS),
        ("1.5h", 90 * M),
    ],
)
def test_parse_go_examples(text: str, expected: timedelta) -> None:
    assert goduration.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        # Go's invalid examples, and the ones Ichor's kubeconfig tests used
        ("", ""),
        ("3", "missing unit"),
        ("-", ""),
        ("s", ""),
        (".", ""),
        ("-.", ""),
        (".s", ""),
        ("+.s", ""),
        ("1d", "unknown unit 'd'"),
        ("1y", "unknown unit 'y'"),
        ("h", ""),
        ("10 m", "unknown unit ' m'"),
        ("1h-1m", "unknown unit 'h-'"),
        ("00", "missing unit"),
        ("1s0", "missing unit"),
        ("9223372036854775808ns", "out of range"),
        ("9223372036854775.808us", ""),
        ("-9223372036854775809ns", "out of range"),
        ("3000000h", "out of range"),
        ("١s", ""),  # Go takes ASCII digits only
    ],
)
def test_parse_refuses_what_go_refuses(text: str, detail: str) -> None:
    with pytest.raises(DurationError, match="invalid duration") as info:
        goduration.parse(text, what="cluster.adminKubeconfig.certLifetime")
    assert str(info.value).startswith(f"cluster.adminKubeconfig.certLifetime: invalid duration {text!r}")
    assert detail in str(info.value)
    assert info.value.hint is not None and "1m30s" in info.value.hint


@pytest.mark.parametrize(
    ("value", "text"),
    [
        # Go's durationTests (time_test.go) that a timedelta can hold
        (timedelta(0), "0s"),
        (US, "1µs"),
        (1100 * US, "1.1ms"),
        (2200 * MS, "2.2s"),
        (3300 * MS, "3.3s"),
        (4 * M + 5 * S, "4m5s"),
        (4 * M + 5 * S + MS, "4m5.001s"),
        (5 * H + 6 * M + 7 * S + MS, "5h6m7.001s"),
        (8 * M + US, "8m0.000001s"),
        (GO_MAX_US * US, "2562047h47m16.854775s"),
        (-GO_MAX_US * US, "-2562047h47m16.854775s"),
        # what Talos prints for its defaults and messages
        (H, "1h0m0s"),
        (M, "1m0s"),
        (90 * S, "1m30s"),
        (500 * MS, "500ms"),
        (1500 * MS, "1.5s"),
        (-1500 * MS, "-1.5s"),
        (1500 * US, "1.5ms"),
        (8760 * H, "8760h0m0s"),
    ],
)
def test_format_like_go(value: timedelta, text: str) -> None:
    assert goduration.format(value) == text


@given(st.integers(min_value=-GO_MAX_US, max_value=GO_MAX_US))
def test_format_then_parse_round_trips(microseconds: int) -> None:
    value = timedelta(microseconds=microseconds)
    assert goduration.parse(goduration.format(value)) == value
