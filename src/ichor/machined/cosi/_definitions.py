"""Resource definitions: how ``talosctl get <alias>`` finds a type and renders it.

Every registered :class:`ResourceType` yields a ``ResourceDefinitions.meta.cosi.dev`` resource in
namespace ``meta`` (id = lower-cased type), with aliases derived by COSI's rules:

* ``displayType`` is the singular of the type's first name part;
* ``aliases`` = explicit aliases + lower(displayType) + (for names with >= 2 capitals) lower(capitals)
  and, unless the capitals end in ``S``, lower(capitals) + ``s``;
* ``allAliases`` = lower(name) + lower(name).<each proper prefix of the suffix> + aliases.

Lookup is case-insensitive against the id and ``allAliases``; no match and several matches are
errors with COSI's wording. A canonical type name finds its definition by id, in a :class:`Registry`
(:meth:`Registry.get`) or, as the COSI API does before a read, among the definitions published in a
state (:func:`published_definition`). Namespaces are resources too (``Namespaces.meta.cosi.dev``).

This module describes types; it must not store resources other than through a :class:`State`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ichor.machined.cosi._errors import (
    AmbiguousTypeError,
    NotFoundError,
    RegistrationError,
    UnknownTypeError,
)
from ichor.machined.cosi._naming import singular, split_type_name
from ichor.machined.cosi._resource import PrintColumn, Resource, ResourceType, spec_to_plain
from ichor.machinery.jsonpath import render_jsonpath

if TYPE_CHECKING:
    from ichor.machined.cosi._state import State

__all__ = [
    "META_NAMESPACE",
    "NAMESPACES",
    "RESOURCE_DEFINITIONS",
    "NamespaceSpec",
    "Registry",
    "ResourceDefinition",
    "ResourceDefinitionSpec",
    "published_definition",
]

META_NAMESPACE = "meta"


@dataclasses.dataclass(frozen=True)
class ResourceDefinitionSpec:
    type: str
    display_type: str
    default_namespace: str
    aliases: tuple[str, ...]
    all_aliases: tuple[str, ...]
    print_columns: tuple[PrintColumn, ...]
    sensitivity: str = dataclasses.field(default="", metadata={"omitempty": True})
    declared_aliases: tuple[str, ...] = dataclasses.field(default=(), metadata={"hidden": True})
    """The aliases the type declares (not derived): they win over a derived alias that collides
    (``ns`` is Namespaces', not the capitals of NetworkStatuses)."""

    @property
    def id(self) -> str:
        return _definition_id(self.type)

    @property
    def sensitive(self) -> bool:
        """Readable only with ``os:admin`` (secrets and the like)."""
        return self.sensitivity == "sensitive"

    @classmethod
    def fill(cls, rtype: ResourceType[Any]) -> ResourceDefinitionSpec:
        name, suffix = split_type_name(rtype.type)
        display = rtype.display_type or singular(name) or name
        aliases = [*rtype.aliases, display.lower()]
        capitals = "".join(ch for ch in name if ch.isupper())
        if len(capitals) > 1:
            aliases.append(capitals.lower())
            if not capitals.endswith("S"):
                aliases.append(capitals.lower() + "s")
        parts = suffix.split(".")
        all_aliases = [name.lower()]
        all_aliases += [".".join([name.lower(), *parts[:i]]) for i in range(1, len(parts))]
        all_aliases += aliases
        return cls(
            type=rtype.type,
            display_type=display,
            default_namespace=rtype.default_namespace,
            aliases=tuple(aliases),
            all_aliases=tuple(all_aliases),
            print_columns=rtype.print_columns,
            sensitivity="sensitive" if rtype.sensitive else "",
            declared_aliases=tuple(a.lower() for a in rtype.aliases),
        )


@dataclasses.dataclass(frozen=True)
class NamespaceSpec:
    description: str = ""


RESOURCE_DEFINITIONS: ResourceType[ResourceDefinitionSpec] = ResourceType(
    type="ResourceDefinitions.meta.cosi.dev",
    default_namespace=META_NAMESPACE,
    spec_class=ResourceDefinitionSpec,
    aliases=("api-resources",),
    print_columns=(PrintColumn("Aliases", "{.aliases[:]}"),),
)

NAMESPACES: ResourceType[NamespaceSpec] = ResourceType(
    type="Namespaces.meta.cosi.dev",
    default_namespace=META_NAMESPACE,
    spec_class=NamespaceSpec,
    aliases=("ns",),
)


@dataclasses.dataclass(frozen=True)
class ResourceDefinition:
    """A registered type together with its filled-in definition spec."""

    resource_type: ResourceType[Any]
    spec: ResourceDefinitionSpec

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def sensitive(self) -> bool:
        return self.spec.sensitive

    def matches(self, name: str) -> bool:
        wanted = name.lower()
        return wanted == self.id or wanted in (a.lower() for a in self.spec.all_aliases)

    def column_names(self) -> list[str]:
        return [col.name for col in self.spec.print_columns]

    def render_columns(self, resource: Resource[Any]) -> list[str]:
        """The extra table cells for ``resource``, one per print column."""
        data = spec_to_plain(resource.spec)
        return [render_jsonpath(col.json_path, data) for col in self.spec.print_columns]

    def to_resource(self) -> Resource[ResourceDefinitionSpec]:
        return RESOURCE_DEFINITIONS.new(self.id, self.spec)


class Registry:
    """The resource types a node knows; the source of ``ResourceDefinitions`` and ``Namespaces``."""

    def __init__(self, types: Iterable[ResourceType[Any]] = ()) -> None:
        self._by_id: dict[str, ResourceDefinition] = {}
        self._namespaces: dict[str, str] = {
            META_NAMESPACE: "Metadata namespace which contains resource and namespace definitions."
        }
        builtin: tuple[ResourceType[Any], ...] = (RESOURCE_DEFINITIONS, NAMESPACES)
        for rtype in (*builtin, *types):
            self.register(rtype)

    def register(self, rtype: ResourceType[Any]) -> ResourceDefinition:
        definition = ResourceDefinition(rtype, ResourceDefinitionSpec.fill(rtype))
        if definition.id in self._by_id:  # two types whose names differ in case would share an id
            raise RegistrationError(f'resource type "{rtype.type}" is already registered')
        self._by_id[definition.id] = definition
        return definition

    def __contains__(self, type_name: object) -> bool:
        return isinstance(type_name, str) and _definition_id(type_name) in self._by_id

    def register_namespace(self, name: str, description: str = "") -> None:
        self._namespaces[name] = description

    @property
    def namespaces(self) -> Mapping[str, str]:
        return dict(self._namespaces)

    def definitions(self) -> list[ResourceDefinition]:
        return sorted(self._by_id.values(), key=lambda d: d.id)

    def get(self, type_name: str) -> ResourceDefinition:
        """The definition of a canonical type name (by id: the case does not matter, aliases do not count)."""
        try:
            return self._by_id[_definition_id(type_name)]
        except KeyError:
            raise _unsupported(type_name) from None

    def lookup(self, name: str) -> ResourceDefinition:
        """Resolve what a user typed (``get mc``, ``get Members.cluster``) to one definition."""
        found = [d for d in self._by_id.values() if d.matches(name)]
        if not found:
            raise UnknownTypeError(
                f'resource "{name}" is not registered', hint="list known types with `talosctl get rd`"
            )
        if len(found) > 1:
            declared = [d for d in found if name.lower() in d.spec.declared_aliases]
            if len(declared) == 1:
                return declared[0]
            choices = ", ".join(sorted(d.spec.type for d in found))
            raise AmbiguousTypeError(
                f'resource type "{name}" is ambiguous', hint=f"use the full type name, one of: {choices}"
            )
        return found[0]

    def render_columns(self, resource: Resource[Any]) -> list[str]:
        return self.get(resource.metadata.type).render_columns(resource)

    def publish(self, state: State) -> None:
        """Write one ``ResourceDefinition`` per type and one ``Namespace`` per namespace to ``state``.

        What is already published is left alone, so this can run again after more registrations.
        """
        namespaces = dict(self._namespaces)
        for definition in self._by_id.values():
            namespaces.setdefault(definition.spec.default_namespace, "")
        have_rds = {r.id for r in state.list(META_NAMESPACE, RESOURCE_DEFINITIONS)}
        for definition in self.definitions():
            if definition.id not in have_rds:
                state.create(definition.to_resource())
        have_ns = {r.id for r in state.list(META_NAMESPACE, NAMESPACES)}
        for ns, description in sorted(namespaces.items()):
            if ns not in have_ns:
                state.create(NAMESPACES.new(ns, NamespaceSpec(description)))


def published_definition(state: State, type_name: str) -> ResourceDefinitionSpec:
    """The definition ``state`` publishes for a canonical type name, found as :meth:`Registry.get` finds it.

    This is the check COSI's API makes before it serves a read; :class:`UnknownTypeError` carries its
    refusal text.
    """
    try:
        spec: ResourceDefinitionSpec = state.get(
            META_NAMESPACE, RESOURCE_DEFINITIONS, _definition_id(type_name)
        ).spec
    except NotFoundError:
        raise _unsupported(type_name) from None
    return spec


def _definition_id(type_name: str) -> str:
    # COSI names a ResourceDefinition after its type, lower-cased; Talos looks definitions up that way.
    return type_name.lower()


def _unsupported(type_name: str) -> UnknownTypeError:
    return UnknownTypeError(f'resource type "{type_name}" is not supported')
