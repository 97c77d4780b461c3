"""``cluster show`` and ``cluster destroy`` against real processes standing in for a cluster's.

A stand-in is a small Python process marked, as create marks them, with the cluster's environment
tags; each test kills what it started by PID at the end, even when it fails.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ichor.machinery import proc
from ichor.machinery.errors import MachineryError
from ichor.provision import _teardown
from ichor.provision._processes import ProcessId, find, tags
from ichor.provision._record import ClusterRecord, NodeRecord

SLEEP = "import signal, sys, time\n{setup}\nprint('ready', flush=True)\ntime.sleep(60)\n"


@pytest.fixture
def started() -> Iterator[list[proc.Background]]:
    children: list[proc.Background] = []
    yield children
    for child in children:
        child.stop(timeout=1)


def _stand_in(
    started: list[proc.Background], log: Path, env: dict[str, str] | None = None, setup: str = ""
) -> ProcessId:
    child = proc.start([sys.executable, "-c", SLEEP.format(setup=setup)], output=log, env=env)
    started.append(child)
    deadline = time.monotonic() + 20
    while not (log.exists() and "ready" in log.read_text()):
        assert time.monotonic() < deadline and child.poll() is None, log.read_text()
        time.sleep(0.05)
    identity = ProcessId.of(child.pid)
    assert identity is not None
    return identity


def _cluster_record(tmp_path: Path, launcher: ProcessId | None = None) -> ClusterRecord:
    state_dir = tmp_path / "clusters" / "c"
    state_dir.mkdir(parents=True)
    node = NodeRecord("c-controlplane-1", "controlplane", "127.9.9.2", str(state_dir / "c-controlplane-1"))
    if launcher is not None:
        node.launcher_pid, node.launcher_start = launcher.pid, launcher.start
    record = ClusterRecord(name="c", cidr="127.9.9.0/24", state_dir=str(state_dir), nodes=[node])
    record.save()
    return record


def _ignores_sigterm(started: list[proc.Background], tmp_path: Path, record: ClusterRecord) -> ProcessId:
    """A process of the cluster's first node that only SIGKILL ends."""
    return _stand_in(started, tmp_path / "stubborn.log", tags(Path(record.state_dir), record.nodes[0].name),
                     setup="signal.signal(signal.SIGTERM, signal.SIG_IGN)")  # fmt: skip


def _dead_process(started: list[proc.Background], tmp_path: Path) -> ProcessId:
    identity = _stand_in(started, tmp_path / "dead.log")
    started[-1].stop(timeout=1)
    return identity


def test_show_and_destroy_a_node_process_whose_launcher_died(
    tmp_path: Path, started: list[proc.Background]
) -> None:
    launcher = _dead_process(started, tmp_path)
    record = _cluster_record(tmp_path, launcher)
    node = _stand_in(started, tmp_path / "node.log", tags(Path(record.state_dir), "c-controlplane-1"))

    rows = _teardown.show(tmp_path / "clusters", "c")
    name = Path(sys.executable).name
    assert rows[1][4] == f"launcher gone, {name} running (PID {node.pid})", rows

    lines: list[str] = []
    _teardown.destroy(tmp_path / "clusters", "c", progress=lines.append)
    assert not node.alive()
    assert any(f"PID {node.pid}" in line and "c-controlplane-1" in line for line in lines), lines
    assert not Path(record.state_dir).exists()


def test_destroy_never_signals_a_pid_given_to_another_process(
    tmp_path: Path, started: list[proc.Background]
) -> None:
    stranger = _stand_in(started, tmp_path / "stranger.log")
    # The launcher's PID, since reused by an unrelated process (same PID, another start time).
    record = _cluster_record(tmp_path, ProcessId(stranger.pid, stranger.start - 1))
    assert _teardown.show(tmp_path / "clusters", "c")[1][4] == "stopped"
    _teardown.destroy(tmp_path / "clusters", "c", progress=lambda _: None)
    assert stranger.alive()
    assert not Path(record.state_dir).exists()


def test_destroy_fails_loudly_and_keeps_the_state_when_a_process_survives(
    tmp_path: Path, started: list[proc.Background]
) -> None:
    record = _cluster_record(tmp_path)
    stubborn = _ignores_sigterm(started, tmp_path, record)
    with pytest.raises(MachineryError) as failed:
        _teardown.destroy(
            tmp_path / "clusters", "c", progress=lambda _: None, signals=((signal.SIGTERM, 0.5),)
        )
    assert f"PID {stubborn.pid}" in str(failed.value) and "c-controlplane-1" in str(failed.value)
    assert "kept" in str(failed.value) and failed.value.hint
    assert stubborn.alive() and (Path(record.state_dir) / "cluster.yaml").exists()

    # With SIGKILL after SIGTERM (destroy's default escalation) it goes, and so does the state.
    escalation = ((signal.SIGTERM, 0.5), (signal.SIGKILL, 5.0))
    _teardown.destroy(tmp_path / "clusters", "c", progress=lambda _: None, signals=escalation)
    assert not stubborn.alive() and not Path(record.state_dir).exists()


def test_find_sees_only_the_clusters_own_processes(tmp_path: Path, started: list[proc.Background]) -> None:
    ours = _stand_in(started, tmp_path / "a.log", tags(tmp_path / "a", "a-worker-1"))
    _stand_in(started, tmp_path / "b.log", tags(tmp_path / "b", "b-worker-1"))
    _stand_in(started, tmp_path / "plain.log")
    found = find(tmp_path / "a")
    assert [(p.id, p.node) for p in found] == [(ours, "a-worker-1")]


def test_a_process_id_is_its_pid_and_start_time(tmp_path: Path, started: list[proc.Background]) -> None:
    me = ProcessId.of(os.getpid())
    assert me is not None and me.alive()
    assert not ProcessId(me.pid, me.start + 1).alive()
    gone = _dead_process(started, tmp_path)
    assert ProcessId.of(gone.pid) is None and not gone.alive()


def test_destroy_removes_what_a_create_left_before_writing_its_record(
    tmp_path: Path, started: list[proc.Background]
) -> None:
    state_dir = tmp_path / "clusters" / "half"
    state_dir.mkdir(parents=True)
    discovery = _stand_in(started, tmp_path / "d.log", tags(state_dir.resolve()))
    lines: list[str] = []
    _teardown.destroy(tmp_path / "clusters", "half", progress=lines.append)
    assert not discovery.alive() and not state_dir.exists()
    assert "a create that did not finish" in lines[0]


@pytest.mark.parametrize("text", ["- a\n- list\n", "name: x\ncidr: y\nstate_dir: z\nnonsense: 1\n", ""])
def test_a_damaged_cluster_record_is_named_with_a_way_out(tmp_path: Path, text: str) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c/cluster.yaml").write_text(text)
    with pytest.raises(MachineryError) as failed:
        ClusterRecord.load(tmp_path, "c")
    assert "is not a cluster record" in str(failed.value) and failed.value.hint
    with pytest.raises(MachineryError):
        _teardown.destroy(tmp_path, "c", progress=lambda _: None)
    assert (tmp_path / "c/cluster.yaml").exists()


def test_not_found_names_the_state_directory_used(tmp_path: Path) -> None:
    with pytest.raises(MachineryError) as failed:
        _teardown.show(tmp_path / "elsewhere", "nope")
    assert "cluster 'nope' not found" in str(failed.value)
    assert f"ls {tmp_path / 'elsewhere'}" in (failed.value.hint or "")


def test_destroy_force_removes_the_state_even_when_a_process_survives(
    tmp_path: Path, started: list[proc.Background]
) -> None:
    record = _cluster_record(tmp_path)
    stubborn = _ignores_sigterm(started, tmp_path, record)
    with pytest.raises(MachineryError) as failed:
        _teardown.destroy(tmp_path / "clusters", "c", progress=lambda _: None, signals=((signal.SIGTERM, 0.5),),
                          force=True)  # fmt: skip
    assert f"PID {stubborn.pid}" in str(failed.value) and "removed the state directory" in str(failed.value)
    assert f"kill -9 {stubborn.pid}" in (failed.value.hint or "")
    assert stubborn.alive() and not Path(record.state_dir).exists()
