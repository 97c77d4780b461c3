"""The machinery: everything Ichor knows without talking to a node.

It must not import from ``ichor.cli`` (or, later, the node agent or the API client): those build on
it, never the other way round. Public entry points live in the sub-modules; errors are in
:mod:`ichor.machinery.errors`.
"""

__all__ = ["TALOS_VERSION"]

TALOS_VERSION = "v1.7.6"
"""The Talos release whose behaviour and defaults Ichor reproduces (``ichor.machinery.constants``
re-exports it; it lives here so ``talosctl version --client`` needs no other module)."""
