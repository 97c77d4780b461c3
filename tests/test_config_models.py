"""The generated models: up to date with the generator, complete against the schema, documented."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pydantic
import pytest

from ichor.machinery.config import KIND_MODELS, field_description
from ichor.machinery.config import _models as models
from ichor.machinery.docident import DocIdentity

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "src/ichor/machinery/schema/talos-1.7-config.schema.json").read_text())
GENERATOR = REPO / "scripts" / "gen_config_models.py"


def test_checked_in_models_match_the_generator(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("gen_config_models", GENERATOR)
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    out = tmp_path / "_models.py"
    assert generator.main(["gen_config_models.py", str(out)]) == 0
    assert out.read_text() == (REPO / "src/ichor/machinery/config/_models.py").read_text()


def _class_for(def_name: str) -> type[pydantic.BaseModel]:
    for model in KIND_MODELS.values():
        if model.__doc__ and f"`{def_name}`" in model.__doc__:
            return model
    return models.MODELS_BY_NAME[def_name.split(".", 1)[1]]


@pytest.mark.parametrize("def_name", sorted(SCHEMA["$defs"]))
def test_every_schema_property_is_a_field_with_its_yaml_alias(def_name: str) -> None:
    model = _class_for(def_name)
    aliases = {f.alias: f for f in model.model_fields.values()}
    for prop, spec in SCHEMA["$defs"][def_name]["properties"].items():
        assert prop in aliases, f"{def_name}.{prop} missing"
        field = aliases[prop]
        assert field.default is None
        if spec.get("description"):
            assert field.description == spec["description"].strip()
    assert model.model_config.get("extra") == "forbid"


def test_kind_mapping_covers_all_1_7_kinds() -> None:
    assert set(KIND_MODELS) == {
        ("v1alpha1", "Config"),
        ("v1alpha1", "ExtensionServiceConfig"),
        ("v1alpha1", "WatchdogTimerConfig"),
        ("v1alpha1", "KmsgLogConfig"),
        ("v1alpha1", "EventSinkConfig"),
        ("v1alpha1", "SideroLinkConfig"),
        ("v1alpha1", "NetworkRuleConfig"),
        ("v1alpha1", "NetworkDefaultActionConfig"),
    }


def test_schema_enums_are_literals() -> None:
    with pytest.raises(pydantic.ValidationError):
        models.RulePortSelector.model_validate({"protocol": "sctp"})
    assert models.RulePortSelector.model_validate({"protocol": "icmpv6"}).protocol == "icmpv6"


def test_go_shapes_that_the_schema_gets_wrong() -> None:
    # acceptedCAs is a list in Talos; persist and cidr are decoded though the schema omits them
    machine = models.MachineConfig.model_validate({"acceptedCAs": [{"crt": "Zm9v"}]})
    assert machine.accepted_cas is not None and machine.accepted_cas[0].crt == "Zm9v"
    assert models.Config.model_validate({"persist": True}).persist is True
    assert models.Device.model_validate({"cidr": "10.0.0.1/24"}).cidr == "10.0.0.1/24"
    assert models.DiskPartition.model_validate({"size": "100 GB"}).size == "100 GB"
    assert (
        models.LoggingDestination.model_validate({"endpoint": "udp://1.2.3.4:5"}).endpoint
        == "udp://1.2.3.4:5"
    )
    free: dict[str, Any] = {"apiVersion": "x", "nested": {"any": [1, "thing"]}}
    assert models.AdmissionPluginConfig.model_validate({"configuration": free}).configuration == free


def test_strict_scalars() -> None:
    with pytest.raises(pydantic.ValidationError):
        models.InstallConfig.model_validate({"wipe": "true"})
    with pytest.raises(pydantic.ValidationError):
        models.KubePrism.model_validate({"port": "7445"})


@pytest.mark.parametrize(
    ("identity", "path", "first_line"),
    [
        (("v1alpha1", "Config"), ("machine", "kubelet", "image"), "The image field is an optional reference"),
        (
            DocIdentity("v1alpha1", "Config"),
            ("machine", "install", "disk"),
            "The disk used for installations.",
        ),
        (
            ("v1alpha1", "Config"),
            ("machine", "network", "interfaces", 0, "addresses"),
            "Assigns static IP addresses",
        ),
        (
            ("v1alpha1", "Config"),
            ("machine", "registries", "mirrors", "ghcr.io", "endpoints"),
            "List of endpoints",
        ),
        (("v1alpha1", "Config"), ("cluster",), "Provides cluster specific configuration options."),
        (("v1alpha1", "KmsgLogConfig"), ("url",), "The URL encodes the log destination."),
    ],
)
def test_field_description(identity: Any, path: tuple[str | int, ...], first_line: str) -> None:
    text = field_description(identity, path)
    assert text is not None
    assert text.splitlines()[0].startswith(first_line)


@pytest.mark.parametrize(
    ("identity", "path"),
    [
        (("v1alpha1", "Config"), ("machine", "nope")),
        (("v1alpha1", "Config"), ("machine", "kubelet", "image", "deeper")),
        (("v1alpha1", "Config"), ()),
        (("v1alpha1", "FooConfig"), ("name",)),
    ],
)
def test_field_description_unknown(identity: Any, path: tuple[str | int, ...]) -> None:
    assert field_description(identity, path) is None
