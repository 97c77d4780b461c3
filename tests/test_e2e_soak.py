"""The soak's short form (``benchmarks/soak.py --short``): 10 clients for 20 s through apid while the
control plane crashes and comes back; the soak itself fails if a node's memory does not return
within 20% of its start, or if the control plane never answers again."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cluster_helpers import talosctl_in

from ichor.machinery import proc

pytestmark = pytest.mark.e2e

SOAK = Path(__file__).parent.parent / "benchmarks" / "soak.py"


def test_short_soak_keeps_memory_bounded_across_a_control_plane_crash(tmp_path: Path) -> None:
    try:
        soak = proc.run(
            [sys.executable, str(SOAK), "--short", "--home", str(tmp_path)],
            cwd=tmp_path, check=False, timeout=400,
        )  # fmt: skip
    finally:
        # The soak destroys its cluster itself; this ends it (by the PIDs in its record) if it died.
        talosctl_in(tmp_path, "cluster", "destroy", "--name", "soak")
    assert soak.exit_code == 0, soak.stdout + soak.stderr
    report = soak.stdout
    assert "10 clients x 20 s:" in report and "calls/s" in report
    assert "crash: machined PID" in report and "answers again after" in report
    for node in ("soak-controlplane-1", "soak-worker-1"):
        assert f"{node} machined RSS: before" in report
