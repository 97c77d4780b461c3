"""End to end: ``talosctl dashboard`` on a 1+1 cluster, as the seeds run it (``-n <cp>,<worker> dashboard``).

One cluster serves both tests: the dashboard headless (textual's pilot, in this process) reading
every screen and switching nodes, screens and logs with keys; and the real command in a real
terminal (a private tmux server), its screen captured with ``tmux capture-pane``.
"""

from __future__ import annotations

import asyncio
import gc
import random
import shlex
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import talosctl_in

import ichor
from ichor.machinery import proc
from ichor.machinery.clientconfig import GlobalOptions

pytestmark = pytest.mark.e2e

NAME = "dash"
WAIT = 60  # seconds any one screen may take to show what is awaited


class Cluster:
    def __init__(self, home: Path, prefix: str) -> None:
        self.home = home
        self.cp, self.worker, self.missing = f"{prefix}.2", f"{prefix}.3", f"{prefix}.99"
        self.talosconfig = home / ".talos/config"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home = tmp_path_factory.mktemp("dashboard")
    prefix = f"127.{random.randint(200, 250)}.{random.randint(0, 255)}"
    created = talosctl_in(home, "cluster", "create", "--provisioner", "process", "--name", NAME, "--cidr", f"{prefix}.0/24",
                          "--wait-timeout", "2m")  # fmt: skip
    try:
        assert created.exit_code == 0, created.stderr
        yield Cluster(home, prefix)
    finally:
        destroyed = talosctl_in(home, "cluster", "destroy", "--name", NAME)
        assert destroyed.exit_code == 0, destroyed.stderr


def _screen(app: Any) -> str:
    return "\n".join(strip.text.rstrip() for strip in app.screen._compositor.render_strips())


async def _until(pilot: Any, what: str, check: Any) -> str:
    deadline = time.monotonic() + WAIT
    while True:
        await pilot.pause(0.1)
        text = _screen(pilot.app)
        if check(text):
            return text
        assert time.monotonic() < deadline, f"{what} not shown within {WAIT}s:\n{text}"


def test_headless_screens_keys_and_an_unreachable_node(cluster: Cluster) -> None:
    asyncio.run(_headless(cluster))
    # The app closed its client: no socket is left for the collector to find (and warn about, in
    # whatever test happens to run the next collection).
    gc.collect()


async def _headless(cluster: Cluster) -> None:
    from ichor.cli._dashboard import make_app

    cp_host, worker_host = f"{NAME}-controlplane-1", f"{NAME}-worker-1"
    logged = talosctl_in(cluster.home, "-n", cluster.cp, "logs", "machined").stdout.splitlines()
    machined_log = [line.removeprefix(f"{cluster.cp}: ") for line in logged]
    assert machined_log, "the control plane's machined log is empty"
    opts = GlobalOptions(
        talosconfig=str(cluster.talosconfig), nodes=[cluster.cp, cluster.worker, cluster.missing]
    )
    app = make_app(opts, interval=0.5)
    async with app.run_test(size=(150, 45)) as pilot:
        # F1, the first node: Talos's header, the summary table, the machined log.
        text = await _until(pilot, "the summary", lambda t: "ETCD        Running, healthy" in t)
        assert f"{cp_host} (v1.7.6): uptime " in text and "PROCS " in text and "RAM " in text
        assert "[F1: Summary]" in text and f"[{cluster.cp}]" in text
        for row in ("CLUSTER     dash", "STAGE       Running", "READY       True", "TYPE        controlplane",
                    "MEMBERS     2", f"IP          {cluster.cp}/32", "KUBERNETES  v1.30.3"):  # fmt: skip
            assert row in text, (row, text)
        for service in ("APID        Running [OK]", "ETCD        Running [OK]", "TRUSTD      Running [OK]"):
            assert service in text
        await _until(pilot, "the machined log", lambda t: f"Logs: machined on {cluster.cp}" in t)
        assert machined_log[0] in app.log_lines and machined_log[0][:60] in _screen(app)

        # `[` walks the services' logs (apid, etcd, machined, trustd): etcd's own log lines.
        await pilot.press("left_square_bracket")
        text = await _until(
            pilot, "the etcd log", lambda t: f"Logs: etcd on {cluster.cp}" in t and '{"level"' in t
        )
        assert any('"msg":"serving client traffic securely"' in line for line in app.log_lines)

        # F2: the process table has the node's machined and etcd, with a CPU share after two polls.
        await pilot.press("f2")
        text = await _until(
            pilot, "the process table", lambda t: "CPU-TIME" in t and "% of one core, by" in t
        )
        assert "[F2: Monitor]" in text and "-m ichor.machined --address" in text and "etcd" in text
        assert "CORES / LOAD" in text and "host-wide" in text  # SystemStat's figures, marked as the host's

        # <Right> (not taken by the focused process table): the worker, on the same screen.
        await pilot.press("right")
        text = await _until(pilot, "the worker", lambda t: t.startswith(f"{worker_host} (v1.7.6)"))
        assert f"[{cluster.worker}]" in text and "[F2: Monitor]" in text
        # F3 its network, F4 its config.
        await pilot.press("f3")
        text = await _until(pilot, "the network screen", lambda t: "Members" in t and worker_host in t)
        assert f"ADDRESSES       {cluster.worker}/32" in text
        assert f"lo      {cluster.worker}/32" in text
        assert cp_host in text and "Ichor (v1.7.6)" in text
        await pilot.press("f4")
        text = await _until(pilot, "the config screen", lambda t: "[F4: Config URL]" in t)
        assert "MACHINE CONFIG  loaded from STATE (/system/state/config.yaml), version 1" in text
        assert f"talosctl -n {cluster.worker} apply-config --file <config.yaml>" in text

        # l: a node nothing answers for is one error for that node; the others keep working.
        await pilot.press("l", "f1")
        text = await _until(
            pilot, "the unreachable node", lambda t: t.startswith(f"{cluster.missing}: rpc error")
        )
        assert "connection refused" in text and f"[{cluster.missing}]" in text
        # l wraps to the first node; h goes back.
        await pilot.press("l")
        await _until(pilot, "the first node again", lambda t: t.startswith(f"{cp_host} (v1.7.6)"))
        await pilot.press("h")
        await _until(pilot, "the unreachable node again", lambda t: t.startswith(cluster.missing))
        await pilot.press("ctrl+c")  # quits, as q does (the terminal test presses q)
    assert app.return_code == 0


def _tmux(socket: Path, *args: str) -> proc.Completed:
    return proc.run(["tmux", "-S", str(socket), *args], check=False, timeout=20)


def _capture_until(socket: Path, what: str, check: Any) -> str:
    deadline = time.monotonic() + WAIT
    while True:
        text = _tmux(socket, "capture-pane", "-p", "-t", "dash").stdout
        if check(text):
            return text
        assert time.monotonic() < deadline, f"{what} not on the terminal within {WAIT}s:\n{text}"
        time.sleep(0.3)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
def test_in_a_real_terminal(cluster: Cluster, tmp_path: Path) -> None:
    socket = tmp_path / "tmux.sock"  # a private tmux server: nothing of anyone else's is touched
    src = Path(ichor.__file__).resolve().parent.parent
    command = shlex.join(["env", "-u", "COLUMNS", "-u", "LINES", f"HOME={cluster.home}", f"TALOSCONFIG={cluster.talosconfig}",
                          f"PYTHONPATH={src}", sys.executable, "-m", "ichor", "-n",
                          f"{cluster.cp},{cluster.worker}", "dashboard", "-d", "1s"])  # fmt: skip
    # The terminal's size is the pane's, not pytest's COLUMNS/LINES. textual draws on stderr; what the command leaves on the terminal after q (its exit status,
    # any traceback) stays on the pane for a while.
    started = _tmux(socket, "new-session", "-d", "-s", "dash", "-x", "140", "-y", "40",
                    f"{command}; echo dashboard exited $?; sleep {WAIT}")  # fmt: skip
    assert started.exit_code == 0, started.stderr
    try:
        text = _capture_until(socket, "the summary", lambda t: "STAGE       Running" in t)
        assert f"{NAME}-controlplane-1 (v1.7.6): uptime" in text and "[F1: Summary]" in text
        assert "Logs: machined on" in text
        _tmux(socket, "send-keys", "-t", "dash", "F2")
        text = _capture_until(socket, "the monitor", lambda t: "CPU-TIME" in t)
        assert "-m ichor.machined" in text, text
        _tmux(socket, "send-keys", "-t", "dash", "Right")
        _capture_until(socket, "the worker", lambda t: f"{NAME}-worker-1 (v1.7.6)" in t)
        _tmux(socket, "send-keys", "-t", "dash", "q")
        text = _capture_until(socket, "the exit", lambda t: "dashboard exited" in t)
        assert "dashboard exited 0" in text and "Traceback" not in text, text
    finally:
        _tmux(socket, "kill-server")
