"""Loading patches and strategic merge: Talos 1.7 rules, Ichor's ``$patch`` directives, bad patches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ichor.machinery.errors import PatchError
from ichor.machinery.patch import (
    JSONPatch,
    StrategicMergePatch,
    apply_patches,
    load_patch,
    load_patches,
)
from ichor.machinery.yamlio import dump_documents, load_documents, to_plain

BASE = """\
version: v1alpha1
debug: false
persist: true
machine:
    type: controlplane
    token: abc
    certSANs:
        - a.example
    network:
        hostname: node-a
        nameservers:
            - 1.1.1.1
        interfaces:
            - interface: eth0
              addresses:
                  - 10.0.0.2/24
              vlans:
                  - vlanId: 10
                    mtu: 1500
            - deviceSelector:
                  hardwareAddr: "00:11:*"
              dhcp: true
    install:
        disk: /dev/sda
        wipe: false
    sysctls:
        net.core.somaxconn: "1024"
    features:
        rbac: true
cluster:
    network:
        dnsDomain: cluster.local
        podSubnets:
            - 10.244.0.0/16
        serviceSubnets:
            - 10.96.0.0/12
    apiServer:
        admissionControl:
            - name: PodSecurity
              configuration:
                  defaults:
                      enforce: baseline
        auditPolicy:
            apiVersion: audit.k8s.io/v1
            kind: Policy
            rules:
                - level: Metadata
    extraManifests: []
"""

RULES = """\
apiVersion: v1alpha1
kind: NetworkRuleConfig
name: ingress-http
portSelector:
    ports:
        - 80
    protocol: tcp
ingress:
    - subnet: 10.0.0.0/8
"""


def patched(config: str, *patches: str) -> list[Any]:
    docs = load_documents(config)
    return [to_plain(d) for d in apply_patches(docs, [load_patch(p) for p in patches])]


def v1(config: str, *patches: str) -> dict[str, Any]:
    result = patched(config, *patches)[0]
    assert isinstance(result, dict)
    return result


# --- loading ---------------------------------------------------------------------------------------


def test_strategic_patch_is_detected_first() -> None:
    patch = load_patch("machine:\n  network:\n    hostname: x\n")
    assert isinstance(patch, StrategicMergePatch)
    assert to_plain(patch.documents) == [{"machine": {"network": {"hostname": "x"}}}]


def test_json_patch_as_json_and_as_yaml() -> None:
    as_json = load_patch('[{"op": "add", "path": "/machine/network/hostname", "value": "x"}]')
    as_yaml = load_patch("- op: add\n  path: /machine/network/hostname\n  value: x\n")
    assert isinstance(as_json, JSONPatch) and isinstance(as_yaml, JSONPatch)
    assert as_json.operations == as_yaml.operations  # the same operations either way
    assert as_json.operations[0].as_rfc6902() == {
        "op": "add",
        "path": "/machine/network/hostname",
        "value": "x",
    }


def test_patch_from_file_relative_to_base_dir(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("machine:\n  network:\n    hostname: from-file\n")
    patch = load_patch("@p.yaml", base_dir=tmp_path)
    assert isinstance(patch, StrategicMergePatch)
    assert patch.source == "p.yaml"
    assert v1(BASE, f"@{tmp_path / 'p.yaml'}")["machine"]["network"]["hostname"] == "from-file"


def test_bare_file_name_without_at_is_read_like_talos(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("cluster:\n  clusterName: c1\n")
    patch = load_patch("p.yaml", base_dir=tmp_path)
    assert isinstance(patch, StrategicMergePatch)


def test_consecutive_json_patches_are_joined() -> None:
    patches = load_patches(
        [
            '[{"op": "add", "path": "/a", "value": 1}]',
            '[{"op": "add", "path": "/b", "value": 2}]',
            "machine:\n  type: worker\n",
            '[{"op": "add", "path": "/c", "value": 3}]',
        ]
    )
    assert [type(p).__name__ for p in patches] == ["JSONPatch", "StrategicMergePatch", "JSONPatch"]
    first = patches[0]
    assert isinstance(first, JSONPatch)
    assert [op.path for op in first.operations] == ["/a", "/b"]


def test_empty_patch_changes_nothing() -> None:
    assert patched(BASE, "# only a comment\n") == patched(BASE)


@pytest.mark.parametrize(
    ("spec", "message", "hint"),
    [
        ("machine: [unclosed\n  x", "invalid YAML", "must be YAML config documents"),
        ("just some words", "is a string, not a config document", "strategic patch is a mapping"),
        ("42 \n", "is a number, not a config document", "strategic patch is a mapping"),
        ("foo: bar\nbaz: 1\n", "missing kind", "apiVersion"),
        ('[{"op": "frobnicate", "path": "/a"}]', "unknown op 'frobnicate'", "add, remove, replace"),
        ('[{"path": "/a"}]', "'op' is missing", "add, remove, replace"),
        ('[{"op": "add", "path": "a", "value": 1}]', "'path' must be a JSON pointer", "starting with '/'"),
        ('[{"op": "add", "path": "/a"}]', "'value' is missing", "'add' needs a 'value'"),
        ('[{"op": "move", "path": "/a"}]', "'from' must be a JSON pointer", "'move' needs 'from"),
        ('["add /a"]', "is a string, not a JSON patch operation", "each operation is a mapping"),
        (
            '[{"op": "add", "path": "/a", "value": 1, "document": "a/b/c/d"}]',
            "unknown document selector 'a/b/c/d'",
            "<kind>/<name>",
        ),
        ("machine: {}\n---\n- op: add\n", "is a list among several documents", "only document"),
        ("machine: {}\n$patch: destroy\n", "unknown directive '$patch: destroy'", "'delete' or 'replace'"),
    ],
)
def test_bad_patches_name_what_to_fix(spec: str, message: str, hint: str) -> None:
    with pytest.raises(PatchError) as info:
        load_patch(spec)
    assert message in str(info.value)
    assert info.value.hint is not None and hint in info.value.hint


def test_missing_patch_file_names_file_and_flag(tmp_path: Path) -> None:
    with pytest.raises(PatchError) as info:
        load_patch("@nope.yaml", base_dir=tmp_path, flag="--patch")
    assert "'nope.yaml'" in str(info.value) and "--patch" in str(info.value)
    assert info.value.hint is not None and "--patch" in info.value.hint


def test_patch_file_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(PatchError, match="is a directory"):
        load_patch(f"@{tmp_path}")


def test_at_without_file_name() -> None:
    with pytest.raises(PatchError, match="no file name"):
        load_patch("@")


def test_patch_file_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(PatchError, match="not UTF-8"):
        load_patch("@bin.yaml", base_dir=tmp_path)


# --- strategic merge: Talos 1.7 rules ----------------------------------------------------------------


def test_scalars_overwrite_and_maps_merge() -> None:
    result = v1(BASE, "machine:\n  network:\n    hostname: node-b\n  kubelet:\n    image: k:1\n")
    assert result["machine"]["network"]["hostname"] == "node-b"
    assert result["machine"]["kubelet"] == {"image": "k:1"}
    assert result["machine"]["type"] == "controlplane"  # untouched sibling
    assert result["machine"]["network"]["nameservers"] == ["1.1.1.1"]


def test_zero_values_are_skipped_but_false_overwrites() -> None:
    result = v1(
        BASE,
        'machine:\n  token: ""\n  install:\n    wipe: true\n  features:\n    rbac: false\n'
        "cluster:\n  network:\n    dnsDomain: null\n",
    )
    assert result["machine"]["token"] == "abc"  # "" skipped
    assert result["machine"]["install"]["wipe"] is True
    assert result["machine"]["features"]["rbac"] is False  # false overwrites
    assert result["cluster"]["network"]["dnsDomain"] == "cluster.local"  # null skipped
    config = BASE.replace(
        "        rbac: true\n", "        rbac: true\n        kubePrism:\n            port: 7445\n"
    )
    assert v1(config, "machine:\n  features:\n    kubePrism:\n      port: 0\n")["machine"]["features"][
        "kubePrism"
    ] == {"port": 7445}  # a zero number is skipped too
    assert v1(BASE, "persist: false\n")["persist"] is False


def test_empty_list_and_map_change_nothing_where_a_value_exists() -> None:
    result = v1(BASE, "machine:\n  certSANs: []\n  sysctls: {}\n")
    assert result["machine"]["certSANs"] == ["a.example"]
    assert result["machine"]["sysctls"] == {"net.core.somaxconn": "1024"}
    assert v1(BASE, "machine:\n  nodeLabels: {}\n")["machine"]["nodeLabels"] == {}


def test_lists_append_in_order() -> None:
    result = v1(
        BASE, "machine:\n  certSANs: [b.example, c.example]\n  network:\n    nameservers: [8.8.8.8]\n"
    )
    assert result["machine"]["certSANs"] == ["a.example", "b.example", "c.example"]
    assert result["machine"]["network"]["nameservers"] == ["1.1.1.1", "8.8.8.8"]
    assert v1(BASE, "cluster:\n  extraManifests: [https://x/y.yaml]\n")["cluster"]["extraManifests"] == [
        "https://x/y.yaml"
    ]


def test_replace_fields_replace_the_whole_list() -> None:
    result = v1(
        BASE,
        "cluster:\n  network:\n    podSubnets: [10.1.0.0/16]\n    serviceSubnets: [10.2.0.0/16, fd00::/108]\n",
    )
    assert result["cluster"]["network"]["podSubnets"] == ["10.1.0.0/16"]
    assert result["cluster"]["network"]["serviceSubnets"] == ["10.2.0.0/16", "fd00::/108"]
    assert v1(BASE, "cluster:\n  network:\n    podSubnets: []\n")["cluster"]["network"]["podSubnets"] == []


def test_audit_policy_is_replaced_as_a_whole() -> None:
    result = v1(BASE, "cluster:\n  apiServer:\n    auditPolicy:\n      rules:\n        - level: None\n")
    assert result["cluster"]["apiServer"]["auditPolicy"] == {"rules": [{"level": "None"}]}


def test_network_rule_ingress_and_ports_are_replaced() -> None:
    patch = (
        "apiVersion: v1alpha1\nkind: NetworkRuleConfig\nname: ingress-http\n"
        "portSelector:\n  ports: [443]\ningress:\n  - subnet: 192.168.0.0/16\n"
    )
    config = BASE + "---\n" + RULES
    rules = patched(config, patch)[1]
    assert rules["portSelector"] == {"ports": [443], "protocol": "tcp"}
    assert rules["ingress"] == [{"subnet": "192.168.0.0/16"}]


def test_interfaces_merge_by_interface_name() -> None:
    result = v1(
        BASE,
        "machine:\n  network:\n    interfaces:\n"
        "      - interface: eth0\n        mtu: 9000\n        addresses: [10.0.0.3/24]\n"
        "      - interface: eth1\n        dhcp: true\n",
    )
    interfaces = result["machine"]["network"]["interfaces"]
    assert [i.get("interface") for i in interfaces] == ["eth0", None, "eth1"]
    assert interfaces[0]["mtu"] == 9000
    # inside a matched interface the ordinary rules apply: addresses append (Talos does this too)
    assert interfaces[0]["addresses"] == ["10.0.0.2/24", "10.0.0.3/24"]


def test_interfaces_merge_by_equal_device_selector() -> None:
    result = v1(
        BASE,
        "machine:\n  network:\n    interfaces:\n"
        '      - deviceSelector: {hardwareAddr: "00:11:*"}\n        mtu: 1400\n'
        '      - deviceSelector: {hardwareAddr: "00:22:*"}\n        dhcp: true\n',
    )
    interfaces = result["machine"]["network"]["interfaces"]
    assert len(interfaces) == 3
    assert interfaces[1] == {"deviceSelector": {"hardwareAddr": "00:11:*"}, "dhcp": True, "mtu": 1400}
    assert interfaces[2]["deviceSelector"] == {"hardwareAddr": "00:22:*"}


def test_vlans_merge_by_vlan_id() -> None:
    result = v1(
        BASE,
        "machine:\n  network:\n    interfaces:\n      - interface: eth0\n        vlans:\n"
        "          - vlanId: 10\n            mtu: 9000\n          - vlanId: 20\n            dhcp: true\n",
    )
    vlans = result["machine"]["network"]["interfaces"][0]["vlans"]
    assert vlans == [{"vlanId": 10, "mtu": 9000}, {"vlanId": 20, "dhcp": True}]


def test_admission_control_merges_by_name() -> None:
    result = v1(
        BASE,
        "cluster:\n  apiServer:\n    admissionControl:\n"
        "      - name: PodSecurity\n        configuration:\n          defaults:\n            audit: restricted\n"
        "      - name: EventRateLimit\n        configuration: {}\n",
    )
    plugins = result["cluster"]["apiServer"]["admissionControl"]
    assert [p["name"] for p in plugins] == ["PodSecurity", "EventRateLimit"]
    assert plugins[0]["configuration"]["defaults"] == {"enforce": "baseline", "audit": "restricted"}


def test_documents_match_by_identity_and_unmatched_are_appended() -> None:
    config = BASE + "---\n" + RULES
    other_rule = RULES.replace("ingress-http", "ingress-ssh")
    watchdog = "apiVersion: v1alpha1\nkind: WatchdogTimerConfig\ndevice: /dev/watchdog0\n"
    result = patched(config, other_rule + "---\n" + watchdog)
    assert [(d.get("kind"), d.get("name")) for d in result] == [
        (None, None),
        ("NetworkRuleConfig", "ingress-http"),
        ("NetworkRuleConfig", "ingress-ssh"),
        ("WatchdogTimerConfig", None),
    ]


def test_wrong_type_in_strategic_patch_names_the_key() -> None:
    with pytest.raises(PatchError) as info:
        patched(BASE, "machine:\n  network:\n    interfaces:\n      eth0: {mtu: 1}\n")
    assert "machine.network.interfaces" in str(info.value)
    assert "the config has a list here but the patch has a mapping" in str(info.value)
    assert info.value.hint is not None and "make 'machine.network.interfaces' a list" in info.value.hint
    with pytest.raises(PatchError, match="the config has a mapping here but the patch has a string"):
        patched(BASE, "machine:\n  network: eth0\n")


def test_comments_and_key_order_survive_a_merge() -> None:
    config = (
        "# top comment\nversion: v1alpha1\nmachine:\n    type: worker # the role\n"
        "    # the network\n    network:\n        hostname: a # name\n    token: t\n"
    )
    docs = load_documents(config)
    out = dump_documents(apply_patches(docs, [load_patch("machine:\n  network:\n    hostname: b\n")]))
    assert out == config.replace("hostname: a # name", "hostname: b # name")


def test_input_documents_and_patch_are_not_mutated() -> None:
    docs = load_documents(BASE)
    before = dump_documents(docs)
    patch = load_patch(
        "machine:\n  certSANs: [z]\n  network:\n    interfaces:\n      - interface: eth0\n        mtu: 1\n"
    )
    assert isinstance(patch, StrategicMergePatch)
    patch_before = dump_documents(patch.documents)
    apply_patches(docs, [patch])
    apply_patches(docs, [patch])
    assert dump_documents(docs) == before
    assert dump_documents(patch.documents) == patch_before


def test_applying_the_same_strategic_patch_twice() -> None:
    """Lists append twice (as in Talos); replace and merge-by-key fields come out identical."""
    patch = (
        "machine:\n  certSANs: [b.example]\n  network:\n    interfaces:\n      - interface: eth0\n        mtu: 9000\n"
        "cluster:\n  network:\n    podSubnets: [10.1.0.0/16]\n"
        "  apiServer:\n    admissionControl:\n      - name: PodSecurity\n        configuration: {x: 1}\n"
    )
    once = v1(BASE, patch)
    twice = v1(BASE, patch, patch)
    assert once["machine"]["certSANs"] == ["a.example", "b.example"]
    assert twice["machine"]["certSANs"] == ["a.example", "b.example", "b.example"]
    for section in (("machine", "network", "interfaces"), ("cluster", "network"), ("cluster", "apiServer")):
        a: Any = once
        b: Any = twice
        for key in section:
            a, b = a[key], b[key]
        assert a == b


# --- Ichor's $patch directives ------------------------------------------------------------------------


def test_patch_delete_removes_a_key() -> None:
    result = v1(
        BASE, "machine:\n  install:\n    $patch: delete\n  network:\n    hostname: {$patch: delete}\n"
    )
    assert "install" not in result["machine"]
    assert "hostname" not in result["machine"]["network"]
    assert v1(BASE, "machine:\n  kubelet: {$patch: delete}\n") == v1(BASE)  # absent: nothing to do


def test_patch_replace_replaces_instead_of_merging() -> None:
    result = v1(BASE, "machine:\n  sysctls:\n    $patch: replace\n    vm.max_map_count: '262144'\n")
    assert result["machine"]["sysctls"] == {"vm.max_map_count": "262144"}
    result = v1(BASE, "machine:\n  certSANs:\n    - $patch: replace\n    - z.example\n")
    assert result["machine"]["certSANs"] == ["z.example"]


def test_patch_delete_list_item_by_merge_key() -> None:
    result = v1(
        BASE,
        "machine:\n  network:\n    interfaces:\n      - interface: eth0\n        $patch: delete\n"
        "cluster:\n  apiServer:\n    admissionControl:\n      - {name: PodSecurity, $patch: delete}\n",
    )
    assert [i.get("interface") for i in result["machine"]["network"]["interfaces"]] == [None]
    assert result["cluster"]["apiServer"]["admissionControl"] == []


def test_patch_delete_vlan_and_device_selector_items() -> None:
    result = v1(
        BASE,
        "machine:\n  network:\n    interfaces:\n"
        "      - interface: eth0\n        vlans:\n          - {vlanId: 10, $patch: delete}\n"
        '      - deviceSelector: {hardwareAddr: "00:11:*"}\n        $patch: delete\n',
    )
    interfaces = result["machine"]["network"]["interfaces"]
    assert len(interfaces) == 1 and interfaces[0]["vlans"] == []


def test_patch_delete_scalar_and_mapping_items_of_plain_lists() -> None:
    result = v1(
        BASE,
        "machine:\n  certSANs:\n    - {$patch: delete, $value: a.example}\n    - b.example\n"
        "cluster:\n  apiServer:\n    auditPolicy:\n      rules:\n        - {level: None}\n",
    )
    assert result["machine"]["certSANs"] == ["b.example"]
    result = v1(
        BASE
        + "    inlineManifests:\n        - name: a\n          contents: x\n        - name: b\n          contents: y\n",
        "cluster:\n  inlineManifests:\n    - {name: a, $patch: delete}\n",
    )
    assert result["cluster"]["inlineManifests"] == [{"name": "b", "contents": "y"}]


def test_patch_delete_item_without_identity_is_refused() -> None:
    with pytest.raises(PatchError, match="does not say which item to delete") as info:
        patched(BASE, "machine:\n  certSANs:\n    - $patch: delete\n")
    assert info.value.hint is not None and "$value" in info.value.hint
    with pytest.raises(PatchError, match="does not say which item") as info:
        patched(BASE, "machine:\n  network:\n    interfaces:\n      - {mtu: 1, $patch: delete}\n")
    assert info.value.hint is not None and "interface or deviceSelector" in info.value.hint


def test_patch_delete_whole_document() -> None:
    config = BASE + "---\n" + RULES
    result = patched(
        config, "apiVersion: v1alpha1\nkind: NetworkRuleConfig\nname: ingress-http\n$patch: delete\n"
    )
    assert len(result) == 1 and "machine" in result[0]
    # deleting it again changes nothing
    again = patched(
        BASE, "apiVersion: v1alpha1\nkind: NetworkRuleConfig\nname: ingress-http\n$patch: delete\n"
    )
    assert again == patched(BASE)


def test_patch_replace_whole_document() -> None:
    config = BASE + "---\n" + RULES
    result = patched(
        config,
        "apiVersion: v1alpha1\nkind: NetworkRuleConfig\nname: ingress-http\n$patch: replace\n"
        "portSelector: {ports: [22], protocol: tcp}\n",
    )
    assert result[1] == {
        "apiVersion": "v1alpha1",
        "kind": "NetworkRuleConfig",
        "name": "ingress-http",
        "portSelector": {"ports": [22], "protocol": "tcp"},
    }


def test_directives_inside_new_content_are_resolved() -> None:
    result = v1(BASE, "machine:\n  kubelet:\n    image: k\n    extraArgs: {$patch: delete}\n")
    assert result["machine"]["kubelet"] == {"image": "k"}
    with pytest.raises(PatchError, match="unknown directive"):
        patched(BASE, "machine:\n  kubelet:\n    extraArgs: {$patch: nuke}\n")


def test_plain_dict_documents_are_accepted() -> None:
    docs: list[Any] = [{"version": "v1alpha1", "machine": {"certSANs": ["a"], "type": "worker"}}]
    patches = [
        load_patch("machine:\n  certSANs: [b]\n"),
        load_patch('[{"op": "remove", "path": "/machine/type"}]'),
    ]
    assert to_plain(apply_patches(docs, patches)) == [
        {"version": "v1alpha1", "machine": {"certSANs": ["a", "b"]}}
    ]
    assert docs == [{"version": "v1alpha1", "machine": {"certSANs": ["a"], "type": "worker"}}]
