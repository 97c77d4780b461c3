"""CLI start-up and ``gen config`` wall time, as ratios to a bare ``python -c pass`` (same run).

Run: ``.venv/bin/python benchmarks/cli_startup.py [--runs N] [--no-gen]``.

Three bytecode states, each measured against its own baseline in the same run (samples of each
command interleaved, so load from other processes falls on all of them alike):

* "as installed, ichor without .pyc": bytecode writing off (this machine sets
  PYTHONDONTWRITEBYTECODE=1); the standard library and site-packages have the ``.pyc`` files their
  installers wrote, Ichor's own modules (an editable install of ``src/``) have none and compile
  from source on every start. The script checks and states that no ``__pycache__`` exists under
  ``src/ichor``. This is the state the issue's 3x target is about.
* "no .pyc at all": additionally an empty PYTHONPYCACHEPREFIX, so every imported module compiles
  from source (the worst case).
* "with .pyc": a private cache written by one warm-up run, what an installed package normally has.
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

import ichor

TALOSCTL = [sys.executable, "-m", "ichor"]
SRC = Path(ichor.__file__).resolve().parent


def _run(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _medians(cases: dict[str, list[str]], env: dict[str, str], runs: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, cmd in cases.items():
            samples[name].append(_run(cmd, env))
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--no-gen", action="store_true", help="skip `gen config` (the slow case)")
    args = parser.parse_args()

    caches = list(SRC.rglob("__pycache__"))
    print(f"ichor modules from {SRC}: {'NO .pyc' if not caches else f'{len(caches)} __pycache__ dirs'}")
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "talosctl --help": [*TALOSCTL, "--help"],
        "talosctl version --client": [*TALOSCTL, "version", "--client"],
        "talosctl config contexts --help": [*TALOSCTL, "config", "contexts", "--help"],
    }
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as work:
        installed = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        installed.pop("PYTHONPYCACHEPREFIX", None)
        cold = dict(installed, PYTHONPYCACHEPREFIX=os.path.join(cache, "none"))
        warm = dict(os.environ, PYTHONPYCACHEPREFIX=os.path.join(cache, "pyc"))
        warm.pop("PYTHONDONTWRITEBYTECODE", None)
        gen = [*TALOSCTL, "gen", "config", "bench", "https://10.0.0.1:6443", "--force", "-o", work]
        if not args.no_gen:
            cases["talosctl gen config (new PKI, docs+examples)"] = gen
        # One run of everything with bytecode writing on fills the private cache.
        for cmd in cases.values():
            subprocess.run(cmd, env=warm, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        states = (
            ("as installed, ichor without .pyc", installed),
            ("no .pyc at all", cold),
            ("with .pyc", warm),
        )
        for label, env in states:
            times = _medians(cases, env, args.runs)
            base = times.pop("python -c pass")
            print(f"[{label}] python -c pass: {base * 1000:.1f} ms (baseline)")
            for name, t in times.items():
                print(f"[{label}] {name}: {t * 1000:.1f} ms = {t / base:.2f}x baseline")


if __name__ == "__main__":
    main()
