"""Go durations: ``time.ParseDuration`` and ``time.Duration.String()`` for :class:`~datetime.timedelta`.

Talos's configs, flags and resource specs spell durations the Go way (``8760h``, ``1m30s``,
``500ms``). This is the one parser and the one formatter for them; callers that need other wording
(a CLI usage error, a config error) wrap :class:`~ichor.machinery.errors.DurationError` themselves.

Go counts durations in nanoseconds and a timedelta in microseconds: :func:`parse` computes the
nanoseconds exactly as Go does (including Go's float arithmetic for fractions and its range of
about 292 years) and only then rounds to the nearest microsecond.
"""

from __future__ import annotations

__all__ = ["format", "parse"]

import re
from datetime import timedelta

from ichor.machinery.errors import DurationError

_NS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 MICRO SIGN
    "μs": 1_000,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX_NS = (1 << 63) - 1  # Go's Duration is an int64 of nanoseconds
_HINT = "use a Go duration such as 30s, 1m30s, 500ms or 8760h (units: ns, us, ms, s, m, h)"
# [0-9] and not \d: Go takes ASCII digits only. A unit runs up to the next digit or dot.
_PART = re.compile(r"(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?(?P<unit>[^0-9.]*)")


def parse(text: str, *, what: str = "duration") -> timedelta:
    """``text`` in Go's ``time.ParseDuration`` grammar (``[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+`` or ``0``).

    Raises :class:`DurationError` naming ``what`` (the key or flag the text came from).
    """
    nanoseconds = _nanoseconds(text, what)
    whole, rest = divmod(abs(nanoseconds), 1_000)
    if rest > 500 or (rest == 500 and whole % 2):  # round half to even, as timedelta does
        whole += 1
    return timedelta(microseconds=-whole if nanoseconds < 0 else whole)


def _nanoseconds(text: str, what: str) -> int:
    def invalid(detail: str = "") -> DurationError:
        return DurationError(f"{what}: invalid duration {text!r}{detail}", hint=_HINT)

    negative = text.startswith("-")
    rest = text[1:] if text[:1] in ("-", "+") else text
    if rest == "0":
        return 0
    if not rest:
        raise invalid()
    total = 0
    while rest:
        part = _PART.match(rest)
        assert part is not None  # every group may be empty
        rest = rest[part.end() :]
        whole_digits, fraction_digits, unit = part.group("whole", "fraction", "unit")
        if not whole_digits and not fraction_digits:
            raise invalid()
        if not unit:
            raise invalid(": missing unit")
        if unit not in _NS_PER_UNIT:
            raise invalid(f": unknown unit {unit!r}")
        per_unit = _NS_PER_UNIT[unit]
        total += int(whole_digits or "0") * per_unit
        if fraction_digits:
            # Go keeps the fraction digits that fit an int64 and scales them as a float64.
            fraction, scale = 0, 1.0
            for digit in fraction_digits:
                if fraction * 10 + int(digit) > _MAX_NS:
                    break
                fraction, scale = fraction * 10 + int(digit), scale * 10
            total += int(float(fraction) * (float(per_unit) / scale))
        if total > _MAX_NS + (1 if negative else 0):  # -2^63 ns fits, +2^63 does not
            raise invalid(": out of range")
    return -total if negative else total


def format(value: timedelta) -> str:
    """``value`` as Go's ``time.Duration.String()`` prints it: ``1h0m0s``, ``1m30s``, ``1.5s``, ``500ms``."""
    nanoseconds = (value // timedelta(microseconds=1)) * 1_000
    sign = "-" if nanoseconds < 0 else ""
    magnitude = abs(nanoseconds)
    if magnitude == 0:
        return "0s"
    if magnitude < 1_000_000_000:
        if magnitude < 1_000:
            return f"{sign}{magnitude}ns"
        digits, unit = (3, "µs") if magnitude < 1_000_000 else (6, "ms")
        whole, fraction = _split(magnitude, digits)
        return f"{sign}{whole}{fraction}{unit}"
    seconds, fraction = _split(magnitude, 9)
    out = f"{seconds % 60}{fraction}s"
    minutes = seconds // 60
    if minutes:
        out = f"{minutes % 60}m{out}"
        if hours := minutes // 60:
            out = f"{hours}h{out}"
    return sign + out


def _split(value: int, digits: int) -> tuple[int, str]:
    """``value`` with its last ``digits`` digits as a decimal fraction: ``(1, ".5")`` for ``(1500, 3)``."""
    whole, fraction = divmod(value, 10**digits)
    text = f"{fraction:0{digits}d}".rstrip("0")
    return whole, f".{text}" if text else ""
