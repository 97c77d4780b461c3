"""Machine configuration: typed models, multi-document load/dump and Talos 1.7 validation.

``load_config``/``load_config_file`` decode YAML into a :class:`Container` of :class:`Document` objects
(raw ruamel mapping as the source of truth, typed pydantic model on demand) with Talos's decoding
rules; ``Container.to_text``/``write`` dump it back without losing comments or key order.
``validate`` applies Talos's validation rules for a :class:`Mode`. Errors are
:class:`~ichor.machinery.errors.ConfigDecodeError` and
:class:`~ichor.machinery.errors.ConfigValidationError`.

This package does not generate, patch or apply configs; other modules build on it for that.
"""

from __future__ import annotations

from ._docs import field_description
from ._document import Container, Document, load_config, load_config_file, talos_doc_id
from ._models import KIND_MODELS, Config
from ._validate import Mode, ValidationResult, validate, validate_document, validate_or_raise
from ._validate_labels import TAINT_EFFECTS, parse_taint
from ._validate_network import BOND_OPTIONS

__all__ = [
    "BOND_OPTIONS",
    "KIND_MODELS",
    "TAINT_EFFECTS",
    "Config",
    "Container",
    "Document",
    "Mode",
    "ValidationResult",
    "field_description",
    "load_config",
    "load_config_file",
    "parse_taint",
    "talos_doc_id",
    "validate",
    "validate_document",
    "validate_or_raise",
]
