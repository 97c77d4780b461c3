"""``cluster create`` merges the cluster's admin kubeconfig into ``~/.kube/config``, as Talos's does,
so the Quickstart's next line (``kubectl get nodes -o wide``) works; ``cluster destroy`` leaves it
there, as Talos's does, and says how to remove it.

Talos's ``mergeKubeconfig``: a missing file is written with the node's kubeconfig as it is; an
existing one is merged, entries that conflict renamed (``talos-default-1``) and the cluster's context
made current (:func:`ichor.machinery.kubeconfig.merge_kubeconfig`). Talos merges only after the health
waits passed (``--wait``), and never with ``--skip-kubeconfig``; the caller decides that.

Errors are :class:`~ichor.machinery.errors.MachineryError` naming the file; nothing is written until
the merge succeeded.
"""

from __future__ import annotations

from pathlib import Path

from ichor.machinery.errors import MachineryError
from ichor.machinery.files import write_atomic
from ichor.machinery.kubeconfig import MergeResult, merge_kubeconfig

__all__ = ["merge_into", "removal_hint"]


def merge_into(path: Path, data: bytes) -> MergeResult:
    """Merge the kubeconfig ``data`` into ``path`` (created, with its directory, when missing: mode
    0600); returns the merge (the context made current, the renames)."""
    if not path.exists():
        result = merge_kubeconfig("", data, source=str(path))
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(path, data, mode=0o600)
        return MergeResult(text=data.decode(), context=result.context, renamed=[])
    try:
        existing = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MachineryError(
            f"error loading existing kubeconfig {str(path)!r}: {exc}",
            hint="fix or move it away, then fetch the cluster's with `talosctl kubeconfig`",
        ) from None
    result = merge_kubeconfig(existing, data, source=str(path))
    write_atomic(path, result.text, mode=path.stat().st_mode & 0o777)
    return result


def removal_hint(path: str, context: str) -> str:
    """What destroy says about the context create merged (Talos's destroy leaves it too)."""
    return (
        f"left context {context!r} in {path}, as Talos's cluster destroy does; remove it with "
        f"`kubectl config delete-context {context}` (and its cluster and user with "
        "`kubectl config delete-cluster`/`delete-user`)"
    )
