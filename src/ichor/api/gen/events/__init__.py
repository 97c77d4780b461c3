"""Generated protobuf and grpclib stubs of the Talos 1.7 API; do not edit."""
