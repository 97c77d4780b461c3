"""Output shapes talosctl commands share: Go ``tabwriter`` tables and ``<node>: `` line prefixes.

Pure text in, text out: no printing, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def format_tabbed(text: str, *, padding: int = 3, minwidth: int = 0) -> str:
    """Align tab-separated ``text`` exactly as Go's ``tabwriter.NewWriter(w, minwidth, 0, padding, ' ', 0)``.

    A cell is text ended by a tab; the text after a line's last tab is not part of any column.
    Tab-terminated cells in adjacent lines form a column, as wide as its widest cell plus
    ``padding``; a line with fewer cells ends the column (so blocks align independently).
    """
    lines = [line.split("\t") for line in text.split("\n")]
    out: list[str] = []
    widths: list[int] = []

    def write(line0: int, line1: int) -> None:
        for i in range(line0, line1):
            cells = lines[i]
            parts = [cell.ljust(widths[j]) if j < len(widths) else cell for j, cell in enumerate(cells)]
            out.append("".join(parts))

    def block(line0: int, line1: int) -> None:
        column = len(widths)
        this = line0
        while this < line1:
            if column >= len(lines[this]) - 1:
                this += 1
                continue
            write(line0, this)
            line0 = this
            width = minwidth
            while this < line1 and column < len(lines[this]) - 1:
                width = max(width, len(lines[this][column]) + padding)
                this += 1
            widths.append(width)
            block(line0, this)
            widths.pop()
            line0 = this
        write(line0, line1)

    block(0, len(lines))
    return "\n".join(out)


def render_table(rows: Sequence[Sequence[str]], *, padding: int = 3) -> str:
    """Rows of cells (the first is usually the header) as talosctl prints tables, newline-terminated."""
    return format_tabbed("".join("\t".join(row) + "\n" for row in rows), padding=padding)


def prefix_lines(node: str, text: str) -> str:
    """Every line of ``text`` as ``<node>: <line>`` (talosctl's multi-node stream output)."""
    if not text:
        return ""
    ending = "\n" if text.endswith("\n") else ""
    body = text[:-1] if ending else text
    return "\n".join(f"{node}: {line}" for line in body.split("\n")) + ending


class NodeLineBuffer:
    """Reassembles streamed chunks into whole lines per node (``logs``): ``feed`` returns the lines
    completed so far as ``<node>: <line>``; ``flush`` returns what is left without a newline."""

    def __init__(self, *, prefix: bool = True) -> None:
        self._partial: dict[str, str] = {}
        self._prefix = prefix

    def _emit(self, node: str, line: str) -> str:
        return f"{node}: {line}" if self._prefix else line

    def feed(self, node: str, data: bytes | str) -> list[str]:
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
        pending = self._partial.pop(node, "") + text
        *complete, rest = pending.split("\n")
        if rest:
            self._partial[node] = rest
        return [self._emit(node, line) for line in complete]

    def flush(self) -> list[str]:
        left = [self._emit(node, rest) for node, rest in self._partial.items()]
        self._partial.clear()
        return left


def node_column(rows: Iterable[tuple[str, Sequence[str]]]) -> list[list[str]]:
    """``(node, cells)`` pairs -> rows with ``NODE`` as the first column, ready for :func:`render_table`."""
    return [[node, *cells] for node, cells in rows]
