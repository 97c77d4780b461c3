"""``talosctl completion bash|zsh|fish`` gives scripts the shells accept and that complete talosctl;
``talosctl etcd member list`` (the seeds' older spelling) prints what ``etcd members`` prints."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli_etcd import _members_handler
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode

from ichor.cli._completion import strip_global_flags

SRC = Path(__file__).resolve().parent.parent / "src"


@pytest.fixture
def on_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has a ``talosctl`` that runs this checkout (as the console script would)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "talosctl"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={SRC} exec {sys.executable} -m ichor "$@"\n')
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _bash(env: dict[str, str], script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)


def test_bash_sources_the_script_and_registers_talosctl(on_path: dict[str, str]) -> None:
    done = _bash(on_path, "source <(talosctl completion bash) && complete -p talosctl")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "complete -o nosort -F _talosctl_completion talosctl"


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        # a command name, past the global flags talosctl accepts anywhere
        ("talosctl -n 10.5.0.2 --talosconfig=tc et", {"etcd"}),
        ("talosctl etcd m", {"members"}),
        ("talosctl edit --mo", {"--mode"}),
        ("talosctl completion ", {"bash", "fish", "zsh"}),
    ],
)
def test_bash_completes_commands_flags_and_arguments(
    on_path: dict[str, str], words: str, expected: set[str]
) -> None:
    parts = words.split(" ")
    script = (
        "source <(talosctl completion bash)\n"
        f"COMP_WORDS=({' '.join(repr(p) for p in parts)}); COMP_CWORD={len(parts) - 1}\n"
        "_talosctl_completion talosctl\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = _bash(on_path, script)
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == expected


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_loads_the_script(on_path: dict[str, str]) -> None:
    done = subprocess.run(
        ["zsh", "-c", "autoload -U compinit && compinit -u && source <(talosctl completion zsh) && "
                      "print -r -- ${_comps[talosctl]}"],
        env=on_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "_talosctl_completion"


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_loads_the_script_and_completes(on_path: dict[str, str]) -> None:
    done = subprocess.run(
        ["fish", "-c", "talosctl completion fish | source; complete -C 'talosctl etcd m'"],
        env=on_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "members"


def test_unknown_shell_is_a_usage_error(talosctl: Any) -> None:
    r = talosctl("completion", "powershell")
    assert r.exit_code == 2
    assert "'powershell' is not one of 'bash', 'fish', 'zsh'" in r.stderr
    assert talosctl("completion").exit_code == 2


def test_global_flags_and_their_values_are_dropped() -> None:
    assert strip_global_flags(["-n", "a,b", "get", "-e=x", "--talosconfig", "t", "members", "-o"]) == [
        "get",
        "members",
        "-o",
    ]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    fake = FakeNode(tmp_path, "127.77.4.9")
    with fake.serving():
        yield fake


@pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)
def test_etcd_member_list_is_etcd_members(node: FakeNode, talosctl: Any) -> None:
    node.handlers["EtcdMemberList"] = _members_handler
    older = talosctl(*node.args("10.5.0.2"), "etcd", "member", "list")
    newer = talosctl(*node.args("10.5.0.2"), "etcd", "members")
    assert older.exit_code == 0, older.stderr
    assert older.stdout == newer.stdout
    assert "000000003a4f2b1c" in older.stdout
    # Talos 1.7's help lists only `members`.
    listed = [
        line.split()[0] for line in talosctl("etcd", "--help").stdout.splitlines() if line.startswith("  ")
    ]
    assert "members" in listed and "member" not in listed
