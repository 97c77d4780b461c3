"""The methods apid proxies, read from the generated Talos API descriptors.

Talos's apid accepts any method (an unknown-service handler); grpclib needs a method table, so
apid serves every RPC of the services talosctl talks to through it. The cardinality comes from the
descriptors, so a proxied call has the same shape on both hops.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

from grpclib.const import Cardinality

from ichor.api.gen.cluster import cluster_pb2
from ichor.api.gen.inspectapi import inspect_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.api.gen.storage import storage_pb2
from ichor.api.gen.timeapi import time_pb2
from ichor.api.gen.v1alpha1 import state_pb2

_SERVICES: tuple[tuple[ModuleType, str], ...] = (
    (machine_pb2, "MachineService"),
    (cluster_pb2, "ClusterService"),
    (storage_pb2, "StorageService"),
    (time_pb2, "TimeService"),
    (inspect_pb2, "InspectService"),
    (state_pb2, "State"),
)

COSI_PREFIX = "/cosi."


@dataclass(frozen=True)
class Method:
    path: str
    cardinality: Cardinality

    @property
    def server_streaming(self) -> bool:
        return bool(self.cardinality.server_streaming)

    @property
    def is_cosi(self) -> bool:
        return self.path.startswith(COSI_PREFIX)


def _table() -> dict[str, Method]:
    table: dict[str, Method] = {}
    for module, name in _SERVICES:
        service = module.DESCRIPTOR.services_by_name[name]
        for method in service.methods:
            path = f"/{service.full_name}/{method.name}"
            cardinality = next(
                c
                for c in Cardinality
                if (c.client_streaming, c.server_streaming)
                == (method.client_streaming, method.server_streaming)
            )
            table[path] = Method(path, cardinality)
    return table


#: Full method path -> method, for every RPC apid forwards.
METHODS: Mapping[str, Method] = _table()


def is_streamed(path: str) -> bool:
    """Whether one-to-many proxying treats ``path`` as streaming (Talos: the server-streaming
    methods, plus any name ending in ``Stream``); everything else, EtcdRecover included, is unary."""
    method = METHODS.get(path)
    return (method is not None and method.server_streaming) or path.endswith("Stream")
