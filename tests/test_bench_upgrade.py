"""The pure helpers of ``benchmarks/upgrade.py``: the booted slot in ``get bootslots -o json``, the
ratio table. The benchmark itself is run by hand (root, a VM)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest


@pytest.fixture(scope="module")
def bench() -> SimpleNamespace:
    return SimpleNamespace(**runpy.run_path(str(Path(__file__).parent.parent / "benchmarks" / "upgrade.py")))


def _slot(slot: str, version: str, state: str, booted: bool) -> str:
    document = {"node": "10.80.0.2", "metadata": {"namespace": "runtime", "type": "BootSlots.ichor.dev", "id": slot},
                "spec": {"version": version, "state": state, "tries": 0, "booted": booted}}  # fmt: skip
    return json.dumps(document, indent=4)


def test_booted_slot_reads_concatenated_objects(bench: SimpleNamespace) -> None:
    both = _slot("A", "v1.7.6", "installed", False) + "\n" + _slot("B", "v1.7.7-ichor.2", "good", True) + "\n"
    assert bench.booted_slot(both) == ("B", "v1.7.7-ichor.2", "good")
    trial = _slot("A", "v1.7.6", "good", False) + _slot("B", "v1.7.7-ichor.2", "trial", True)
    assert bench.booted_slot(trial) == ("B", "v1.7.7-ichor.2", "trial")
    assert bench.booted_slot(_slot("A", "v1.7.6", "good", False)) is None
    assert bench.booted_slot("") is None


def test_table_gives_each_step_its_median_and_ratio_to_the_reboot(bench: SimpleNamespace) -> None:
    runs = [
        {"reboot": 40.0, "upgrade": 100.0},
        {"rollback (v2 -> v1)": 45.0, "reboot": 60.0, "upgrade": 110.0},
    ]
    lines = bench.table(runs).splitlines()
    assert lines[0].split() == ["run", "1", "run", "2", "median", "ratio"]
    rows = {line[:40].strip(): line[40:].split() for line in lines[1:]}
    assert rows["reboot"] == ["40.0s", "60.0s", "50.0s", "1.00x", "reboot"]
    assert rows["upgrade"] == ["100.0s", "110.0s", "105.0s", "2.10x", "reboot"]
    assert rows["rollback (v2 -> v1)"] == ["-", "45.0s", "45.0s", "0.90x", "reboot"]
