"""The launcher with a real node process: ``cluster show`` says a crashed node is waiting to restart and destroy ends it."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ichor.provision import _teardown
from ichor.provision._cluster import start_launcher
from ichor.provision._processes import find
from ichor.provision._record import ClusterRecord, NodeRecord

pytestmark = pytest.mark.e2e


@pytest.fixture
def crashing_node(tmp_path: Path) -> Iterator[ClusterRecord]:
    """A cluster of one node whose machined crashes at once (its root is a file); its launcher is
    stopped by PID afterwards."""
    state_dir = tmp_path / "clusters/c"
    state_dir.mkdir(parents=True)
    (tmp_path / "not-a-directory").write_text("")
    node = NodeRecord("c-worker-1", "worker", "127.9.9.3", str(tmp_path / "not-a-directory"))
    record = ClusterRecord(name="c", cidr="127.9.9.0/24", state_dir=str(state_dir), nodes=[node])
    start_launcher(node, state_dir)
    record.save()
    yield record
    for p in find(state_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.id.pid, signal.SIGKILL)


@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_show_says_a_crashed_node_is_waiting_to_restart_and_destroy_ends_it(
    tmp_path: Path, crashing_node: ClusterRecord
) -> None:
    deadline = time.monotonic() + 60
    while True:
        state = _teardown.show(tmp_path / "clusters", "c")[1][4]
        if state.startswith("crashed"):
            break
        assert time.monotonic() < deadline, state
        time.sleep(0.1)
    assert state.startswith("crashed (exit code 1), restarting in ") and state.endswith("in a row)"), state
    later = _teardown.show(tmp_path / "clusters", "c", now=lambda: time.time() + 3600)[1][4]
    assert "restarting in 0s" in later

    lines: list[str] = []
    _teardown.destroy(tmp_path / "clusters", "c", progress=lines.append)
    assert find(Path(crashing_node.state_dir)) == []
