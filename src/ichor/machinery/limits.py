"""How much input Ichor reads before it refuses: the one table of input limits.

Every YAML text Ichor reads (machine configs from ``talosctl validate``, ``machineconfig patch``,
``apply-config`` on a node, config patches, talosconfig, secrets bundles) goes through
:func:`ichor.machinery.yamlio.load_documents`, which enforces :data:`INPUT_LIMITS`. A text over a
limit is refused with :class:`~ichor.machinery.errors.InputLimitError` naming the limit, before
anything is expanded, so a 360-byte "billion laughs" alias bomb costs microseconds, not gigabytes.

Why these values (each far above any real machine config, far below what hurts a node):

=================== ========= =================================================================
limit               value     why
=================== ========= =================================================================
max_bytes           4 MiB     generated configs are ~20 KiB; the largest real ones carry
                              inline manifests (a CNI, Argo CD with its CRDs) of about 1 MiB.
                              4 MiB is grpc-go's default message size, so most Talos clients
                              could not send more anyway. ruamel reads ~1 MiB/s, so this also
                              caps the parse at a few seconds (off the node's event loop).
max_nodes           250,000   nodes after expanding every alias (mappings, sequences, keys and
                              scalars each count one). A generated config has ~300, one with
                              hundreds of interfaces and host entries ~20,000. Bounds the plain
                              copy and the typed model to tens of MB however aliases multiply.
max_aliases         10,000    alias references (``*name``). Real configs use none or a handful;
                              Go's yaml.v3, which Talos uses, also refuses excessive aliasing.
max_depth           64        nesting of mappings and sequences. The deepest Talos 1.7 paths are
                              ~10 levels (kubelet ``extraConfig`` adds a few); deeper input
                              would only exhaust Python's recursion limit in the parser.
=================== ========= =================================================================

This module is data only.
"""

from __future__ import annotations

__all__ = ["INPUT_LIMITS", "InputLimits"]

from dataclasses import dataclass


@dataclass(frozen=True)
class InputLimits:
    """Limits on one YAML input (all its documents together); see the module docstring."""

    max_bytes: int = 4 * 1024 * 1024
    """Size of the text in bytes (UTF-8)."""
    max_nodes: int = 250_000
    """Nodes after alias expansion (what a plain copy of the documents would hold)."""
    max_aliases: int = 10_000
    """Alias references (``*name``)."""
    max_depth: int = 64
    """Nesting of mappings and sequences."""

    def describe(self) -> str:
        """One line for docs and ``--help``: the limits as a user reads them."""
        return (
            f"{self.max_bytes // (1024 * 1024)} MiB, {self.max_nodes:,} nodes after alias expansion, "
            f"{self.max_aliases:,} alias references, nesting depth {self.max_depth}"
        )


INPUT_LIMITS = InputLimits()
"""The limits every YAML input is read with."""
