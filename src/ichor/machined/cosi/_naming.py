"""COSI's naming rules for resource types: ``<PluralCamelCase>.<suffix>`` and English singulars.

Pure functions over strings; shared by type declarations and resource definitions.
"""

from __future__ import annotations

import re

from ichor.machined.cosi._errors import DefinitionError

__all__ = ["singular", "split_type_name", "validate_type_name"]

_NAME_RE = re.compile(r"^[A-Z][A-Za-z0-9-]+$")
_SUFFIX_RE = re.compile(r"^[a-z][a-z0-9-]+(\.[a-z][a-z0-9-]+)*$")


def singular(name: str) -> str | None:
    """English singular of a plural CamelCase name, or None when ``name`` is not plural."""
    lower = name.lower()
    if lower.endswith("ies") and len(name) > 3:
        return name[:-3] + ("Y" if name[-3].isupper() else "y")
    for ending in ("sses", "shes", "tches", "xes", "zzes", "uses"):
        if lower.endswith(ending):
            return name[:-2]
    if lower.endswith(("ss", "us", "is")) or not lower.endswith("s"):
        return None
    return name[:-1]


def split_type_name(type_name: str) -> tuple[str, str]:
    name, sep, suffix = type_name.partition(".")
    if not sep:
        raise DefinitionError(f'resource type "{type_name}": missing suffix')
    if not name:
        raise DefinitionError(f'resource type "{type_name}": name is empty')
    if not suffix:
        raise DefinitionError(f'resource type "{type_name}": suffix is empty')
    return name, suffix


def validate_type_name(type_name: str) -> None:
    """COSI's rules for ``<PluralCamelCase>.<suffix>``; raises :class:`DefinitionError`."""
    name, suffix = split_type_name(type_name)
    hint = "resource types look like MachineStatuses.runtime.talos.dev"
    if name.lower() == name:
        raise DefinitionError(f'resource type "{type_name}": name should be in CamelCase', hint=hint)
    if not _NAME_RE.match(name):
        raise DefinitionError(
            f'resource type "{type_name}": name doesn\'t match "{_NAME_RE.pattern}"', hint=hint
        )
    if not _SUFFIX_RE.match(suffix):
        raise DefinitionError(
            f'resource type "{type_name}": suffix doesn\'t match "{_SUFFIX_RE.pattern}"', hint=hint
        )
    if singular(name) is None:
        raise DefinitionError(f'resource type "{type_name}": name should be plural', hint=hint)
