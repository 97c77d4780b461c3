"""``machine.kubelet.credentialProviderConfig`` (002:684-686) as Talos 1.7 honours it: the file under
``/etc/kubernetes`` (typed, durations in Go's form, removed when the key goes), the two kubelet flags
(over ``extraArgs``), the credential providers' directory mounted into the kubelet when the node has
it, a wrong value a wait naming the key; Go durations parsed and printed as Go does."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from controller_helpers import apply, run, running
from hypothesis import given
from hypothesis import strategies as st

from ichor.machined.controllers.k8s import kubelet as area
from ichor.machined.controllers.k8s import kubelet_credentials as credentials
from ichor.machined.controllers.k8s import kubelet_render as render
from ichor.machined.cosi import WAIT_STATUSES, assert_resource
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import HOSTNAME_STATUS_ID, HOSTNAME_STATUSES, HostnameStatusSpec
from ichor.machined.resources import _protoenc as protoenc
from ichor.machined.resources._kubelet import (
    KUBELET_CONFIGS,
    KUBELET_SPECS,
    KubeletConfigSpec,
    KubeletSpecSpec,
)
from ichor.machined.services import kubelet as service
from ichor.machinery import pki, yamlio
from ichor.machinery.errors import ConfigError

CA = pki.new_ed25519_ca(organization="kubernetes", ttl=timedelta(days=1))
ECR = {  # Talos 1.7's documented example (kubeletCredentialProviderConfigExample)
    "apiVersion": "kubelet.config.k8s.io/v1",
    "kind": "CredentialProviderConfig",
    "providers": [
        {
            "name": "ecr-credential-provider",
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "matchImages": ["*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr.*.amazonaws.com.cn"],
            "defaultCacheDuration": "12h",
        }
    ],
}
FLAGS = (
    "--image-credential-provider-bin-dir=/usr/local/lib/kubelet/credentialproviders",
    "--image-credential-provider-config=/etc/kubernetes/kubelet-credentialproviderconfig.yaml",
)


# --- Go durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_text", "printed"),
    [("12h", "12h0m0s"), ("0", "0s"), ("0s", "0s"), ("90s", "1m30s"), ("1.5h", "1h30m0s"), ("300ms", "300ms"),
     ("1.5us", "1.5µs"), ("2h45m0.5s", "2h45m0.5s"), ("-2m", "-2m0s"), ("1000ns", "1µs"), ("+5m", "5m0s")],
)  # fmt: skip
def test_go_durations_print_as_go_prints_them(given_text: str, printed: str) -> None:
    assert credentials.format_go_duration(credentials.parse_go_duration(given_text)) == printed


@pytest.mark.parametrize(
    ("text", "error"),
    [("1", 'time: missing unit in duration "1"'), ("1d", 'time: unknown unit "d" in duration "1d"'),
     ("", 'time: invalid duration ""'), (".s", 'time: invalid duration ".s"'),
     ("1hm", 'time: unknown unit "hm" in duration "1hm"'), ("99999999999h", 'time: invalid duration "99999999999h"')],
)  # fmt: skip
def test_go_duration_errors_are_gos(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        credentials.parse_go_duration(text)


@given(st.integers(min_value=-(1 << 63) + 1, max_value=(1 << 63) - 1))
def test_a_printed_duration_parses_back_to_itself(nanoseconds: int) -> None:
    assert credentials.parse_go_duration(credentials.format_go_duration(nanoseconds)) == nanoseconds


# --- the file and the flags --------------------------------------------------------------------


def test_the_file_is_the_typed_config_with_sorted_keys_and_go_durations() -> None:
    config = {**ECR, "unknown": 1, "providers": [{**ECR["providers"][0], "extra": "dropped"}]}  # type: ignore[dict-item]
    assert credentials.render_credential_provider_config(config) == (
        "apiVersion: kubelet.config.k8s.io/v1\n"
        "kind: CredentialProviderConfig\n"
        "providers:\n"
        "- apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        "  defaultCacheDuration: 12h0m0s\n"
        "  matchImages:\n"
        "  - '*.dkr.ecr.*.amazonaws.com'\n"
        "  - '*.dkr.ecr.*.amazonaws.com.cn'\n"
        "  name: ecr-credential-provider\n"
    )


def test_absent_fields_are_written_as_the_kubelets_type_writes_them() -> None:
    typed = credentials.typed_credential_provider_config(
        {"providers": [{"name": "p", "args": ["-v"], "env": [{"name": "A", "value": "1"}]}]}
    )
    assert typed == {"providers": [{"apiVersion": "", "args": ["-v"], "defaultCacheDuration": None,
                                    "env": [{"name": "A", "value": "1"}], "matchImages": None, "name": "p"}]}  # fmt: skip
    assert credentials.render_credential_provider_config({"kind": ""}) == "providers: null\n"
    assert "defaultCacheDuration: null" in credentials.render_credential_provider_config(
        {"providers": [{"name": "p"}]}
    )


@pytest.mark.parametrize(
    ("config", "key"),
    [({"providers": {"name": "p"}}, "credentialProviderConfig.providers: expected a list"),
     ({"providers": ["p"]}, "providers[0]: expected a mapping"),
     ({"providers": [{"matchImages": "x.io"}]}, "providers[0].matchImages: expected a list of strings"),
     ({"providers": [{"matchImages": ["x", 3]}]}, "providers[0].matchImages[1]: expected a string"),
     ({"providers": [{"defaultCacheDuration": 60}]}, "providers[0].defaultCacheDuration: expected a duration"),
     ({"providers": [{"defaultCacheDuration": "1d"}]}, 'unknown unit "d"'),
     ({"providers": [{"env": {"A": "1"}}]}, "providers[0].env: expected a list"),
     ({"kind": 5}, "credentialProviderConfig.kind: expected a string")],
)  # fmt: skip
def test_a_value_of_the_wrong_type_is_refused_naming_its_key(config: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")) as err:
        credentials.typed_credential_provider_config(config)
    assert "machine.kubelet.credentialProviderConfig" in str(err.value)


def test_the_flags_come_with_the_config_and_override_extra_args() -> None:
    plain = KubeletConfigSpec(extra_args={"image-credential-provider-config": "/mine.yaml"})
    args = render.kubelet_args(plain, nodename="n", node_ips=())
    assert "--image-credential-provider-config=/mine.yaml" in args
    assert not any(a.startswith("--image-credential-provider-bin-dir") for a in args)
    configured = KubeletConfigSpec(extra_args=dict(plain.extra_args), credential_provider_config=ECR)
    args = render.kubelet_args(configured, nodename="n", node_ips=())
    assert set(FLAGS) <= set(args) and "--image-credential-provider-config=/mine.yaml" not in args
    assert list(args) == sorted(args)


def test_the_kubelet_gets_the_providers_directory_only_when_the_node_has_it(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "10.5.0.2", platform=Platform.CONTAINER)
    spec = KubeletSpecSpec(image="ghcr.io/siderolabs/kubelet:v1.30.3")
    mounts = {m["destination"]: m for m in service.runtime_spec(spec, layout)["mounts"]}
    assert mounts[credentials.BIN_DIR]["options"] == ["bind", "ro"]
    destinations = [m["destination"] for m in service.runtime_spec(spec, layout)["mounts"]]
    assert (
        destinations.index(credentials.BIN_DIR) == destinations.index("/etc/kubernetes") + 1
    )  # Talos's order
    kept = service.without_missing_sources(service.runtime_spec(spec, layout))["mounts"]
    assert credentials.BIN_DIR not in [m["destination"] for m in kept]
    layout.path(credentials.BIN_DIR).mkdir(parents=True)
    kept = service.without_missing_sources(service.runtime_spec(spec, layout))["mounts"]
    assert credentials.BIN_DIR in [m["destination"] for m in kept]


# --- through the controllers -------------------------------------------------------------------


def _config(kubelet: str) -> str:
    ca = base64.b64encode(CA.crt).decode()
    return (
        f"version: v1alpha1\nmachine:\n  type: worker\n  token: abc.def\n  kubelet: {kubelet}\n"
        f"cluster:\n  controlPlane: {{endpoint: 'https://10.0.0.1:6443'}}\n  token: 'abcdef.0123456789abcdef'\n"
        f"  ca: {{crt: {ca}, key: ''}}\n"
    )


_PROVIDERS = (
    "{credentialProviderConfig: {apiVersion: kubelet.config.k8s.io/v1, kind: CredentialProviderConfig, "
    "providers: [{name: my-provider, apiVersion: credentialprovider.kubelet.k8s.io/v1, "
    "matchImages: ['registry.lab'], defaultCacheDuration: 30m}]}, extraArgs: {node-ip: 10.5.0.2}}"
)


async def _until(check: Callable[[], bool], timeout: float = 4.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


def test_the_config_reaches_the_kubelet_and_leaves_with_the_key(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "10.5.0.2", platform=Platform.CONTAINER)
    restarts: list[int] = []

    async def changed() -> None:
        restarts.append(1)

    async def main() -> None:
        async with running(*area.kubelet_controllers(layout, on_change=changed)) as state:
            state.create(HOSTNAME_STATUSES.new(HOSTNAME_STATUS_ID, HostnameStatusSpec("w-1", "")))
            apply(state, _config(_PROVIDERS))
            config = await assert_resource(
                state, KUBELET_CONFIGS, "kubelet", lambda r: bool(r.spec.credential_provider_config)
            )
            assert config.spec.credential_provider_config["providers"][0]["name"] == "my-provider"
            spec = await assert_resource(
                state, KUBELET_SPECS, "kubelet", lambda r: set(FLAGS) <= set(r.spec.args)
            )
            assert spec.spec.credential_provider_config == config.spec.credential_provider_config
            written = layout.path(credentials.CONFIG_FILE)
            await _until(written.is_file)
            assert (written.stat().st_mode & 0o777) == 0o600
            assert "defaultCacheDuration: 30m0s\n" in written.read_text()
            assert "- registry.lab\n" in written.read_text()
            # A value of the wrong type: a wait naming the key; what the kubelet runs with stays.
            apply(state, _config(_PROVIDERS.replace("defaultCacheDuration: 30m", "defaultCacheDuration: 30")))
            await assert_resource(
                state, WAIT_STATUSES, "k8s.KubeletSpecController",
                lambda r: "machine.kubelet.credentialProviderConfig.providers[0].defaultCacheDuration" in r.spec.reason,
            )  # fmt: skip
            assert set(FLAGS) <= set(state.get("k8s", KUBELET_SPECS, "kubelet").spec.args)
            # The key removed: no flags, the file goes, the kubelet is restarted.
            before = len(restarts)
            apply(state, _config("{extraArgs: {node-ip: 10.5.0.2}}"))
            await assert_resource(
                state, KUBELET_SPECS, "kubelet", lambda r: not any("credential" in a for a in r.spec.args)
            )
            await _until(lambda: not written.exists() and len(restarts) > before)
            assert layout.path(render.CONFIG_FILE).is_file()

    run(main)


def test_the_resources_carry_the_config_under_talos_yaml_key() -> None:
    from ichor.machined.cosi._resource import spec_to_plain

    plain = spec_to_plain(KubeletSpecSpec(credential_provider_config={"kind": "CredentialProviderConfig"}))
    assert plain["credentialProviderConfig"] == {"kind": "CredentialProviderConfig"}
    assert "credentialProviderConfig" not in spec_to_plain(KubeletConfigSpec())
    assert yamlio.to_plain(plain) == plain
    # Talos's typed form: field 6 of KubeletSpecSpec, 13 of KubeletConfigSpec (google.protobuf.Struct)
    for type_name, spec, number in (
        ("KubeletSpecs.kubernetes.talos.dev", KubeletSpecSpec(credential_provider_config=ECR), 6),
        ("KubeletConfigs.kubernetes.talos.dev", KubeletConfigSpec(credential_provider_config=ECR), 13),
    ):
        data = protoenc.encode_spec(type_name, spec)
        assert data is not None
        message = protoenc.message_class(protoenc.SPEC_MESSAGES[type_name])()
        message.ParseFromString(data)
        field = message.DESCRIPTOR.fields_by_name["credential_provider_config"]
        assert field.number == number
        assert message.credential_provider_config["providers"][0]["name"] == "ecr-credential-provider"
