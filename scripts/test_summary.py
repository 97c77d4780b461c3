"""The closing report of ``bash run.sh test``: how long set-up and each tier took, the 25 slowest tests
of the whole run, and one totals line over every tier.

``python scripts/test_summary.py SETUP_SECONDS DIR``, where DIR holds one ``<tier>.xml`` (pytest's
JUnit XML) and one ``<tier>.seconds`` (the tier's wall time) per tier that ran.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def _minutes(seconds: float) -> str:
    return f"{int(seconds) // 60} min {int(seconds) % 60:02d} s"


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
        lines.append(
            f"tier {tier}: {_minutes(seconds)}, {counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['skipped']} skipped"
        )
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
