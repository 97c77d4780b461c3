"""End to end: the README's Python SDK examples, run as written against a live process cluster.

The examples are the ```python blocks of the README's "Python SDK" section, extracted and run one by
one as scripts (a fresh interpreter each, as a user runs them) with the cluster's talosconfig as
``$TALOSCONFIG``; the only change is the node addresses: the README's ``10.5.0.x`` become the
cluster's. Each must exit 0 and print what it says it prints. The last one reboots the worker and
waits until it is back. Budget: about 2-3 minutes (create ~40 s, the examples ~60 s, destroy).
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest
from cluster_helpers import cli_env, talosctl_in

from ichor.machinery import proc

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

NAME = "sdk-readme"
README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "## Python SDK (`ichor.client`)"


def readme_examples() -> list[str]:
    """The ```python blocks of the README's SDK section, in order."""
    text = README.read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def expected(prefix: str) -> list[list[str]]:
    """What each example prints, at least (by position)."""
    cp, worker = f"{prefix}.2", f"{prefix}.3"
    return [
        [f"['{NAME}']", f"{cp}: Talos v1.7", f"{worker}: Talos v1.7",
         f"{cp}: etcd Running health=OK", f"{worker}: apid Running"],
        [f"{cp} running ready", "controlplane", "worker", " apid True"],
        [f"{cp}: ", f"['{cp}: FailedPrecondition']", "no-reboot", "voter", "snapshot: "],
        ["waiting for all nodes' APIs to be reachable: OK", "waiting for etcd to be healthy: OK",
         "waiting for etcd members to be control plane nodes: OK"],
        [f"[{cp!r}] ['{prefix}.9: Unavailable']", f'{cp}: resource type "nosuchtype" is not registered',
         f"{worker} reboot ", f"{worker} rebooted"],
    ]  # fmt: skip


def test_the_readme_examples_run_against_a_process_cluster(tmp_path: Path) -> None:
    examples = readme_examples()
    prefix = f"127.{random.randint(200, 239)}.{random.randint(0, 255)}"
    want = expected(prefix)
    assert len(examples) == len(want), "an example was added or removed: say here what it prints"
    home = tmp_path
    created = talosctl_in(home, "cluster", "create", "--provisioner", "process", "--name", NAME,
                          "--cidr", f"{prefix}.0/24", "--controlplanes", "1", "--workers", "1",
                          "--wait-timeout", "3m", timeout=300)  # fmt: skip
    try:
        assert created.exit_code == 0, created.stderr[-3000:]
        problems: list[str] = []  # every example runs, so one run shows every one that fails
        for number, (code, lines) in enumerate(zip(examples, want, strict=True), start=1):
            script = home / f"example{number}.py"
            script.write_text(code.replace("10.5.0.", f"{prefix}."))
            ran = proc.run(
                [sys.executable, str(script)], env=cli_env(home), cwd=home, check=False, timeout=240
            )
            missing = [line for line in lines if line not in ran.stdout]
            if ran.exit_code != 0 or missing:
                problems.append(f"example {number} (exit {ran.exit_code}) did not print {missing}:\n"
                                f"{ran.stdout}\n{ran.stderr[-3000:]}")  # fmt: skip
        assert not problems, "\n\n".join(problems)
        assert (home / "db.snapshot").stat().st_size % 512 == 32
    finally:
        destroyed = talosctl_in(home, "cluster", "destroy", "--name", NAME)
    assert destroyed.exit_code == 0, destroyed.stderr
