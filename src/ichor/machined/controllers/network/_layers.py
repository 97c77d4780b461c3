"""Layered specs: ``*Config`` controllers write one layer each, merge controllers pick the winner.

A layered spec lives in namespace ``network-config`` with id ``<layer>/<id>`` (an operator's, as in
Talos, ``<operator>/<link>/<id>``: ``dhcp4/eth0/eth0/10.5.0.2/24``); the merged one in ``network``
with id ``<id>``. Both controllers write the same type (so both declare it shared),
each in its own namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from ichor.machined.cosi import ControllerContext, Input, OutputKind, ResourceType, TransformController
from ichor.machined.resources import NETWORK_CONFIG_NAMESPACE, ConfigLayer, layered_id

__all__ = ["config_controller", "layered", "merge_controller", "merged_id"]


class _Layered(Protocol):
    @property
    def layer(self) -> ConfigLayer: ...


S = TypeVar("S", bound=_Layered)


def layered(specs: Iterable[tuple[str, S]]) -> dict[str, S]:
    """``(id, spec)`` pairs -> ``{<layer>/<id>: spec}``, each spec at the layer it names."""
    return {layered_id(spec.layer, id): spec for id, spec in specs}


def merged_id(id: str) -> str:
    """``configuration/eth0`` -> ``eth0``; an operator's ``dhcp4/eth0/eth0/10.5.0.2/24`` -> ``eth0/10.5.0.2/24``."""
    head, _, rest = id.partition("/")
    return rest if head in ConfigLayer._value2member_map_ else rest.partition("/")[2]


def config_controller(
    name: str,
    output: ResourceType[S],
    inputs: list[Input],
    derive: Callable[[ControllerContext], Iterable[tuple[str, S]]],
) -> TransformController[S]:
    """A controller writing ``derive``'s ``(id, spec)`` pairs into ``network-config`` as ``<layer>/<id>``."""
    return TransformController(
        name, inputs=inputs, output=output, map_inputs=lambda ctx: layered(derive(ctx)),
        output_namespace=NETWORK_CONFIG_NAMESPACE, output_kind=OutputKind.SHARED,
    )  # fmt: skip


def merge_controller(
    name: str, type: ResourceType[S], combine: Callable[[S, S], S] | None = None
) -> TransformController[S]:
    """Per id, the spec of the highest layer wins; ``combine(lower, higher)`` merges instead."""

    def derive(ctx: ControllerContext) -> dict[str, S]:
        by_id: dict[str, list[S]] = {}
        for resource in ctx.list(type, namespace=NETWORK_CONFIG_NAMESPACE):
            by_id.setdefault(merged_id(resource.id), []).append(resource.spec)
        merged: dict[str, S] = {}
        for id, specs in by_id.items():
            specs.sort(key=lambda spec: spec.layer.rank)
            result = specs[0]
            for spec in specs[1:]:
                result = combine(result, spec) if combine is not None else spec
            merged[id] = result
        return merged

    inputs: list[Input] = [Input(type, namespace=NETWORK_CONFIG_NAMESPACE)]
    return TransformController(
        name, inputs=inputs, output=type, map_inputs=derive, output_kind=OutputKind.SHARED
    )
