"""``talosctl config ...`` sub-commands, including what users see when they get something wrong."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ichor.cli._config import _humanize, _table
from ichor.machinery.clientconfig import Context, TalosConfig, issue_admin_context
from ichor.machinery.contract import VersionContract
from ichor.machinery.secrets import SecretsBundle


@pytest.fixture(scope="module")
def bundle() -> SecretsBundle:
    return SecretsBundle.generate(VersionContract.parse("v1.6"))


@pytest.fixture
def home_config(_isolated_home: Path, bundle: SecretsBundle) -> Path:
    """~/.talos/config with contexts ``a`` (current) and ``b``."""
    admin = issue_admin_context(bundle, endpoints=["10.0.0.2"], nodes=["10.0.0.5"])
    cfg = TalosConfig(context="a", contexts={"a": admin, "b": Context(endpoints=["10.1.0.2"])})
    path = _isolated_home / ".talos" / "config"
    cfg.save(path)
    return path


def _load(path: Path) -> TalosConfig:
    return TalosConfig.load(path)


def test_endpoint_and_node(talosctl, home_config: Path) -> None:
    r = talosctl("config", "endpoint", "10.0.0.7", " 10.0.0.8 ")
    assert r.exit_code == 0, r.stderr
    assert _load(home_config).contexts["a"].endpoints == ["10.0.0.7", "10.0.0.8"]
    assert talosctl("config", "nodes", "n1", "n2").exit_code == 0
    assert _load(home_config).contexts["a"].nodes == ["n1", "n2"]
    assert talosctl("config", "endpoints", "e9", "--context", "b").exit_code == 0
    cfg = _load(home_config)
    assert cfg.contexts["b"].endpoints == ["e9"] and cfg.context == "a"
    assert talosctl("config", "node").exit_code == 0  # Talos: no args clears the nodes
    assert _load(home_config).contexts["a"].nodes == []
    assert stat.S_IMODE(home_config.stat().st_mode) == 0o600


def test_endpoint_needs_a_value(talosctl, home_config: Path) -> None:
    before = home_config.read_text()
    r = talosctl("config", "endpoint")
    assert r.exit_code == 2
    r = talosctl("config", "endpoint", " ", "")
    assert r.exit_code == 1 and "no endpoints given" in r.stderr and "hint:" in r.stderr
    assert home_config.read_text() == before


def test_unknown_context_lists_known_ones(talosctl, home_config: Path) -> None:
    before = home_config.read_text()
    r = talosctl("config", "endpoint", "1.1.1.1", "--context", "zzz")
    assert r.exit_code == 1
    assert "error: context 'zzz' is not defined" in r.stderr and "hint: defined contexts: a, b" in r.stderr
    r = talosctl("config", "context", "zzz")
    assert r.exit_code == 1 and "defined contexts: a, b" in r.stderr
    assert home_config.read_text() == before


def test_missing_talosconfig_names_the_path(talosctl, tmp_path: Path, _isolated_home: Path) -> None:
    r = talosctl("config", "contexts")
    assert r.exit_code == 1
    assert str(_isolated_home / ".talos" / "config") in r.stderr
    assert "--talosconfig" in r.stderr and "$TALOSCONFIG" in r.stderr
    r = talosctl("config", "info", "--talosconfig", str(tmp_path / "x"))
    assert r.exit_code == 1 and str(tmp_path / "x") in r.stderr
    assert not (tmp_path / "x").exists()


def test_context_switch_and_alias(talosctl, home_config: Path) -> None:
    assert talosctl("config", "context", "b").exit_code == 0
    assert _load(home_config).context == "b"
    assert talosctl("config", "use-context", "a").exit_code == 0
    assert _load(home_config).context == "a"


def test_contexts_table(talosctl, home_config: Path) -> None:
    talosctl("config", "node", "n1", "n2", "n3", "n4")
    r = talosctl("config", "get-contexts")
    assert r.exit_code == 0
    assert r.stdout == (
        "CURRENT   NAME   ENDPOINTS   NODES\n*         a      10.0.0.2    n1,n2,n3...\n          b      10.1.0.2    \n"
    )


def test_table_pads_like_tabwriter() -> None:
    assert _table([["A", "BB", "C"], ["xxxx", "", "z"]]) == "A      BB   C\nxxxx        z\n"


def test_talosconfig_flag_and_env_are_honoured(
    talosctl, tmp_path: Path, monkeypatch, home_config: Path
) -> None:
    other = tmp_path / "other"
    TalosConfig(context="x", contexts={"x": Context()}).save(other)
    assert talosctl("--talosconfig", str(other), "config", "endpoint", "9.9.9.9").exit_code == 0
    assert _load(other).contexts["x"].endpoints == ["9.9.9.9"]
    monkeypatch.setenv("TALOSCONFIG", str(other))
    assert talosctl("config", "node", "7.7.7.7").exit_code == 0
    assert _load(other).contexts["x"].nodes == ["7.7.7.7"]
    assert _load(home_config).contexts["a"].nodes == ["10.0.0.5"]


def test_merge_renames_and_creates(talosctl, tmp_path: Path, home_config: Path) -> None:
    incoming = tmp_path / "talosconfig"
    TalosConfig(context="a", contexts={"a": Context(ca="bmV3"), "c": Context()}).save(incoming)
    r = talosctl("config", "merge", str(incoming))
    assert r.exit_code == 0, r.stderr
    assert 'renamed talosconfig context "a" -> "a-1"' in r.stderr
    cfg = _load(home_config)
    assert sorted(cfg.contexts) == ["a", "a-1", "b", "c"] and cfg.context == "a-1"
    # Merging into a talosconfig that does not exist yet creates it.
    fresh = tmp_path / "fresh" / "config"
    assert talosctl("--talosconfig", str(fresh), "config", "merge", str(incoming)).exit_code == 0
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert sorted(_load(fresh).contexts) == ["a", "c"]
    r = talosctl("config", "merge", str(tmp_path / "missing"))
    assert r.exit_code == 1 and "does not exist" in r.stderr


def test_add(talosctl, tmp_path: Path, bundle: SecretsBundle, _isolated_home: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(bundle.os.crt)
    admin = issue_admin_context(bundle)
    import base64

    (tmp_path / "a.crt").write_bytes(base64.b64decode(admin.crt))
    (tmp_path / "a.key").write_bytes(base64.b64decode(admin.key))
    r = talosctl("config", "add", "new", "--ca", "ca.crt", "--crt", "a.crt", "--key", "a.key", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    cfg = _load(_isolated_home / ".talos" / "config")
    assert cfg.contexts["new"].ca == bundle.os.crt_b64() and cfg.contexts["new"].key == admin.key


def test_add_errors(talosctl, tmp_path: Path, _isolated_home: Path) -> None:
    r = talosctl("config", "add", "x", "--crt", "a.crt", cwd=tmp_path)
    assert r.exit_code == 2 and "both are required" in r.stderr
    r = talosctl("config", "add", "x", "--ca", "missing.crt", cwd=tmp_path)
    assert r.exit_code == 1 and "missing.crt" in r.stderr and "--ca" in r.stderr
    (tmp_path / "bad.crt").write_text("hello")
    r = talosctl("config", "add", "x", "--ca", "bad.crt", cwd=tmp_path)
    assert r.exit_code == 1 and "not PEM data" in r.stderr
    assert not (_isolated_home / ".talos" / "config").exists()


def test_remove(talosctl, home_config: Path) -> None:
    cfg = _load(home_config)
    cfg.contexts.update({"b-1": Context(), "c": Context()})
    cfg.save(home_config)
    r = talosctl("config", "remove", "b*", "--dry-run", "-y")
    assert r.exit_code == 0 and 'removing context "b"' in r.stderr
    assert sorted(_load(home_config).contexts) == ["a", "b", "b-1", "c"]
    r = talosctl("config", "remove", "b*", stdin="y\nn\n")
    assert r.exit_code == 0
    assert sorted(_load(home_config).contexts) == ["a", "b-1", "c"]
    r = talosctl("config", "remove", "a", "c", "--noconfirm")
    assert 'skipping removal of current context "a"' in r.stderr
    assert sorted(_load(home_config).contexts) == ["a", "b-1"]
    r = talosctl("config", "remove", "zz*", "-y")
    assert r.exit_code == 1 and 'no contexts matched "zz*"' in r.stderr and "defined contexts" in r.stderr


def test_info_text(talosctl, home_config: Path) -> None:
    r = talosctl("config", "info")
    assert r.exit_code == 0, r.stderr
    expires = (datetime.now(UTC) + timedelta(days=365)).strftime("%Y-%m-%d")
    assert r.stdout == (
        "Current context:     a\n"
        "Nodes:               10.0.0.5\n"
        "Endpoints:           10.0.0.2\n"
        "Roles:               os:admin\n"
        f"Certificate expires: 1 year from now ({expires})\n"
    )
    assert "warning" not in r.stderr
    r = talosctl("config", "info", "--context", "b")
    assert (
        r.stdout
        == "Current context:     b\nNodes:               not defined\nEndpoints:           10.1.0.2\n"
    )


def test_info_json_yaml_and_bad_format(talosctl, home_config: Path) -> None:
    data = json.loads(talosctl("config", "info", "-o", "json").stdout)
    assert data["context"] == "a" and data["roles"] == ["os:admin"] and data["certTTL"] == "1 year from now"
    assert list(data) == ["context", "nodes", "endpoints", "roles", "certTTL", "certNotAfter"]
    assert "certTTL: 1 year from now" in talosctl("config", "info", "-o", "yaml").stdout
    r = talosctl("config", "info", "-o", "xml")
    assert r.exit_code == 1 and 'unknown output format: "xml"' in r.stderr


@pytest.mark.parametrize(
    ("ttl", "warning"),
    [
        (timedelta(days=10), "expires 1 week from now"),
        (timedelta(days=-3), "expired 3 days ago"),
    ],
)
def test_info_warns_about_expiring_certificates(
    talosctl, bundle: SecretsBundle, _isolated_home: Path, ttl: timedelta, warning: str
) -> None:
    now = datetime.now(UTC)
    start = now - timedelta(days=30)
    ctx = issue_admin_context(bundle, ttl=(now + ttl) - start, now=start)
    TalosConfig(context="c", contexts={"c": ctx}).save(_isolated_home / ".talos" / "config")
    r = talosctl("config", "info")
    assert r.exit_code == 0
    assert f"warning: the client certificate of context 'c' {warning}" in r.stderr


def test_info_with_broken_certificate(talosctl, _isolated_home: Path) -> None:
    TalosConfig(context="c", contexts={"c": Context(crt="Zm9v")}).save(_isolated_home / ".talos" / "config")
    r = talosctl("config", "info")
    assert r.exit_code == 1 and "not PEM data" in r.stderr


def test_config_new_needs_a_reachable_node(talosctl, home_config: Path) -> None:
    r = talosctl("config", "new", "-e", "127.0.0.1:1", "-n", "127.0.0.1")
    assert r.exit_code == 1 and "127.0.0.1:1" in r.stderr
    assert not Path("talosconfig").exists()


def test_read_only_service_account_config(talosctl, tmp_path: Path, monkeypatch) -> None:
    from ichor.machinery import clientconfig

    sa = tmp_path / "sa-config"
    TalosConfig(context="x", contexts={"x": Context()}).save(sa)
    monkeypatch.setattr(clientconfig, "SERVICE_ACCOUNT_TALOSCONFIG", sa)
    before = sa.read_text()
    r = talosctl("config", "endpoint", "1.2.3.4")
    assert r.exit_code == 1 and "not allowed to write to config" in r.stderr and "--talosconfig" in r.stderr
    assert sa.read_text() == before
    assert talosctl("config", "contexts").exit_code == 0


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(0), "now"),
        (timedelta(seconds=1), "1 second from now"),
        (timedelta(seconds=-45), "45 seconds ago"),
        (timedelta(hours=5), "5 hours from now"),
        (timedelta(days=1, hours=1), "1 day from now"),
        (timedelta(days=20), "2 weeks from now"),
        (timedelta(days=100), "3 months from now"),
        (timedelta(days=365), "1 year from now"),
        (timedelta(days=3650), "10 years from now"),
    ],
)
def test_humanize_matches_go_humanize(delta: timedelta, text: str) -> None:
    now = datetime(2024, 1, 1, tzinfo=UTC)
    assert _humanize(now + delta, now) == text


def test_merge_honours_xdg_config_home(
    talosctl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _isolated_home: Path
) -> None:
    incoming = tmp_path / "talosconfig"
    TalosConfig(context="a", contexts={"a": Context(ca="bmV3")}).save(incoming)
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    # Nothing exists yet: the seeds' default file, $XDG_CONFIG_HOME/talos/config.yaml, is created.
    r = talosctl("config", "merge", str(incoming))
    assert r.exit_code == 0, r.stderr
    assert sorted(_load(xdg / "talos" / "config.yaml").contexts) == ["a"]
    assert not (_isolated_home / ".talos" / "config").exists()
    # And read back from there.
    r = talosctl("config", "contexts")
    assert r.exit_code == 0 and "a" in r.stdout.split()
