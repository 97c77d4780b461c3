"""machined's gRPC API: the services served on machined's unix socket (and, read-only, in maintenance).

Each service lives in a private module and is built over the node's state; errors become grpclib
``GRPCError`` s with Talos's codes and texts (see ``_errors``). Import services from their modules;
this package itself exports nothing, so importing one service never pulls in the others.
"""
