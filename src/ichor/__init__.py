"""Ichor: Talos Linux, built in Python.

Package map (imports point one way: cli -> client -> api <- machined -> machinery):

- ``ichor.machinery``: the offline core shared by every other part: machine configuration,
  secrets and PKI, patches, config generation, client configuration (talosconfig).
- ``ichor.cli``: the ``talosctl`` command line; the only place that turns errors into exit codes.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
