"""RFC 6902 JSON patches: Talos's single-document rule, Ichor's document selector, errors, comments."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.machinery.errors import PatchError
from ichor.machinery.patch import apply_patches, load_patch
from ichor.machinery.yamlio import dump_documents, load_documents, to_plain

SINGLE = """\
version: v1alpha1 # schema
machine:
    type: controlplane # the role
    # certificate names
    certSANs:
        - a.example # first
        - b.example
    network:
        hostname: n1
cluster:
    clusterName: c1
"""

RULE_HTTP = """\
apiVersion: v1alpha1
kind: NetworkRuleConfig
name: ingress-http
portSelector:
    ports: [80]
    protocol: tcp
ingress:
    - subnet: 10.0.0.0/8
"""

MULTI = SINGLE + "---\n" + RULE_HTTP + "---\n" + RULE_HTTP.replace("ingress-http", "ingress-ssh")


def run(config: str, patch: str) -> list[Any]:
    return [to_plain(d) for d in apply_patches(load_documents(config), [load_patch(patch)])]


def test_json_patch_on_single_document() -> None:
    result = run(
        SINGLE,
        '[{"op": "replace", "path": "/machine/network/hostname", "value": "n2"},'
        ' {"op": "add", "path": "/machine/certSANs/-", "value": "c.example"},'
        ' {"op": "remove", "path": "/cluster/clusterName"}]',
    )[0]
    assert result["machine"]["network"]["hostname"] == "n2"
    assert result["machine"]["certSANs"] == ["a.example", "b.example", "c.example"]
    assert result["cluster"] == {}


def test_yaml_json_patch_keeps_untouched_comments() -> None:
    docs = load_documents(SINGLE)
    patch = load_patch("- op: replace\n  path: /machine/network/hostname\n  value: n2\n")
    out = dump_documents(apply_patches(docs, [patch]))
    assert out == SINGLE.replace("hostname: n1", "hostname: n2")


def test_removing_a_list_item_keeps_comments_of_the_rest() -> None:
    out = dump_documents(
        apply_patches(
            load_documents(SINGLE), [load_patch('[{"op": "remove", "path": "/machine/certSANs/1"}]')]
        )
    )
    assert "- a.example # first" in out and "b.example" not in out
    assert "type: controlplane # the role" in out and "# certificate names" in out


def test_json_patch_without_selector_fails_on_multi_document_config() -> None:
    with pytest.raises(PatchError) as info:
        run(MULTI, '[{"op": "add", "path": "/machine/type", "value": "worker"}]')
    assert "JSON6902 patches are not supported for multi-document machine configuration" in str(info.value)
    assert info.value.hint is not None and "document: v1alpha1" in info.value.hint


@pytest.mark.parametrize("selector", ["v1alpha1", "Config", "v1alpha1/Config"])
def test_selector_for_the_v1alpha1_document(selector: str) -> None:
    patch = f'[{{"op": "replace", "path": "/machine/type", "value": "worker", "document": "{selector}"}}]'
    result = run(MULTI, patch)
    assert result[0]["machine"]["type"] == "worker"
    assert result[1:] == run(MULTI, "# nothing\n")[1:]


@pytest.mark.parametrize(
    "selector", ["NetworkRuleConfig/ingress-ssh", "v1alpha1/NetworkRuleConfig/ingress-ssh"]
)
def test_selector_for_a_named_document(selector: str) -> None:
    patch = f"- op: add\n  document: {selector}\n  path: /portSelector/ports/-\n  value: 22\n"
    result = run(MULTI, patch)
    assert result[1]["portSelector"]["ports"] == [80]
    assert result[2]["portSelector"]["ports"] == [80, 22]


def test_selector_matching_no_document() -> None:
    with pytest.raises(PatchError) as info:
        run(MULTI, '[{"op": "add", "path": "/x", "value": 1, "document": "WatchdogTimerConfig"}]')
    assert "a patch for a document that is not there" in str(info.value)
    assert "'WatchdogTimerConfig'" in str(info.value)
    assert info.value.hint is not None and "NetworkRuleConfig/ingress-http" in info.value.hint


def test_ambiguous_selector() -> None:
    with pytest.raises(PatchError, match="matches 2 documents") as info:
        run(MULTI, '[{"op": "add", "path": "/x", "value": 1, "document": "NetworkRuleConfig"}]')
    assert info.value.hint is not None and "add the name" in info.value.hint


def test_selector_also_works_on_a_single_document() -> None:
    assert run(SINGLE, '[{"op": "add", "path": "/debug", "value": true, "document": "v1alpha1"}]')[0]["debug"]
    with pytest.raises(PatchError, match="not there"):
        run(SINGLE, '[{"op": "add", "path": "/debug", "value": true, "document": "NetworkRuleConfig/x"}]')


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ('[{"op": "remove", "path": "/machine/kubelet"}]', "can't remove a non-existent object 'kubelet'"),
        ('[{"op": "replace", "path": "/nope", "value": 1}]', "can't replace a non-existent object"),
        ('[{"op": "add", "path": "/machine/kubelet/image", "value": "x"}]', "member 'kubelet' not found"),
        ('[{"op": "add", "path": "/machine/type/x", "value": 1}]', "goes through a scalar value"),
        ('[{"op": "move", "from": "/nope", "path": "/x"}]', "not found"),
    ],
)
def test_path_that_does_not_exist(ops: str, message: str) -> None:
    with pytest.raises(PatchError) as info:
        run(SINGLE, ops)
    text = str(info.value)
    assert text.startswith("failure applying rfc6902 patches to talos machine config")
    assert message in text
    assert "clusterName" not in text  # the config itself is not dumped into the message
    assert info.value.hint is not None and "path exists" in info.value.hint


def test_failed_test_op_raises_and_changes_nothing() -> None:
    docs = load_documents(SINGLE)
    patch = load_patch(
        '[{"op": "replace", "path": "/machine/type", "value": "worker"},'
        ' {"op": "test", "path": "/cluster/clusterName", "value": "other"}]'
    )
    with pytest.raises(PatchError, match="test failed") as info:
        apply_patches(docs, [patch])
    assert info.value.hint is not None and "nothing was changed" in info.value.hint
    assert dump_documents(docs) == SINGLE


def test_replacing_the_root_with_a_scalar_is_refused() -> None:
    with pytest.raises(PatchError, match="the document became a string"):
        run(SINGLE, '[{"op": "replace", "path": "", "value": "x"}]')


def test_move_keeps_value_and_follows_new_order() -> None:
    result = run(SINGLE, '[{"op": "move", "from": "/cluster/clusterName", "path": "/machine/clusterName"}]')[
        0
    ]
    assert list(result["machine"]) == ["type", "certSANs", "network", "clusterName"]
    assert result["cluster"] == {}


def test_json_then_strategic_patches_compose() -> None:
    docs = load_documents(MULTI)
    patches = [
        load_patch(
            '[{"op": "add", "path": "/machine/network/hostname", "value": "n9", "document": "v1alpha1"}]'
        ),
        load_patch("machine:\n  certSANs: [z]\n"),
    ]
    result = to_plain(apply_patches(docs, patches))
    assert result[0]["machine"]["network"]["hostname"] == "n9"
    assert result[0]["machine"]["certSANs"][-1] == "z"
