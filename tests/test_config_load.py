"""Loading and dumping machine configs: Talos's decoding rules, round trips, atomic writes, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ichor.machinery import yamlio
from ichor.machinery.config import (
    Container,
    Mode,
    load_config,
    load_config_file,
    validate,
)
from ichor.machinery.config import _models as models
from ichor.machinery.errors import ConfigDecodeError, MachineryError, OutputExistsError, YAMLError

DATA = Path(__file__).parent / "data" / "config"
STABILITY = DATA / "stability-v1.7"
STABILITY_FILES = ["base-controlplane", "base-worker", "overrides-controlplane", "overrides-worker"]


def released_17(text: str) -> str:
    """The stored upstream fixtures predate the 1.7 release, which renamed `localDNS` to `hostDNS`."""
    assert "        localDNS: true\n" in text
    return text.replace("        localDNS: true\n", "        hostDNS:\n            enabled: true\n")


# --- round trips ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [DATA / "multidoc-all-kinds.yaml", DATA / "comments-odd-order.yaml"]
    + [STABILITY / f"{name}.yaml" for name in STABILITY_FILES],
    ids=lambda p: p.name,
)
def test_round_trip_is_byte_exact(path: Path) -> None:
    text = path.read_text()
    if "localDNS" in text:
        text = released_17(text)
    container = load_config(text, source=path.name)
    assert container.to_text() == text


def test_multidoc_has_every_kind_in_order() -> None:
    container = load_config_file(DATA / "multidoc-all-kinds.yaml")
    kinds = [doc.identity.kind for doc in container]
    assert kinds == [
        "Config",
        "ExtensionServiceConfig",
        "WatchdogTimerConfig",
        "KmsgLogConfig",
        "EventSinkConfig",
        "SideroLinkConfig",
        "NetworkRuleConfig",
        "NetworkDefaultActionConfig",
    ]
    assert {(d.identity.api_version, d.identity.kind) for d in container} == set(models.KIND_MODELS)
    assert container.v1alpha1 is container.documents[0]
    assert isinstance(container.documents[1].model, models.ExtensionServiceConfigV1Alpha1)
    rule = container.find("NetworkRuleConfig", "ingress-apid")
    assert rule is not None
    assert isinstance(rule.model, models.NetworkRuleConfigV1Alpha1)
    assert rule.model.port_selector is not None
    assert rule.model.port_selector.ports == [50000, "10250-10260"]
    assert validate(container, Mode.METAL).errors == []


def test_scalar_in_string_field_is_taken_as_text_like_talos() -> None:
    container = load_config_file(DATA / "comments-odd-order.yaml")
    model = container.v1alpha1.model if container.v1alpha1 else None
    assert isinstance(model, models.Config)
    assert model.machine is not None and model.machine.kubelet is not None
    assert model.machine.kubelet.extra_args == {"v": "2"}


def test_edited_raw_document_is_dumped_with_the_edit_and_keeps_comments() -> None:
    container = load_config_file(DATA / "multidoc-all-kinds.yaml")
    doc = container.v1alpha1
    assert doc is not None
    doc.raw["machine"]["install"]["disk"] = "/dev/nvme0n1"
    doc.refresh()
    text = container.to_text()
    assert "disk: /dev/nvme0n1" in text
    assert "type: worker # joins an existing cluster" in text
    assert text.count("\n---\n") == 7
    reloaded = load_config(text)
    model = reloaded.documents[0].model
    assert isinstance(model, models.Config)
    assert model.machine is not None and model.machine.install is not None
    assert model.machine.install.disk == "/dev/nvme0n1"


def test_raw_documents_are_the_ruamel_mappings() -> None:
    container = load_config_file(DATA / "multidoc-all-kinds.yaml")
    raws = container.raw_documents()
    assert len(raws) == len(container) == 8
    assert raws[2]["device"] == "/dev/watchdog0"
    assert (
        yamlio.dump_document(raws[7])
        == "apiVersion: v1alpha1\nkind: NetworkDefaultActionConfig\ningress: block\n"
    )


# --- Talos's stability test data -------------------------------------------------------------------


@pytest.mark.parametrize("name", STABILITY_FILES)
def test_talos_generated_configs_load_and_validate(name: str) -> None:
    text = released_17((STABILITY / f"{name}.yaml").read_text())
    container = load_config(text, source=name)
    assert container.v1alpha1 is not None
    assert validate(container, Mode.CLOUD).errors == []
    # the base configs have no install disk, which Talos also refuses in metal mode
    metal = validate(container, Mode.METAL).errors
    if name.startswith("base"):
        assert metal == ["machine.install: either install disk or diskSelector should be defined"]
    else:
        assert metal == []


@pytest.mark.parametrize("name", STABILITY_FILES)
def test_prerelease_local_dns_key_is_unknown_in_17(name: str) -> None:
    with pytest.raises(ConfigDecodeError) as exc:
        load_config_file(STABILITY / f"{name}.yaml")
    message = str(exc.value)
    assert "unknown keys found during decoding" in message
    assert "machine.features.localDNS" in message
    assert name in message
    assert exc.value.hint


# --- decoding errors ---------------------------------------------------------------------------------

V1 = "version: v1alpha1\nmachine:\n    type: worker\n"


def decode_error(text: str) -> ConfigDecodeError:
    with pytest.raises(ConfigDecodeError) as exc:
        load_config(text, source="cfg.yaml")
    assert exc.value.hint, "every decode error carries a hint"
    assert "cfg.yaml" in str(exc.value)
    return exc.value


def test_unknown_keys_are_all_reported_with_their_paths() -> None:
    err = decode_error(
        "version: v1alpha1\n"
        "machine:\n"
        "    kubelet:\n"
        "        imagee: foo\n"
        "    network:\n"
        "        interfaces:\n"
        "            - interface: eth0\n"
        "              dhcpp: true\n"
        "cluster:\n"
        "    foo: bar\n"
    )
    message = str(err)
    assert "unknown keys found during decoding" in message
    assert "machine.kubelet.imagee (line 4)" in message
    assert "machine.network.interfaces[0].dhcpp (line 8)" in message
    assert "cluster.foo (line 10)" in message
    assert "imagee -> image?" in (err.hint or "")


def test_wrong_types_name_path_expected_type_and_value() -> None:
    err = decode_error(
        V1
        + "    install:\n        wipe: yes please\n        disk: [a]\n    features:\n        kubePrism:\n            port: '7445'\n"
    )
    message = str(err)
    assert 'machine.install.wipe (line 5): expected a boolean (true or false), got "yes please"' in message
    assert "machine.install.disk (line 6): expected a string, got a list" in message
    assert 'machine.features.kubePrism.port (line 9): expected an integer, got "7445"' in message


def test_bad_duration_and_enum_are_decode_errors() -> None:
    err = decode_error("apiVersion: v1alpha1\nkind: WatchdogTimerConfig\ndevice: /dev/w\ntimeout: soon\n")
    assert "timeout (line 4): expected a duration" in str(err)
    err = decode_error("apiVersion: v1alpha1\nkind: NetworkDefaultActionConfig\ningress: maybe\n")
    assert "ingress (line 3): expected one of 'accept' or 'block'" in str(err)


def test_missing_kind() -> None:
    err = decode_error("apiVersion: v1alpha1\nname: foo\n")
    assert "missing kind" in str(err)


def test_missing_api_version() -> None:
    err = decode_error("kind: KmsgLogConfig\nname: foo\n")
    assert "missing apiVersion" in str(err)


def test_unknown_kind_uses_talos_text() -> None:
    err = decode_error("apiVersion: v1alpha1\nkind: FooConfig\n")
    assert '"FooConfig" "v1alpha1": not registered' in str(err)
    assert "KmsgLogConfig" in (err.hint or "")


def test_known_kind_with_unknown_api_version_is_not_registered() -> None:
    err = decode_error("apiVersion: v1beta1\nkind: KmsgLogConfig\nname: x\n")
    assert '"KmsgLogConfig" "v1beta1": not registered' in str(err)


def test_duplicate_v1alpha1() -> None:
    err = decode_error(V1 + "---\n" + V1)
    assert "duplicate v1alpha1.Config" in str(err)
    assert "document 2" in str(err)


def test_duplicate_named_document() -> None:
    doc = "apiVersion: v1alpha1\nkind: KmsgLogConfig\nname: remote\nurl: tcp://1.2.3.4:5/\n"
    err = decode_error(doc + "---\n" + doc)
    assert "duplicate document: KmsgLogConfig/remote" in str(err)
    other = doc.replace("name: remote", "name: other")
    assert len(load_config(doc + "---\n" + other)) == 2


def test_duplicate_unnamed_document() -> None:
    doc = "apiVersion: v1alpha1\nkind: EventSinkConfig\nendpoint: 1.2.3.4:5\n"
    assert "duplicate document: EventSinkConfig/" in str(decode_error(doc + "---\n" + doc))


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "---\n...\n"])
def test_empty_input(text: str) -> None:
    assert "config not found" in str(decode_error(text))


def test_document_that_is_not_a_mapping() -> None:
    assert "expected a YAML document" in str(decode_error(V1 + "---\n- a\n- b\n"))


def test_kind_that_is_not_a_string() -> None:
    assert "kind: expected a string, got a list" in str(decode_error("apiVersion: v1alpha1\nkind: [a]\n"))


def test_invalid_yaml_is_a_yaml_error_naming_the_line() -> None:
    with pytest.raises(YAMLError) as exc:
        load_config("machine:\n  type: [worker\n", source="cfg.yaml")
    assert "cfg.yaml" in str(exc.value)
    assert "line 3" in str(exc.value)  # the unclosed flow sequence runs to the end of the input
    assert exc.value.hint


def test_errors_in_several_documents_are_reported_together() -> None:
    err = decode_error(V1 + "    foo: 1\n---\napiVersion: v1alpha1\nkind: KmsgLogConfig\nbar: 2\n")
    assert "machine.foo" in str(err)
    assert "document 2 v1alpha1/KmsgLogConfig (line 6)" in str(err)
    assert "bar (line 8)" in str(err)  # lines count from the top of the file


def test_non_utf8_bytes() -> None:
    with pytest.raises(MachineryError) as exc:
        load_config(b"machine: \xff\n", source="cfg.yaml")
    assert "UTF-8" in str(exc.value)


def test_load_config_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigDecodeError) as exc:
        load_config_file(tmp_path / "missing.yaml")
    assert "missing.yaml" in str(exc.value) and exc.value.hint
    with pytest.raises(ConfigDecodeError) as exc:
        load_config_file(tmp_path)
    assert "is a directory" in str(exc.value)


# --- writing ----------------------------------------------------------------------------------------


def test_write_is_atomic_private_and_refuses_to_clobber(tmp_path: Path) -> None:
    container = load_config_file(DATA / "comments-odd-order.yaml")
    target = tmp_path / "out.yaml"
    container.write(target)
    assert target.read_text() == (DATA / "comments-odd-order.yaml").read_text()
    assert target.stat().st_mode & 0o777 == 0o600
    target.write_text("keep me")
    with pytest.raises(OutputExistsError):
        container.write(target)
    assert target.read_text() == "keep me"
    container.write(target, force=True)
    assert isinstance(load_config_file(target), Container)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.yaml"]


# --- fuzzing ----------------------------------------------------------------------------------------

_KEYS = st.sampled_from(
    [
        "version",
        "machine",
        "cluster",
        "kind",
        "apiVersion",
        "name",
        "type",
        "install",
        "disk",
        "network",
        "interfaces",
        "ports",
        "url",
        "persist",
        "debug",
        "features",
        "kubelet",
        "extraArgs",
        "x",
    ]
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.sampled_from(["v1alpha1", "KmsgLogConfig", "NetworkRuleConfig", "Config", "worker"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=12,
)


@pytest.mark.slow  # 200 examples through the whole loader: ~5-7 s
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.dictionaries(_KEYS, _VALUES, max_size=5), min_size=1, max_size=3))
def test_fuzz_structured_documents_only_raise_machinery_errors(docs: list[dict[str, object]]) -> None:
    text = yamlio.dump_documents([yamlio.from_plain(d) for d in docs])
    try:
        container = load_config(text)
    except MachineryError:
        return
    for mode in Mode:
        validate(container, mode)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abk:- \n\t{}[],'\"#&*!|>%@`?01.v")), max_size=60))
def test_fuzz_text_only_raises_machinery_errors(text: str) -> None:
    try:
        container = load_config(text)
    except MachineryError:
        return
    for mode in Mode:
        validate(container, mode, strict=True)
