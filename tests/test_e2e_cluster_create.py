"""``cluster create``'s clean-up with real node processes: a create that fails, a Ctrl-C in-process and a real
SIGINT to a ``talosctl cluster create`` process each leave nothing running (every process stopped by
PID at the end, even when a test fails)."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cluster_create import _cidr, _create

from ichor.machinery import proc
from ichor.machinery.errors import MachineryError
from ichor.provision import _cluster, _teardown
from ichor.provision._processes import find

pytestmark = pytest.mark.e2e

# In-process, create leaves its launchers running on purpose (their Popen handles warn when
# collected), and a connection to a node that is still starting may be left to the collector.
IN_PROCESS = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture
def leftovers(tmp_path: Path) -> Iterator[None]:
    """Whatever a test's cluster left running is killed by PID at the end, even when it fails."""
    yield
    for state_dir in (tmp_path / "clusters").glob("*"):
        for p in find(state_dir.resolve()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.id.pid, signal.SIGKILL)
    gc.collect()  # what the test left to the collector is reported while its warning filters apply


def _talosconfig_with(path: Path, current: str) -> None:
    from ichor.machinery.clientconfig import Context, TalosConfig

    TalosConfig(context=current, contexts={current: Context(endpoints=["127.0.0.1"])}).save(path)


@IN_PROCESS
def test_a_create_that_fails_stops_what_it_started_and_destroy_removes_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leftovers: None
) -> None:
    async def refused(*args: object) -> None:
        raise MachineryError("node 127.0.0.3 refused the configuration")

    monkeypatch.setattr(_cluster, "_apply_all", refused)
    lines: list[str] = []
    with pytest.raises(MachineryError, match="refused the configuration"):
        _create(tmp_path, _cidr(), lines)
    state_dir = (tmp_path / "clusters/c").resolve()
    assert find(state_dir) == []
    assert any(line.startswith("stopping launcher of c-worker-1 (PID ") for line in lines), lines
    assert lines[-1] == (
        f"stopped every process create started; kept its logs in {state_dir}: "
        f"remove them with `talosctl cluster destroy --name c --state {tmp_path / 'clusters'}`"
    )
    assert (state_dir / "c-controlplane-1.log").exists()
    _teardown.destroy(tmp_path / "clusters", "c", progress=lines.append)
    assert not state_dir.exists()


@IN_PROCESS
def test_ctrl_c_during_create_removes_the_nodes_the_context_and_the_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leftovers: None
) -> None:
    from ichor.machinery.clientconfig import TalosConfig

    configs: list[str] = []

    async def interrupted(*args: object) -> None:
        configs.append((tmp_path / "clusters/c/c-controlplane-1.yaml").read_text())
        raise KeyboardInterrupt

    monkeypatch.setattr(_cluster, "wait_healthy", interrupted)
    talosconfig = tmp_path / "talosconfig"
    _talosconfig_with(talosconfig, "mine")
    lines: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        _create(tmp_path, _cidr(), lines, workers=0)
    # No worker: as with Talos's cluster create, workloads may run on the control plane.
    assert "allowSchedulingOnControlPlanes: true" in configs[0]
    state_dir = (tmp_path / "clusters/c").resolve()
    assert find(state_dir) == [] and not state_dir.exists()
    after = TalosConfig.load(talosconfig)
    assert list(after.contexts) == ["mine"] and after.context == "mine"
    assert "interrupted: removing what create started" in lines
    assert f"removed context 'c' from {talosconfig}; the current context is 'mine' again" in lines
    assert lines[-1] == f"stopped every process create started and removed {state_dir}"


def test_a_real_ctrl_c_during_create_leaves_nothing_running(tmp_path: Path, leftovers: None) -> None:
    output = tmp_path / "create.log"
    env = {"HOME": str(tmp_path), "TALOSCONFIG": str(tmp_path / "talosconfig")}
    create = proc.start([sys.executable, "-m", "ichor", "cluster", "create", "--provisioner", "process", "--name", "c", "--cidr", _cidr(),
                         "--state", str(tmp_path / "clusters"), "--workers", "0"], output=output, env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "node processes in" not in output.read_text():
            assert time.monotonic() < deadline and create.poll() is None, output.read_text()
            time.sleep(0.05)
        os.kill(create.pid, signal.SIGINT)
        code = create.wait(timeout=90)
    finally:
        create.stop(timeout=5)
    text = output.read_text()
    assert code != 0, text
    assert "interrupted: removing what create started" in text, text
    assert "stopped every process create started and removed" in text
    assert find((tmp_path / "clusters/c").resolve()) == [] and not (tmp_path / "clusters/c").exists()
