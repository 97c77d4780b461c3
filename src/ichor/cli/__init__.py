"""The ``talosctl`` command line.

This is the only package that turns exceptions into exit codes and messages. Commands are
imported lazily (see :mod:`ichor.cli._lazy`) so ``talosctl --help`` stays fast.
"""

from ichor.cli._root import main

__all__ = ["main"]
