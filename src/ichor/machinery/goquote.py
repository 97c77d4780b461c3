"""Go's ``strconv.Quote`` (what ``fmt``'s ``%q`` prints for a string), for messages Talos words that way.

Talos prints runner arguments, snapshot paths and many validation errors with ``%q``; Ichor's copies
of those messages must quote the same way, so a user (or a script) sees Talos's exact text. This is
not YAML or JSON quoting: ``\\x01`` where JSON writes ``\\u0001``, and printable non-ASCII kept as is.
"""

from __future__ import annotations

__all__ = ["quote"]

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def quote(text: str) -> str:
    """``text`` in double quotes, escaped as Go's ``strconv.Quote`` escapes it.

    Printable characters (Go's ``unicode.IsPrint``: letters, marks, numbers, punctuation, symbols
    and the ASCII space, which is what :meth:`str.isprintable` tests) stay as they are. A lone
    surrogate stands for bytes that were not UTF-8 (``os.fsdecode``'s ``surrogateescape``): Go sees
    those bytes and prints each as ``\\xNN``.
    """
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            raw = (
                bytes([code - 0xDC00]) if 0xDC80 <= code <= 0xDCFF else char.encode("utf-8", "surrogatepass")
            )
            out.extend(f"\\x{byte:02x}" for byte in raw)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)
