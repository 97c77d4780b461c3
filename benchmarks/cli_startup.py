"""CLI start-up and ``gen config`` wall time, as ratios to a bare ``python -c pass`` (same run).

Run: ``.venv/bin/python benchmarks/cli_startup.py [--runs N]``.

This machine sets PYTHONDONTWRITEBYTECODE=1, so by default no ``.pyc`` files exist and every start
compiles from source. The script measures both states and says which is which: "cold source" with
bytecode writing off and an empty cache prefix, and "with .pyc" after one warm-up run has written
a private bytecode cache (PYTHONPYCACHEPREFIX), which is what an installed package normally has.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
TALOSCTL = [sys.executable, "-m", "ichor"]


def _time(cmd: list[str], env: dict[str, str], runs: int, cwd: str | None = None) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    cases = {
        "talosctl --help": [*TALOSCTL, "--help"],
        "talosctl version --client": [*TALOSCTL, "version", "--client"],
    }
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as work:
        cold = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=os.path.join(cache, "none"))
        warm = dict(os.environ, PYTHONPYCACHEPREFIX=os.path.join(cache, "pyc"))
        warm.pop("PYTHONDONTWRITEBYTECODE", None)
        # One run of everything with bytecode writing on fills the private cache.
        for cmd in cases.values():
            subprocess.run(cmd, env=warm, check=True, stdout=subprocess.DEVNULL)
        gen = [*TALOSCTL, "gen", "config", "bench", "https://10.0.0.1:6443", "--force", "-o", work]
        subprocess.run(gen, env=warm, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        for label, env in (("cold source (no .pyc)", cold), ("with .pyc", warm)):
            base = _time([sys.executable, "-c", "pass"], env, args.runs)
            print(f"[{label}] python -c pass: {base * 1000:.1f} ms (baseline)")
            for name, cmd in cases.items():
                t = _time(cmd, env, args.runs)
                print(f"[{label}] {name}: {t * 1000:.1f} ms = {t / base:.2f}x baseline")
            t = _time(gen, env, max(3, args.runs // 3))
            print(
                f"[{label}] talosctl gen config (new PKI, docs+examples): {t * 1000:.1f} ms = {t / base:.2f}x baseline"
            )


if __name__ == "__main__":
    main()
