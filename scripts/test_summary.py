"""The closing report of ``bash run.sh test``: how long set-up and each tier took, the 25 slowest tests
of the whole run, and one totals line over every tier.

``python scripts/test_summary.py SETUP_SECONDS DIR``, where DIR holds one ``<tier>.xml`` (pytest's
JUnit XML) and one ``<tier>.seconds`` (the tier's wall time) per tier that ran, and optionally
``<tier>.cpu`` (``/proc/stat``'s ``cpu`` line before and after: how busy the machine's cores were) and
``<tier>.timeline`` (tests/tiers.py's JSON lines: each test's xdist worker, unit and span), from
which a tier run on several workers shows its units per worker and how long its tail ran alone.
"""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any


def _minutes(seconds: float) -> str:
    return f"{int(seconds) // 60} min {int(seconds) % 60:02d} s"


def cpu_busy(text: str) -> str:
    """``/proc/stat``'s ``cpu`` line before and after -> "CPU busy N% of C cores" ("" if unreadable)."""
    rows = [[int(x) for x in line.split()[1:]] for line in text.splitlines() if line.startswith("cpu ")]
    if len(rows) != 2:
        return ""
    delta = [after - before for before, after in zip(rows[0], rows[1], strict=False)]
    idle = delta[3] + (delta[4] if len(delta) > 4 else 0)
    total = sum(delta[:8])
    if total <= 0:
        return ""
    return f", CPU busy {100 * (total - idle) / total:.0f}% of {os.cpu_count() or 1} cores"


def timeline(lines: list[str]) -> list[str]:
    """Each worker's units of a minute or more in the order it ran them (start offset, length,
    tests), the shorter ones summed, then how long the last worker ran alone."""
    records = [json.loads(line) for line in lines if line.strip()]
    if not records or len({r["worker"] for r in records}) < 2:
        return []
    t0 = min(r["start"] for r in records)
    out = ["units per worker (start, length, tests):"]
    ends = []
    for worker in sorted({r["worker"] for r in records}):
        mine = sorted((r for r in records if r["worker"] == worker), key=lambda r: r["start"])
        runs: list[list[Any]] = []
        for r in mine:
            if runs and runs[-1][0] == r["unit"]:
                runs[-1][2], runs[-1][3] = r["stop"], runs[-1][3] + 1
            else:
                runs.append([r["unit"], r["start"], r["stop"], 1])
        long = [run for run in runs if run[2] - run[1] >= 60]
        parts = [f"{unit} +{_minutes(a - t0)} for {_minutes(b - a)} ({n})" for unit, a, b, n in long]
        short = [run for run in runs if run[2] - run[1] < 60]
        if short:
            parts.append(
                f"{len(short)} units under a minute ({_minutes(sum(b - a for _, a, b, _ in short))})"
            )
        out.append(f"  {worker}: " + "; ".join(parts))
        ends.append(mine[-1]["stop"])
    ends.sort()
    if len(ends) >= 2:
        out.append(f"  the last worker ran alone for {_minutes(ends[-1] - ends[-2])} at the end")
    return out


def main(setup_seconds: str, directory: str) -> int:
    root = Path(directory)
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    cases: list[tuple[float, str]] = []
    lines = [f"set-up (tools, etcd, Kubernetes images): {_minutes(float(setup_seconds))}"]
    tiers_seconds = 0.0
    for xml in sorted(root.glob("*.xml"), key=lambda p: p.stat().st_mtime):
        tier = xml.stem
        seconds = (
            float((root / f"{tier}.seconds").read_text()) if (root / f"{tier}.seconds").exists() else 0.0
        )
        tiers_seconds += seconds
        counts = {"passed": 0, "failed": 0, "skipped": 0}
        for case in ET.parse(xml).getroot().iter("testcase"):
            kinds = {child.tag for child in case}
            if kinds & {"failure", "error"}:
                counts["failed"] += 1
            elif "skipped" in kinds:
                counts["skipped"] += 1
            else:
                counts["passed"] += 1
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            cases.append((float(case.get("time") or 0), name))
        for key, value in counts.items():
            totals[key] += value
        cpu = root / f"{tier}.cpu"
        lines.append(
            f"tier {tier}: {_minutes(seconds)}, {counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['skipped']} skipped" + (cpu_busy(cpu.read_text()) if cpu.exists() else "")
        )
        spans = root / f"{tier}.timeline"
        if spans.exists():
            lines.extend(timeline(spans.read_text().splitlines()))
    lines.append(f"tests (every tier): {_minutes(tiers_seconds)}")
    print("\n=========================== run.sh test: summary ===========================")
    print("\n".join(lines))
    print("slowest 25 tests of the run:")
    for seconds, name in sorted(cases, reverse=True)[:25]:
        print(f"  {seconds:8.1f} s  {name}")
    print(f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
