"""Field documentation from the official schema, for ``gen config --with-docs`` style comments.

It only looks descriptions up in the generated models; it must not read or format YAML.
"""

from __future__ import annotations

from collections.abc import Sequence

from ichor.machinery.docident import DocIdentity

from . import _models
from ._ichor_models import ICHOR_CHILDREN, ICHOR_KIND_MODELS
from ._paths import PathElem

_KIND_MODELS = {**_models.KIND_MODELS, **ICHOR_KIND_MODELS}
_CHILDREN = {**_models.CHILDREN, **ICHOR_CHILDREN}
_MODELS_BY_NAME = {**_models.MODELS_BY_NAME, **{m.__name__: m for m in ICHOR_KIND_MODELS.values()}}

KindIdentity = DocIdentity | tuple[str, str]


def _root_class(kind_identity: KindIdentity) -> str | None:
    if isinstance(kind_identity, DocIdentity):
        key = (kind_identity.api_version, kind_identity.kind)
    else:
        key = (kind_identity[0], kind_identity[1])
    model = _KIND_MODELS.get(key)
    return model.__name__ if model is not None else None


def field_description(kind_identity: KindIdentity, path: Sequence[PathElem]) -> str | None:
    """The schema's description of the field at ``path`` (YAML keys; list indexes and map keys allowed).

    ``field_description(("v1alpha1", "Config"), ("machine", "kubelet", "image"))`` returns the text whose
    first line is the short comment Talos writes above ``image:``. ``None`` when the path is unknown or
    the field has no description.
    """
    cls_name = _root_class(kind_identity)
    if cls_name is None or not path:
        return None
    description: str | None = None
    pending_map = False  # the previous key was a map of models: this element is a free-form map key
    for i, elem in enumerate(path):
        if isinstance(elem, int):
            continue
        if pending_map:
            pending_map = False
            continue
        if cls_name is None:
            return None
        model = _MODELS_BY_NAME[cls_name]
        field = next((f for f in model.model_fields.values() if f.alias == elem), None)
        if field is None:
            return None
        description = field.description
        container, child = _CHILDREN.get(cls_name, {}).get(elem, ("", ""))
        if i == len(path) - 1:
            return description
        if not child:
            return None
        cls_name = child
        pending_map = container == "map"
    return description
