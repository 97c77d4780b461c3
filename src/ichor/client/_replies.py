"""One-to-many replies: which node each message came from, and in-band per-node errors.

With ``nodes`` metadata apid answers one ``XxxResponse`` whose ``messages`` hold one element per
node, tagged with ``metadata.hostname``; a node that failed contributes an element carrying only
``metadata.error``/``metadata.status``, and the call as a whole succeeds. These helpers split such a
reply into good messages and :class:`NodeError` s the command prints, as talosctl does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ichor.client._errors import AllNodesFailedError, code_name, rpc_error_text

M = TypeVar("M")

_PERMISSION_DENIED = 7


@dataclass(frozen=True)
class NodeError:
    """A node's in-band failure. ``str()`` is talosctl's ``<node>: rpc error: code = ... desc = ...``."""

    node: str
    error: str
    """The error text: from ``metadata.status`` when present, else ``metadata.error`` verbatim."""
    code: int | None = None
    """The gRPC status code when the node sent one."""

    @property
    def code_name(self) -> str | None:
        return code_name(self.code) if self.code is not None else None

    def __str__(self) -> str:
        return f"{self.node}: {self.error}" if self.node else self.error


def format_errors(errors: Sequence[object]) -> str:
    """A list of errors the way talosctl prints a multierror (``N errors occurred:`` + tab-star lines)."""
    if len(errors) == 1:
        return f"1 error occurred:\n\t* {errors[0]}\n\n"
    points = "\n\t".join(f"* {e}" for e in errors)
    return f"{len(errors)} errors occurred:\n\t{points}\n\n"


def message_node(message: Any, fallback: str = "") -> str:
    """The node a message came from: ``metadata.hostname``, else ``fallback`` (the peer, for one-to-one)."""
    metadata = getattr(message, "metadata", None)
    hostname = metadata.hostname if metadata is not None else ""
    return hostname or fallback


def message_error(message: Any, fallback_node: str = "") -> NodeError | None:
    """The in-band error a (unary element or streamed) message carries, if any."""
    if not message.HasField("metadata") or not message.metadata.error:
        return None
    md = message.metadata
    node = md.hostname or fallback_node
    if md.HasField("status"):
        return NodeError(node, rpc_error_text(md.status.code, md.status.message), md.status.code)
    return NodeError(node, md.error)


@dataclass
class NodeReplies(Generic[M]):
    """The good ``(node, message)`` pairs of a one-to-many reply and the per-node errors."""

    replies: list[tuple[str, M]] = field(default_factory=list)
    errors: list[NodeError] = field(default_factory=list)

    def __iter__(self) -> Iterator[tuple[str, M]]:
        return iter(self.replies)

    def __len__(self) -> int:
        return len(self.replies)

    @property
    def messages(self) -> list[M]:
        return [m for _, m in self.replies]

    def warning(self) -> str | None:
        """The per-node errors as talosctl prints them after the good results; None when all succeeded."""
        return format_errors(self.errors).rstrip("\n") if self.errors else None

    def check(self, what: str = "") -> NodeReplies[M]:
        """Raise :class:`AllNodesFailedError` when there were errors and no node succeeded (talosctl then
        fails the command); otherwise return self."""
        if self.errors and not self.replies:
            text = format_errors(self.errors).rstrip("\n")
            raise AllNodesFailedError(
                f"{what}: {text}" if what else text, self.errors, hint=errors_hint(self.errors)
            )
        return self


def errors_hint(errors: Sequence[object]) -> str | None:
    """What to do about per-node errors, where their codes say it; None when they do not."""
    if any(getattr(e, "code", None) == _PERMISSION_DENIED for e in errors):
        return (
            "the client certificate's roles do not allow this call; use a talosconfig with a role that does"
        )
    return None


def node_replies(response: Any, *, fallback_node: str = "") -> NodeReplies[Any]:
    """Split ``response.messages`` into ``(node, message)`` pairs and :class:`NodeError` s.

    ``fallback_node`` names messages without ``metadata.hostname`` (one-to-one or maintenance-mode
    replies): pass ``client.peer_host``, as talosctl prints the peer address then.
    """
    out: NodeReplies[Any] = NodeReplies()
    for message in response.messages:
        error = message_error(message, fallback_node)
        if error is not None:
            out.errors.append(error)
        else:
            out.replies.append((message_node(message, fallback_node), message))
    return out
