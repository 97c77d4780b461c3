#!/usr/bin/env python3
"""Generate ``src/ichor/machinery/config/_models.py`` from the official Talos 1.7 config JSON schema.

Usage: ``python scripts/gen_config_models.py [OUTPUT]`` (default: the checked-in ``_models.py``).

The schema documents what users write, but it is not a faithful picture of what Talos's Go decoder
accepts; :data:`OVERRIDES` and :data:`EXTRA_FIELDS` record every place where the generated models follow
the Go types instead of the schema (and why). Everything else comes from the schema: every ``$defs``
entry becomes a pydantic model, every property a field with the schema's description.

This script only writes the models file; it must stay deterministic (a test regenerates and diffs).
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "src" / "ichor" / "machinery" / "schema" / "talos-1.7-config.schema.json"
OUTPUT = REPO / "src" / "ichor" / "machinery" / "config" / "_models.py"

DURATION_PATTERN = r"^[-+]?(((\d+(\.\d*)?|\d*(\.\d+)+)([nuµm]?s|m|h))|0)+$"

# Root documents: $defs name -> (apiVersion, kind, Python class name).
ROOTS: dict[str, tuple[str, str, str]] = {
    "v1alpha1.Config": ("v1alpha1", "Config", "Config"),
    "extensions.ServiceConfigV1Alpha1": (
        "v1alpha1",
        "ExtensionServiceConfig",
        "ExtensionServiceConfigV1Alpha1",
    ),
    "network.DefaultActionConfigV1Alpha1": (
        "v1alpha1",
        "NetworkDefaultActionConfig",
        "NetworkDefaultActionConfigV1Alpha1",
    ),
    "network.RuleConfigV1Alpha1": ("v1alpha1", "NetworkRuleConfig", "NetworkRuleConfigV1Alpha1"),
    "runtime.EventSinkV1Alpha1": ("v1alpha1", "EventSinkConfig", "EventSinkConfigV1Alpha1"),
    "runtime.KmsgLogV1Alpha1": ("v1alpha1", "KmsgLogConfig", "KmsgLogConfigV1Alpha1"),
    "runtime.WatchdogTimerV1Alpha1": ("v1alpha1", "WatchdogTimerConfig", "WatchdogTimerConfigV1Alpha1"),
    "siderolink.ConfigV1Alpha1": ("v1alpha1", "SideroLinkConfig", "SideroLinkConfigV1Alpha1"),
}

# (def, property) -> Python type expression, where the Go decoder differs from the schema.
OVERRIDES: dict[tuple[str, str], str] = {
    # Go: []*x509.PEMEncodedCertificate; the schema describes a single object.
    ("v1alpha1.MachineConfig", "acceptedCAs"): "list[Certificate]",
    ("v1alpha1.ClusterConfig", "acceptedCAs"): "list[Certificate]",
    # Go: plain strings checked by Validate ("unknown machine type", "cni name should be one of"),
    # so a wrong value must load and be reported by validation, not by decoding.
    ("v1alpha1.MachineConfig", "type"): "YamlStr",
    ("v1alpha1.CNIConfig", "name"): "YamlStr",
    ("v1alpha1.LoggingDestination", "format"): "YamlStr",
    # Go: *url.URL written as a string; the schema has an empty object.
    ("v1alpha1.LoggingDestination", "endpoint"): "YamlStr",
    # Go: map values are pointers; a YAML null must load so validation can say "... is null".
    ("v1alpha1.RegistriesConfig", "mirrors"): "dict[str, RegistryMirrorConfig | None]",
    ("v1alpha1.RegistriesConfig", "config"): "dict[str, RegistryConfig | None]",
    # Go: DiskSize accepts bytes or a human size such as "100 GB".
    ("v1alpha1.DiskPartition", "size"): "StrictInt | YamlStr",
    # Go: []string of the listed values; the schema lists the enum without the array.
    ("v1alpha1.EncryptionConfig", "options"): (
        'list[Literal["no_read_workqueue", "no_write_workqueue", "same_cpu_crypt"]]'
    ),
}

# Fields the Go structs decode but the schema omits (hidden/deprecated in the docs): def -> [(yaml, type, doc)].
EXTRA_FIELDS: dict[str, list[tuple[str, str, str]]] = {
    "v1alpha1.Config": [
        ("persist", "StrictBool", "Indicates whether to pull the machine config upon every boot.\n"),
    ],
    "v1alpha1.Device": [
        ("cidr", "YamlStr", "Deprecated: use `addresses` instead.\n"),
    ],
    "v1alpha1.Vlan": [
        ("cidr", "YamlStr", "Deprecated: use `addresses` instead.\n"),
    ],
    "v1alpha1.InstallConfig": [
        ("bootloader", "StrictBool", "Deprecated: not used anymore.\n"),
    ],
    "v1alpha1.EtcdConfig": [
        ("subnet", "YamlStr", "Deprecated: use `advertisedSubnets` instead.\n"),
    ],
}

# Inline object shapes (sorted property names) -> class name.
INLINE_NAMES: dict[tuple[str, ...], str] = {
    ("crt", "key"): "CertificateAndKey",
    ("crt",): "Certificate",
    ("key",): "PrivateKey",
}

_RESERVED = {
    "model_config",
    "model_fields",
    "copy",
    "dict",
    "json",
    "schema",
    "validate",
    "construct",
    "fields",
}


def snake(name: str) -> str:
    """``certSANs`` -> ``cert_sans``, ``kubernetesTalosAPIAccess`` -> ``kubernetes_talos_api_access``."""
    # A plural acronym ("SANs", "CAs") is one word.
    out = re.sub(r"([A-Z]{2,})s(?=$|[A-Z])", lambda m: m.group(1)[0] + m.group(1)[1:].lower() + "s", name)
    out = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", out).lower()
    out = re.sub(r"[^0-9a-z_]", "_", out)
    if keyword.iskeyword(out) or out in _RESERVED:
        out += "_"
    return out


def class_name(ref: str) -> str:
    if ref in ROOTS:
        return ROOTS[ref][2]
    return ref.split(".", 1)[1]


class Generator:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.defs: dict[str, Any] = schema["$defs"]
        self.inline: dict[str, dict[str, Any]] = {}
        # class -> yaml key -> (container: "" | "list" | "map", child class)
        self.children: dict[str, dict[str, tuple[str, str]]] = {}

    def type_of(self, owner: str, prop: str, spec: dict[str, Any]) -> tuple[str, str, str]:
        """Python type, plus (container, child class) when the value holds a model."""
        if "$ref" in spec:
            ref = spec["$ref"].removeprefix("#/$defs/")
            return class_name(ref), "", class_name(ref)
        if "enum" in spec:
            return "Literal[" + ", ".join(json.dumps(v) for v in spec["enum"]) + "]", "", ""
        if "oneOf" in spec:
            kinds = [self.type_of(owner, prop, alt)[0] for alt in spec["oneOf"]]
            return " | ".join(kinds), "", ""
        kind = spec.get("type")
        if kind == "string":
            if spec.get("pattern") == DURATION_PATTERN:
                return "Duration", "", ""
            return "YamlStr", "", ""
        if kind == "boolean":
            return "StrictBool", "", ""
        if kind == "integer":
            return "StrictInt", "", ""
        if kind == "array":
            inner, _, child = self.type_of(owner, prop, spec.get("items", {}))
            return f"list[{inner}]", ("list" if child else ""), child
        if kind == "object":
            if "patternProperties" in spec:
                (value_spec,) = spec["patternProperties"].values()
                inner, _, child = self.type_of(owner, prop, value_spec)
                return f"dict[str, {inner}]", ("map" if child else ""), child
            if spec.get("properties"):
                shape = tuple(sorted(spec["properties"]))
                name = INLINE_NAMES.get(shape) or ("".join(p[:1].upper() + p[1:] for p in shape) + "Object")
                self.inline.setdefault(name, spec)
                return name, "", name
            return "dict[str, Any]", "", ""
        return "Any", "", ""

    def model(self, name: str, def_name: str | None, spec: dict[str, Any], doc: str) -> list[str]:
        lines = [f"class {name}(_Base):", f"    {json.dumps(doc)}", ""]
        props: list[tuple[str, str, str | None]] = []
        kids: dict[str, tuple[str, str]] = {}
        for prop, pspec in spec.get("properties", {}).items():
            override = OVERRIDES.get((def_name or "", prop))
            pytype, container, child = self.type_of(name, prop, pspec)
            if override is not None:
                pytype = override
                if override.startswith("list[Certificate]"):
                    container, child = "list", "Certificate"
                    self.inline.setdefault("Certificate", pspec)
                elif child and override == "YamlStr":
                    container, child = "", ""
            if child:
                kids[prop] = (container, child)
            props.append((prop, pytype, pspec.get("description")))
        for prop, pytype, pdoc in EXTRA_FIELDS.get(def_name or "", []):
            props.append((prop, pytype, pdoc))
        self.children[name] = kids
        seen: set[str] = set()
        for prop, pytype, pdoc in props:
            attr = snake(prop)
            assert attr not in seen, (name, prop)
            seen.add(attr)
            args = ["default=None", f"alias={json.dumps(prop)}"]
            if pdoc:
                args.append(f"description={json.dumps(pdoc.strip(), ensure_ascii=False)}")
            lines.append(f"    {attr}: {pytype} | None = Field({', '.join(args)})")
        if not props:
            lines.append("    pass")
        lines.append("")
        lines.append("")
        return lines

    def render(self) -> str:
        body: list[str] = []
        for def_name in sorted(self.defs):
            spec = self.defs[def_name]
            name = class_name(def_name)
            if def_name in ROOTS:
                api_version, kind, _ = ROOTS[def_name]
                doc = f"Talos {kind} document (apiVersion {api_version}); schema $defs `{def_name}`."
            else:
                doc = f"Schema $defs `{def_name}`."
            body.extend(self.model(name, def_name, spec, doc))
        inline_body: list[str] = []
        for name in sorted(self.inline):
            spec = self.inline[name]
            # The schema marks some scalar properties with additionalProperties; that is noise.
            clean = {
                "properties": {k: {kk: vv for kk, vv in v.items()} for k, v in spec["properties"].items()}
            }
            inline_body.extend(
                self.model(name, None, clean, "Inline object from the schema (PEM material, base64).")
            )

        out = [HEADER]
        out.extend(inline_body)
        out.extend(body)
        out.append("# (apiVersion, kind) -> root document model.")
        out.append("KIND_MODELS: dict[tuple[str, str], type[_Base]] = {")
        for def_name in sorted(ROOTS, key=lambda d: ROOTS[d][1]):
            api_version, kind, cls = ROOTS[def_name]
            out.append(f"    ({json.dumps(api_version)}, {json.dumps(kind)}): {cls},")
        out.append("}")
        out.append("")
        out.append(
            "# class name -> YAML key -> (container: '' | 'list' | 'map', child class name), for path walks."
        )
        out.append("CHILDREN: dict[str, dict[str, tuple[str, str]]] = {")
        for cls in sorted(self.children):
            kids = self.children[cls]
            if not kids:
                continue
            out.append(f"    {json.dumps(cls)}: {{")
            for key in sorted(kids):
                container, child = kids[key]
                out.append(f"        {json.dumps(key)}: ({json.dumps(container)}, {json.dumps(child)}),")
            out.append("    },")
        out.append("}")
        out.append("")
        out.append("MODELS_BY_NAME: dict[str, type[_Base]] = {")
        for cls in sorted(set(self.children)):
            out.append(f"    {json.dumps(cls)}: {cls},")
        out.append("}")
        out.append("")
        return "\n".join(out)


HEADER = (
    '''# Code generated by scripts/gen_config_models.py from talos-1.7-config.schema.json. DO NOT EDIT.
"""Typed models for every Talos 1.7 machine config document kind (generated).

Attribute names are snake_case; each field's ``alias`` is the YAML key. Every field is optional, as in
Talos. The raw YAML stays the source of truth (see :mod:`ichor.machinery.config`); these models only
give typed, checked access to it. Regenerate with ``python scripts/gen_config_models.py``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StringConstraints


def _scalar_text(value: Any) -> Any:
    # Go's YAML decoder stores any scalar into a string field as its text (`v: 2` -> "2").
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


YamlStr = Annotated[str, BeforeValidator(_scalar_text)]
"""A string field; numbers and booleans are taken as their text, as Talos does."""

DURATION_PATTERN = r"'''
    + DURATION_PATTERN
    + '''"
Duration = Annotated[str, StringConstraints(pattern=DURATION_PATTERN)]
"""A Go duration such as ``30s``, ``1m30s`` or ``500ms``."""


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, protected_namespaces=(), defer_build=True)


'''
)


def main(argv: list[str]) -> int:
    target = Path(argv[1]) if len(argv) > 1 else OUTPUT
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    text = Generator(schema).render()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
