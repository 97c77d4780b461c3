"""The soak's node CPU per call, this checkout against an older revision, measured back to back.

Checks out ``--against`` (default ``a404f77``, the code before issue 13's performance work) into
a temporary git worktree, then alternates ``benchmarks/soak.py --pin --no-restart`` runs of that
revision and of this checkout, ``--rounds`` times each, and prints every run's figures and, per
client count, the median CPU per call of each side and their ratio (this / baseline: 0.50 is the
issue's "halved"). Both sides run the same soak script (this checkout's), so only the node code
differs. Needs two CPUs and git; takes about 70 s per run with the defaults.

Run: ``.venv/bin/python benchmarks/soak_ab.py [--against REV] [--rounds 2] [--clients 20 50]``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

from ichor.machinery import proc

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parent
SOAK = HERE / "soak.py"
_LINE = re.compile(r"^(\d+) clients x .*?(\d+) calls/s.*?CPU per call: nodes ([\d.]+) ms", re.M)


def _soak(source: Path, clients: list[int], seconds: float) -> dict[int, tuple[float, int]]:
    """``clients -> (node CPU ms per call, calls/s)`` of one soak run of the Ichor in ``source``."""
    args = [sys.executable, str(SOAK), "--pin", "--no-restart", "--seconds", str(seconds)]
    args += ["--clients", *map(str, clients)]
    done = proc.run(args, env={"PYTHONPATH": str(source)}, check=False, timeout=900)
    found = {int(n): (float(cpu), int(rate)) for n, rate, cpu in _LINE.findall(done.stdout)}
    if done.exit_code != 0 or set(found) != set(clients):
        raise SystemExit(f"soak of {source} failed ({done.exit_code}):\n{done.stdout}\n{done.stderr}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/soak_ab.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="a404f77", help="the baseline revision (default: a404f77)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side, alternating")
    parser.add_argument("--clients", type=int, nargs="+", default=[20, 50], help="client counts")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each client count's run")
    args = parser.parse_args(argv)

    results: dict[str, dict[int, list[tuple[float, int]]]] = {"baseline": {}, "this": {}}
    with tempfile.TemporaryDirectory(prefix="soak-ab-") as tmp:
        worktree = Path(tmp) / "baseline"
        proc.run(["git", "-C", str(CHECKOUT), "worktree", "add", "--detach", str(worktree), args.against])
        try:
            for round_ in range(1, args.rounds + 1):
                for side, source in (("baseline", worktree / "src"), ("this", CHECKOUT / "src")):
                    for clients, figures in _soak(source, args.clients, args.seconds).items():
                        results[side].setdefault(clients, []).append(figures)
                        cpu, rate = figures
                        print(
                            f"round {round_} {side:8} {clients:3} clients: {cpu:.2f} ms/call, {rate} calls/s",
                            flush=True,
                        )
        finally:
            proc.run(
                ["git", "-C", str(CHECKOUT), "worktree", "remove", "--force", str(worktree)], check=False
            )
    print(f"\nnode CPU per call, median of {args.rounds} (this checkout / {args.against}):")
    for clients in args.clients:
        base = statistics.median(cpu for cpu, _ in results["baseline"][clients])
        this = statistics.median(cpu for cpu, _ in results["this"][clients])
        print(
            f"  {clients:3} clients: {args.against} {base:.2f} ms, this {this:.2f} ms, ratio {this / base:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
