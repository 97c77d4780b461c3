"""Generated protobuf and grpclib stubs of the Talos 1.7 API; do not edit.

Produced by ``scripts/gen_protos.py`` from ``src/ichor/api/protos/`` (see its docstring to
regenerate). Import modules directly, e.g. ``from ichor.api.gen.machine import machine_pb2``.
"""
