"""``talosctl --help`` and ``talosctl version --client`` start without the heavy imports, and the
click-free answers are exactly what click would print."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from ichor.cli import _fast
from ichor.cli._root import ROOT_HELP, cli

HEAVY = ("click", "grpclib", "google.protobuf", "cryptography", "pydantic", "rich")
SRC = Path(__file__).resolve().parent.parent / "src"


def _imported(*args: str) -> set[str]:
    env = dict(os.environ, PYTHONPATH=str(SRC), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ichor", *args],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return {
        line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
    }


@pytest.mark.parametrize(
    "args", [["--help"], ["-h"], ["version", "--client"], ["version", "--client", "--short"]]
)
def test_fast_commands_import_nothing_heavy(args: list[str]) -> None:
    modules = _imported(*args)
    assert "ichor.cli._fast" in modules
    heavy = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == []


def test_other_commands_still_go_through_click() -> None:
    assert "click" in _imported("config", "--help")


@pytest.mark.parametrize("columns", range(40, 125))
def test_root_help_is_what_click_prints(columns: int, talosctl, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    r = talosctl("--help")  # in-process: the click group
    assert r.exit_code == 0
    assert (
        _fast.root_help(ROOT_HELP, cli.short_helps(), _fast.help_width(_fast.terminal_columns())) == r.stdout
    )


def test_client_version_names_this_python_and_platform() -> None:
    text = _fast.client_version_text()
    assert f"\tGo version:  python{platform.python_version()}\n" in text
    assert f"\tOS/Arch:     {platform.system().lower()}/" in text
    assert "\tTag:         v1.7.6\n" in text
