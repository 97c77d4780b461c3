"""scripts/test_summary.py: the CPU figure from /proc/stat lines and the per-worker timeline."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import test_summary


def test_cpu_busy_counts_idle_and_iowait_as_not_busy() -> None:
    before = "cpu  100 0 50 1000 10 0 0 0 0 0"
    after = "cpu  250 0 100 1140 20 0 0 0 0 0"
    assert test_summary.cpu_busy(f"{before}\n{after}\n").startswith(", CPU busy 57% of ")  # 200 of 350
    assert test_summary.cpu_busy(before) == ""
    assert test_summary.cpu_busy(f"{before}\n{before}\n") == ""


def _record(unit: str, worker: str, start: float, stop: float) -> str:
    return json.dumps(
        {"nodeid": f"{unit}::t{start}", "unit": unit, "worker": worker, "start": start, "stop": stop}
    )


def test_timeline_groups_each_workers_units_and_names_the_lone_tail() -> None:
    lines = [
        _record("k8s", "gw0", 1000, 1100), _record("k8s", "gw0", 1100, 1400),
        _record("a.py", "gw0", 1400, 1410), _record("b.py", "gw0", 1410, 1430),
        _record("vm", "gw1", 1000, 1900),
    ]  # fmt: skip
    out = test_summary.timeline(lines)
    assert out[1] == "  gw0: k8s +0 min 00 s for 6 min 40 s (2); 2 units under a minute (0 min 30 s)"
    assert out[2] == "  gw1: vm +0 min 00 s for 15 min 00 s (1)"
    assert out[3] == "  the last worker ran alone for 7 min 50 s at the end"
    assert test_summary.timeline([_record("a.py", "main", 0, 1)]) == []  # one worker: nothing to show
