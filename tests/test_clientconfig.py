"""talosconfig files: Talos's layout, lossless round trips, merges and where the file is looked up."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ichor.machinery import clientconfig
from ichor.machinery.clientconfig import Context, TalosConfig, default_talosconfig_path, find_talosconfig
from ichor.machinery.errors import ClientConfigError, MachineryError

TALOSCONFIG = """\
context: prod
contexts:
    dev:
        endpoints: []
        ca: Y2E=
        crt: Y3J0
        key: a2V5
    prod:
        endpoints:
            - 10.0.0.2
            - 10.0.0.3
        nodes:
            - 10.0.0.4
        ca: Y2E=
        crt: Y3J0
        key: a2V5
        auth:
            siderov1:
                identity: me@example.com
        cluster: east
        futurefield: kept
"""


def test_round_trip_is_lossless() -> None:
    cfg = TalosConfig.from_yaml(TALOSCONFIG, source="talosconfig")
    assert cfg.context == "prod"
    prod = cfg.contexts["prod"]
    assert prod.endpoints == ["10.0.0.2", "10.0.0.3"] and prod.nodes == ["10.0.0.4"]
    assert prod.cluster == "east" and prod.auth == {"siderov1": {"identity": "me@example.com"}}
    assert prod.extra == {"futurefield": "kept"}
    assert cfg.to_yaml() == TALOSCONFIG


def test_written_layout_matches_talos() -> None:
    cfg = TalosConfig(context="b", contexts={"b": Context(ca="Q0E="), "a": Context(endpoints=["1.2.3.4"])})
    assert cfg.to_yaml() == (
        "context: b\n"
        "contexts:\n"
        "    a:\n"
        "        endpoints:\n"
        "            - 1.2.3.4\n"
        "    b:\n"
        "        endpoints: []\n"
        "        ca: Q0E=\n"
    )
    assert TalosConfig().to_yaml() == 'context: ""\ncontexts: {}\n'


def test_deprecated_target_becomes_an_endpoint() -> None:
    cfg = TalosConfig.from_yaml(
        "context: a\ncontexts:\n  a:\n    target: 10.0.0.9\n    endpoints: [10.0.0.1]\n"
    )
    assert cfg.contexts["a"].endpoints == ["10.0.0.1", "10.0.0.9"]
    assert "target" not in cfg.to_yaml()


def test_empty_file_is_an_empty_config() -> None:
    assert TalosConfig.from_yaml("") == TalosConfig()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n", "single YAML mapping"),
        ("contexts: [a]\n", "contexts must be a mapping"),
        ("contexts:\n  a: 3\n", "contexts.a must be a mapping"),
        ("contexts:\n  a:\n    endpoints: 1.2.3.4\n", "contexts.a.endpoints must be a list of strings"),
        ("contexts:\n  a:\n    ca: [x]\n", "contexts.a.ca must be a string"),
        ("context: [x]\n", "context must be a string"),
    ],
)
def test_malformed_files(text: str, message: str) -> None:
    with pytest.raises(ClientConfigError, match=message):
        TalosConfig.from_yaml(text, source="tc")


def test_save_is_0600_and_creates_a_private_directory(tmp_path: Path) -> None:
    path = tmp_path / "new" / "config"
    TalosConfig.from_yaml(TALOSCONFIG).save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert TalosConfig.load(path).to_yaml() == TALOSCONFIG


def test_load_missing_file_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match="does not exist") as err:
        TalosConfig.load(tmp_path / "nope")
    assert err.value.hint and "--talosconfig" in err.value.hint and "TALOSCONFIG" in err.value.hint


def test_get_current_and_unknown_contexts() -> None:
    cfg = TalosConfig.from_yaml(TALOSCONFIG)
    assert cfg.get()[0] == "prod"
    assert cfg.get("dev")[0] == "dev"
    with pytest.raises(ClientConfigError, match="context 'qa' is not defined") as err:
        cfg.get("qa")
    assert err.value.hint == "defined contexts: dev, prod"
    with pytest.raises(ClientConfigError, match="no context is set"):
        TalosConfig(contexts=cfg.contexts).get()


def test_merge_renames_clashes_and_switches_context() -> None:
    cfg = TalosConfig(context="a", contexts={"a": Context(ca="1"), "a-1": Context(ca="2"), "b": Context()})
    other = TalosConfig(context="a", contexts={"a": Context(ca="3"), "c": Context(ca="4")})
    messages = cfg.merge(other)
    assert messages == ['renamed talosconfig context "a" -> "a-2"']
    assert cfg.context == "a-2"
    assert cfg.contexts["a"].ca == "1" and cfg.contexts["a-2"].ca == "3" and cfg.contexts["c"].ca == "4"
    again = cfg.merge(TalosConfig(context=None, contexts={"c": Context(ca="5")}))
    assert again == ['renamed talosconfig context "c" -> "c-1"']
    assert cfg.context == "a-2"


names = st.text(alphabet="ab-1", min_size=1, max_size=4)


@given(
    st.dictionaries(names, st.integers(), max_size=6),
    st.dictionaries(names, st.integers(), max_size=6),
)
def test_merge_keeps_every_context(left: dict[str, int], right: dict[str, int]) -> None:
    cfg = TalosConfig(contexts={k: Context(ca=f"L{v}") for k, v in left.items()})
    other = TalosConfig(contexts={k: Context(ca=f"R{v}") for k, v in right.items()})
    cfg.merge(other)
    assert len(cfg.contexts) == len(left) + len(right)
    assert sorted(c.ca for c in cfg.contexts.values()) == sorted(
        [f"L{v}" for v in left.values()] + [f"R{v}" for v in right.values()]
    )
    for name, value in left.items():
        assert cfg.contexts[name].ca == f"L{value}"


# --- lookup ---------------------------------------------------------------------------------


@pytest.fixture
def service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "sa" / "config"
    monkeypatch.setattr(clientconfig, "SERVICE_ACCOUNT_TALOSCONFIG", path)
    return path


def test_lookup_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service_account: Path, _isolated_home: Path
) -> None:
    home_config = _isolated_home / ".talos" / "config"
    env_config = tmp_path / "env-config"

    # Nothing exists: the default writable path.
    assert default_talosconfig_path(None) == home_config
    # The read-only service-account file is used when it is the only one.
    service_account.parent.mkdir()
    service_account.write_text("")
    found = find_talosconfig(None)
    assert found.path == service_account and not found.write_allowed
    # ~/.talos/config beats it.
    home_config.parent.mkdir()
    home_config.write_text("")
    assert default_talosconfig_path(None) == home_config
    # $TALOSCONFIG beats both once it exists; while it does not, Talos falls through to the next.
    monkeypatch.setenv("TALOSCONFIG", str(env_config))
    assert default_talosconfig_path(None) == home_config
    env_config.write_text("")
    found = find_talosconfig(None)
    assert found.path == env_config and found.source == "$TALOSCONFIG"
    # The flag beats everything, existing or not.
    assert default_talosconfig_path(str(tmp_path / "flag")) == tmp_path / "flag"


def test_talosconfig_env_is_the_default_target_when_nothing_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service_account: Path
) -> None:
    monkeypatch.setenv("TALOSCONFIG", str(tmp_path / "mine"))
    assert find_talosconfig(None).path == tmp_path / "mine"


def test_service_account_file_is_never_written(service_account: Path) -> None:
    with pytest.raises(ClientConfigError, match="not allowed to write to config"):
        TalosConfig().save(service_account)
    assert not service_account.exists()


def test_unwritable_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(MachineryError, match="cannot"):
        TalosConfig().save(blocker / "sub" / "config")


def test_client_certificate_errors() -> None:
    with pytest.raises(ClientConfigError, match="no client certificate"):
        Context().client_certificate()
    with pytest.raises(ClientConfigError, match="not valid base64"):
        Context(crt="!!!").client_certificate()


def test_xdg_config_home_lookup_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service_account: Path, _isolated_home: Path
) -> None:
    home_config = _isolated_home / ".talos" / "config"
    xdg_config = tmp_path / "xdg" / "talos" / "config.yaml"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    # Nothing exists: the XDG file is where a new talosconfig goes.
    found = find_talosconfig(None)
    assert found.path == xdg_config and found.source == "$XDG_CONFIG_HOME" and found.write_allowed
    # An existing ~/.talos/config is still used while the XDG file does not exist ...
    home_config.parent.mkdir()
    home_config.write_text("")
    assert default_talosconfig_path(None) == home_config
    # ... and the XDG file wins once it does.
    xdg_config.parent.mkdir(parents=True)
    xdg_config.write_text("")
    assert default_talosconfig_path(None) == xdg_config
    # $TALOSCONFIG (existing) beats it.
    env_config = tmp_path / "env-config"
    env_config.write_text("")
    monkeypatch.setenv("TALOSCONFIG", str(env_config))
    assert default_talosconfig_path(None) == env_config
    # A relative or empty $XDG_CONFIG_HOME is ignored, as the XDG spec says.
    monkeypatch.delenv("TALOSCONFIG")
    for value in ("relative/dir", ""):
        monkeypatch.setenv("XDG_CONFIG_HOME", value)
        assert default_talosconfig_path(None) == home_config
