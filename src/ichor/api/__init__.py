"""The Talos 1.7 gRPC API as Ichor speaks it: wire-compatible with talosctl v1.7.x.

``protos/`` holds Ichor's own ``.proto`` sources, written from the field tables of the Talos 1.7.6
API spec (packages ``common``, ``machine``, ``cluster``, ``storage``, ``time``, ``securityapi``,
``inspect``, ``cosi.resource`` and ``cosi.resource.meta``). ``gen/`` holds the protobuf and grpclib
stubs generated from them by ``scripts/gen_protos.py``; import from there, e.g.
``from ichor.api.gen.machine import machine_grpc, machine_pb2``.

The runtime stack is grpclib + protobuf on the standard library's ``ssl`` (which accepts the
Ed25519 certificates Talos generates); ``google.rpc.Status`` comes from googleapis-common-protos.
This package must not import grpcio, and importing it must stay cheap: it loads no stubs itself.
"""
