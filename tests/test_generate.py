"""gen config: Talos-equal output, schema conformance, options and patches."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ichor.machinery.contract import VersionContract
from ichor.machinery.errors import MachineryError
from ichor.machinery.generate import GenOptions, OutputType, generate, render_document, validate_endpoint
from ichor.machinery.secrets import SecretsBundle
from ichor.machinery.yamlio import load_documents, to_plain

DATA = Path(__file__).parent / "data" / "talos"
SCHEMA_PATH = (
    Path(__file__).parent.parent / "src" / "ichor" / "machinery" / "schema" / "talos-1.7-config.schema.json"
)


@pytest.fixture(scope="module")
def talos_bundle() -> SecretsBundle:
    return SecretsBundle.load(DATA / "secrets.yaml")


def _talos_1_7_6(name: str) -> dict[str, Any]:
    """Talos's stability output for the v1.7 contract, with the changes talosctl v1.7.6 makes.

    The stored file predates the 1.7.0 rename of ``features.localDNS`` to ``features.hostDNS``, and
    the stability test passes no install disk or image while ``talosctl gen config`` always does
    (flag defaults ``/dev/sda`` and ``ghcr.io/siderolabs/installer:v1.7.6``).
    """
    doc: dict[str, Any] = to_plain(load_documents((DATA / name).read_text())[0])
    features = doc["machine"]["features"]
    del features["localDNS"]
    features["hostDNS"] = {"enabled": True}
    doc["machine"]["install"] = {
        "disk": "/dev/sda",
        "image": "ghcr.io/siderolabs/installer:v1.7.6",
        "wipe": False,
    }
    return doc


BASE = GenOptions(cluster_name="base", endpoint="https://base:6443", kubernetes_version="1.28.0")


@pytest.mark.parametrize(
    ("output_type", "golden"),
    [
        (OutputType.CONTROLPLANE, "stability-v1.7-base-controlplane.yaml"),
        (OutputType.WORKER, "stability-v1.7-base-worker.yaml"),
    ],
)
def test_output_equals_talos_field_for_field_and_byte_for_byte(
    talos_bundle: SecretsBundle, output_type: OutputType, golden: str
) -> None:
    result = generate(talos_bundle, BASE, output_types=[output_type], with_docs=False, with_examples=False)
    text = result.outputs[output_type]
    assert to_plain(load_documents(text)[0]) == _talos_1_7_6(golden)
    assert text == render_document(_talos_1_7_6(golden))


def test_renderer_reproduces_talos_bytes_whatever_the_input_key_order() -> None:
    original = (DATA / "stability-v1.7-base-controlplane.yaml").read_text()
    doc = to_plain(load_documents(original)[0])
    rng = random.Random(7)

    def shuffle(value: Any) -> Any:
        if isinstance(value, dict):
            items = list(value.items())
            rng.shuffle(items)
            return {k: shuffle(v) for k, v in items}
        if isinstance(value, list):
            return [shuffle(v) for v in value]
        return value

    for _ in range(5):
        assert render_document(shuffle(doc)) == original


def _schema_errors(doc: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA_PATH.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    found = []
    for error in validator.iter_errors(doc):
        # The root is a oneOf over document kinds: look into the branch for this kind.
        for sub in error.context or [error]:
            found.append(f"{'.'.join(map(str, sub.absolute_path))}: {sub.message}")
    return found


def _v1alpha1_errors(doc: dict[str, Any]) -> set[str]:
    schema = json.loads(SCHEMA_PATH.read_text())
    config_schema = {"$defs": schema["$defs"], **schema["$defs"]["v1alpha1.Config"]}
    validator = jsonschema.Draft202012Validator(config_schema)
    return {f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)}


# The published 1.7 schema does not list `persist`, which Talos itself writes into every config.
KNOWN_SCHEMA_GAP = {": Additional properties are not allowed ('persist' was unexpected)"}


@pytest.mark.parametrize("output_type", [OutputType.CONTROLPLANE, OutputType.WORKER])
@pytest.mark.parametrize("with_docs", [True, False])
def test_generated_configs_conform_to_the_official_schema(
    talos_bundle: SecretsBundle, output_type: OutputType, with_docs: bool
) -> None:
    opts = GenOptions(
        cluster_name="prod",
        endpoint="https://10.0.0.10:6443",
        additional_sans=("cp.example.org",),
        registry_mirrors=(("docker.io", "https://mirror.lan"),),
        kubespan=True,
    )
    result = generate(
        talos_bundle, opts, output_types=[output_type], with_docs=with_docs, with_examples=with_docs
    )
    doc = to_plain(load_documents(result.outputs[output_type])[0])
    assert _v1alpha1_errors(doc) == KNOWN_SCHEMA_GAP
    assert _v1alpha1_errors({k: v for k, v in doc.items() if k != "persist"}) == set()


def test_schema_check_is_able_to_fail(talos_bundle: SecretsBundle) -> None:
    doc = _talos_1_7_6("stability-v1.7-base-worker.yaml")
    doc["machine"]["kubelet"]["imagee"] = "typo"
    assert any("imagee" in error for error in _v1alpha1_errors(doc))


def test_options_reach_the_documents(talos_bundle: SecretsBundle) -> None:
    opts = GenOptions(
        cluster_name="prod",
        endpoint="https://cp.example.org:6443",
        kubernetes_version="1.29.1",
        install_disk="/dev/nvme0n1",
        install_image="registry.lan/installer:v1.7.6",
        additional_sans=("10.0.0.10", "cp.example.org"),
        dns_domain="corp.local",
        registry_mirrors=(
            ("docker.io", "https://m1"),
            ("docker.io", "https://m2"),
            ("ghcr.io", "https://m3"),
        ),
        discovery_enabled=False,
        kubespan=True,
    )
    out = generate(
        talos_bundle, opts, output_types=[OutputType.CONTROLPLANE], with_docs=False, with_examples=False
    )
    doc = to_plain(load_documents(out.outputs[OutputType.CONTROLPLANE])[0])
    machine, cluster = doc["machine"], doc["cluster"]
    assert machine["kubelet"]["image"] == "ghcr.io/siderolabs/kubelet:v1.29.1"
    assert cluster["apiServer"]["image"] == "registry.k8s.io/kube-apiserver:v1.29.1"
    assert machine["install"] == {
        "disk": "/dev/nvme0n1",
        "image": "registry.lan/installer:v1.7.6",
        "wipe": False,
    }
    # The endpoint host comes first and is not repeated.
    assert cluster["apiServer"]["certSANs"] == ["cp.example.org", "10.0.0.10"]
    assert machine["certSANs"] == ["10.0.0.10", "cp.example.org"]
    assert cluster["network"]["dnsDomain"] == "corp.local"
    assert machine["registries"] == {
        "mirrors": {
            "docker.io": {"endpoints": ["https://m1", "https://m2"]},
            "ghcr.io": {"endpoints": ["https://m3"]},
        }
    }
    assert cluster["discovery"]["enabled"] is False
    assert machine["network"] == {"kubespan": {"enabled": True}}


@pytest.mark.parametrize(
    ("version", "absent", "present"),
    [
        ("v1.6", [("machine", "features", "hostDNS")], [("machine", "features", "kubePrism")]),
        ("v1.5", [("machine", "features", "kubePrism")], [("machine", "features", "diskQuotaSupport")]),
        (
            "v1.2",
            [("cluster", "secretboxEncryptionSecret"), ("cluster", "apiServer", "auditPolicy")],
            [("cluster", "aescbcEncryptionSecret")],
        ),
    ],
)
def test_version_contract_controls_generated_fields(
    version: str, absent: list[tuple[str, ...]], present: list[tuple[str, ...]]
) -> None:
    contract = VersionContract.parse(version)
    bundle = SecretsBundle.generate(contract)
    opts = GenOptions(cluster_name="old", endpoint="https://old:6443", contract=contract)
    out = generate(bundle, opts, output_types=[OutputType.CONTROLPLANE], with_docs=False, with_examples=False)
    doc = to_plain(load_documents(out.outputs[OutputType.CONTROLPLANE])[0])

    def has(path: tuple[str, ...]) -> bool:
        node: Any = doc
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return False
            node = node[key]
        return True

    assert not [p for p in absent if has(p)]
    assert [p for p in present if has(p)] == present


def test_docs_and_examples_are_comments_only(talos_bundle: SecretsBundle) -> None:
    plain = generate(talos_bundle, BASE, with_docs=False, with_examples=False).outputs
    documented = generate(talos_bundle, BASE, with_docs=True, with_examples=True).outputs
    cp = documented[OutputType.CONTROLPLANE]
    assert "    type: controlplane # Defines the role of the machine within the cluster.\n" in cp
    assert "    # Used to provide additional options to the kubelet.\n    kubelet:\n" in cp
    assert "        # # The `extraArgs` field is used to provide additional flags to the kubelet.\n" in cp
    # Same data, apart from the empty fields Talos keeps only to hang examples on.
    data = to_plain(load_documents(cp)[0])
    assert data["machine"].pop("registries") == {}
    assert data["cluster"].pop("extraManifests") == []
    assert data["cluster"].pop("inlineManifests") == []
    assert data == to_plain(load_documents(plain[OutputType.CONTROLPLANE])[0])


def test_worker_carries_no_cluster_secrets(talos_bundle: SecretsBundle) -> None:
    out = generate(talos_bundle, BASE, output_types=[OutputType.WORKER], with_docs=False, with_examples=False)
    doc = to_plain(load_documents(out.outputs[OutputType.WORKER])[0])
    assert doc["machine"]["ca"]["key"] == ""
    assert doc["cluster"]["ca"]["key"] == ""
    for secret in ("aggregatorCA", "serviceAccount", "etcd", "secretboxEncryptionSecret", "clusterName"):
        assert secret not in doc["cluster"]


@pytest.mark.parametrize(
    ("endpoint", "fragment"),
    [
        ("192.168.0.2:6443", "no scheme"),
        ("http://192.168.0.2:6443", "https://"),
        ("https://:6443", "no host"),
        ("https://host:99999", "invalid port"),
        ("https://host:0", "invalid port"),
        ("", "no scheme"),
    ],
)
def test_bad_endpoints_are_refused_with_a_fix(endpoint: str, fragment: str) -> None:
    with pytest.raises(MachineryError) as info:
        validate_endpoint(endpoint)
    assert fragment in str(info.value)
    assert info.value.hint and "https://" in info.value.hint


_keys = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=20,
)


@pytest.mark.slow  # 300 examples through ruamel.yaml: ~10 s
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values, min_size=1, max_size=5))
def test_rendered_yaml_reads_back_as_the_same_data(doc: dict[str, Any]) -> None:
    # Unknown top-level keys: rendered in sorted order, every scalar quoted as needed.
    text = render_document(copy.deepcopy(doc))
    assert to_plain(load_documents(text)[0]) == doc
