"""A small Graphviz DOT writer, laid out as talosctl's graphs are.

Nodes are found by name and numbered ``n1, n2, ...`` in creation order; subgraphs share the counter
(``s<k>``, ``cluster_s<k>`` for a cluster). The text lists a graph's subgraphs, its own attributes,
its nodes sorted by name, then its edges grouped by their source's name (in the order they were
added), one statement per line indented by tabs; attributes are sorted by key. The layout is the
one of the Go library talosctl uses, so the output diffs cleanly against Talos's.

This module knows nothing of controllers or resources.
"""

from __future__ import annotations

__all__ = ["DotGraph", "DotNode"]

import dataclasses


@dataclasses.dataclass
class DotNode:
    name: str
    seq: int
    attrs: dict[str, str]


@dataclasses.dataclass
class _Edge:
    source: DotNode
    target: DotNode
    attrs: dict[str, str]


def _quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _attrs(attrs: dict[str, str], *, bracket: bool) -> str:
    if not attrs:
        return ""
    items = [f"{key}={_quote(attrs[key])}" for key in sorted(attrs)]
    return f"[{','.join(items)}]" if bracket else ";".join(items) + ";"


class DotGraph:
    """A directed graph (or one of its subgraphs); :meth:`render` the root to get the DOT text."""

    def __init__(self, *, parent: DotGraph | None = None, id: str = "", label: str = "") -> None:
        self._parent = parent
        self._id = id
        self._seq = 0
        self._attrs: dict[str, str] = {"label": label} if parent is not None else {}
        self._nodes: dict[str, DotNode] = {}
        self._subgraphs: dict[str, DotGraph] = {}
        self._edges: dict[str, list[_Edge]] = {}

    def _root(self) -> DotGraph:
        return self if self._parent is None else self._parent._root()

    def _next_seq(self) -> int:
        root = self._root()
        root._seq += 1
        return root._seq

    def _find(self, name: str) -> DotNode | None:
        found = self._nodes.get(name)
        if found is None and self._parent is not None:
            return self._parent._find(name)
        return found

    def node(self, name: str, **attrs: str) -> DotNode:
        """The node called ``name`` here or in a parent graph, created here (labelled ``name``) if
        there is none; ``attrs`` are added to it."""
        found = self._find(name)
        if found is None:
            found = DotNode(name, self._next_seq(), {"label": name})
            self._nodes[name] = found
        found.attrs.update(attrs)
        return found

    def subgraph(self, label: str, *, cluster: bool = False) -> DotGraph:
        """The subgraph labelled ``label``, created if absent; a cluster is drawn boxed."""
        found = self._subgraphs.get(label)
        if found is None:
            seq = self._next_seq()
            found = DotGraph(parent=self, id=f"cluster_s{seq}" if cluster else f"s{seq}", label=label)
            self._subgraphs[label] = found
        return found

    def edge(self, source: DotNode, target: DotNode, *labels: str, **attrs: str) -> None:
        """An edge of the root graph (several between the same nodes are allowed)."""
        if labels:
            attrs = {"label": ",".join(labels), **attrs}
        self._root()._edges.setdefault(source.name, []).append(_Edge(source, target, dict(attrs)))

    def render(self) -> str:
        out = _IndentWriter()
        self._write(out)
        return out.text()

    def _write(self, out: _IndentWriter) -> None:
        out.write(f"{'subgraph' if self._parent is not None else 'digraph'} {self._id} {{")
        out.indent()
        for label in sorted(self._subgraphs):
            self._subgraphs[label]._write(out)
        out.write(_attrs(self._attrs, bracket=False))
        out.newline()
        for name in sorted(self._nodes):
            node = self._nodes[name]
            out.write(f"n{node.seq}{_attrs(node.attrs, bracket=True)};")
            out.newline()
        for name in sorted(self._edges):
            for edge in self._edges[name]:
                out.write(f"n{edge.source.seq}->n{edge.target.seq}{_attrs(edge.attrs, bracket=True)};")
                out.newline()
        out.dedent()
        out.write("}")
        out.newline()


class _IndentWriter:
    """Every new line starts at the current depth of tabs; (de)indenting starts a new line."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._depth = 0

    def write(self, text: str) -> None:
        self._parts.append(text)

    def newline(self) -> None:
        self._parts.append("\n" + "\t" * self._depth)

    def indent(self) -> None:
        self._depth += 1
        self.newline()

    def dedent(self) -> None:
        self._depth -= 1
        self.newline()

    def text(self) -> str:
        return "".join(self._parts)
