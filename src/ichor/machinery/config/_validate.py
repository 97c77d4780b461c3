"""Talos 1.7 validation rules for decoded machine configs, reported all at once with YAML paths.

Messages are Talos's texts (``v1alpha1_validation.go`` and each document kind's ``Validate``), each
prefixed with the YAML path it is about: ``machine.install: install instructions are required in
"metal" mode``. Documents other than v1alpha1 are prefixed with Talos's document id
(``KmsgLogConfig/remote-log: url: url is required``). Validation is local (``talosctl validate``): it
never looks at disks or the network, and it never changes the config.

This module runs the checks; the rules live by area in ``_validate_machine``, ``_validate_cluster``,
``_validate_network`` and ``_validate_documents`` (other kinds), on the helpers in ``_validate_base``.
"""

from __future__ import annotations

from ichor.machinery.errors import ConfigValidationError

from . import _models as m
from ._document import Container, Document
from ._validate_base import (
    Mode,
    ValidationResult,
    _Report,
    endpoint_uri_error,
    is_valid_dns_name,
    machine_type,
)
from ._validate_documents import _KIND_VALIDATORS
from ._validate_machine import _validate_v1alpha1

__all__ = [
    "Mode",
    "ValidationResult",
    "endpoint_uri_error",
    "is_valid_dns_name",
    "machine_type",
    "validate",
    "validate_document",
    "validate_or_raise",
]


def validate_document(doc: Document, mode: Mode) -> ValidationResult:
    """Validate one document (errors unprefixed for v1alpha1, ``Kind/name:`` for the others)."""
    if doc.identity.is_v1alpha1:
        report = _Report()
        model = doc.model
        assert isinstance(model, m.Config)
        _validate_v1alpha1(model, mode, report)
    else:
        report = _Report(doc.talos_id)
        checker = _KIND_VALIDATORS.get(doc.identity.kind)
        if checker is not None:
            checker(doc.model, report)
    return ValidationResult(report.errors, report.warnings)


def validate(container: Container, mode: Mode | str, *, strict: bool = False) -> ValidationResult:
    """Check every document against Talos 1.7's rules for ``mode``; returns all errors and warnings.

    With ``strict`` every warning becomes an error prefixed ``warning:`` (as Talos does).
    """
    mode = Mode(mode)
    result = ValidationResult()
    for doc in container:
        found = validate_document(doc, mode)
        result.errors.extend(found.errors)
        result.warnings.extend(found.warnings)
    if strict:
        result.errors.extend(f"warning: {w}" for w in result.warnings)
        result.warnings = []
    return result


def validate_or_raise(container: Container, mode: Mode | str, *, strict: bool = False) -> list[str]:
    """Like :func:`validate`, but raise :class:`ConfigValidationError` on errors; returns the warnings."""
    result = validate(container, mode, strict=strict)
    if result.errors:
        count = len(result.errors)
        raise ConfigValidationError(
            f"{container.source}: {count} error{'s' if count != 1 else ''} occurred:",
            result.errors,
            hint=f"fix the listed YAML paths in {container.source} (they are checked for {Mode(mode).value} mode)",
        )
    return result.warnings
