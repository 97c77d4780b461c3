from __future__ import annotations

import subprocess
import sys

import pytest

from ichor.cli._root import extract_global_options


def test_global_flags_are_found_anywhere() -> None:
    opts, rest = extract_global_options(
        ["-n", "10.0.0.2,10.0.0.3", "get", "members", "--endpoints=10.0.0.1", "--talosconfig", "tc"]
    )
    assert opts.nodes == ["10.0.0.2", "10.0.0.3"]
    assert opts.endpoints == ["10.0.0.1"]
    assert opts.talosconfig == "tc"
    assert rest == ["get", "members"]


def test_global_flags_stop_at_double_dash() -> None:
    opts, rest = extract_global_options(["cmd", "--", "-n", "x"])
    assert opts.nodes == []
    assert rest == ["cmd", "--", "-n", "x"]


def test_global_flag_without_value_is_a_usage_error(talosctl) -> None:
    result = talosctl("version", "--client", "-n")
    assert result.exit_code == 2
    assert "flag needs an argument: -n" in result.stderr


def test_version_client(talosctl) -> None:
    result = talosctl("version", "--client")
    assert result.exit_code == 0
    assert "Tag:         v1.7.6" in result.stdout


def test_unknown_command_is_usage_error(talosctl) -> None:
    result = talosctl("no-such-command")
    assert result.exit_code == 2
    assert "No such command" in result.stderr


@pytest.mark.parametrize("argv", [["--help"], ["version", "--client"]])
def test_python_dash_m_matches_console_script(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "ichor", *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["cluster", "create", "--wait-timeout", "5x"], "--wait-timeout"),
        (["config", "new", "--crt-ttl", "1y"], "--crt-ttl"),
        (["events", "--duration", "soon"], "--duration"),
        (["apply-config", "-f", "x.yaml", "-m", "try", "--timeout", "1d"], "--timeout"),
    ],
)
def test_bad_durations_name_their_own_flag(talosctl, tmp_path, args: list[str], flag: str) -> None:
    (tmp_path / "x.yaml").write_text("machine: {}\n")
    result = talosctl(*args, cwd=tmp_path)
    assert result.exit_code == 2
    assert f"Invalid value for {flag}: invalid duration" in result.stderr
    assert not (tmp_path / ".talos").exists()
