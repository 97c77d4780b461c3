"""Shared fixtures: run the CLI in-process, and isolate HOME/TALOSCONFIG for every test."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import tiers
from container_helpers import KubeCluster, kube_cluster
from tiers import (  # noqa: F401 - the suite's tier hooks, registered from here
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_configure_node,
    pytest_runtest_logreport,
    pytest_runtest_teardown,
    pytest_sessionfinish,
    pytest_xdist_auto_num_workers,
    pytest_xdist_make_scheduler,
)

from ichor.cli._errors import run_with_error_edge
from ichor.cli._root import _invoke

if TYPE_CHECKING:
    from booted_node import Node

REPO = Path(__file__).resolve().parent.parent
SCHEMA_PATH = REPO / "src" / "ichor" / "machinery" / "schema" / "talos-1.7-config.schema.json"
# Read before any test moves HOME: the etcd that `python -m ichor.etcd.build` built lives in the real
# user's cache, and tests (and the nodes they start) must run that etcd, not fall back to the wheel's.
_USER_CACHE = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")

LOOPBACK_DISCOVERY = (
    '[{"op": "add", "path": "/cluster/discovery/registries/service/endpoint", '
    '"value": "http://127.0.0.1:9/"}]'
)
"""A ``--config-patch`` for configs of test nodes: a node never looks up the public discovery service
(this machine addresses nothing but loopback); port 9 (discard) answers nothing."""


@dataclass
class CLIResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", _USER_CACHE)
    monkeypatch.delenv("TALOSCONFIG", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    yield home


@pytest.fixture
def talosctl(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """Run ``talosctl`` in-process: ``talosctl("gen", "secrets", cwd=tmp_path)``."""

    def run(*args: str, cwd: Path | None = None, stdin: str | None = None) -> CLIResult:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        if stdin is not None:
            import io
            import sys

            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        code = run_with_error_edge(lambda: _invoke(list(args)))
        out, err = capsys.readouterr()
        return CLIResult(code, out, err)

    return run


@pytest.fixture(scope="session")
def k8s_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """The one 1+1 container cluster with Kubernetes that every ``k8s`` test file shares (see
    ``tiers.K8S_ORDER`` for the order they run in: the ones that break and repair it last)."""
    with contextlib.ExitStack() as stack:
        made = stack.enter_context(kube_cluster(tmp_path_factory.mktemp("k8s")))
        tiers.EARLY_CLOSE["k8s_cluster"] = stack.close  # destroyed after its last test (tiers.EARLY_CLOSE)
        yield made
    tiers.EARLY_CLOSE.pop("k8s_cluster", None)


@pytest.fixture(scope="session")
def booted_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """One configured control plane node process for the read-only and self-restoring end-to-end
    files (introspection, edit, patch, netstat, support), stopped by PID when the session ends."""
    from booted_node import booted

    with booted(tmp_path_factory.mktemp("booted-node")) as node:
        yield node
