"""Hostile input replayed against a real node process (issue 13), with figures a reader can compare.

- defect 1: the 360-byte alias bomb ("billion laughs") sent with apply-config, in maintenance mode
  (no certificate) and to the configured node: the answer, its time and the node's peak RSS;
- defect 3: a 10 MB and a 4 MiB config sent with apply-config while a second client calls Version
  in a loop: the answer, the apply time, Version latency (p50/p99/max) during the apply and the
  peak RSS. Baseline: Version latency with nothing applied, measured in the same run;
- repeated applies: RSS after N applies of a ~100 KiB config, each with Version calls in flight
  (whatever the config store does per apply must not accumulate).

Peak RSS is sampled from ``/proc/<pid>/status`` every 2 ms while a replay runs (``VmRSS``) and
also read as the kernel's high-water mark (``VmHWM``, since the node started).

Run: ``.venv/bin/python benchmarks/hostile_input.py [--applies 200]``. It starts one node process
on a random 127.x address, configures it as a control plane (etcd included) and stops it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from google.protobuf import empty_pb2

from ichor.api.gen.machine import machine_pb2
from ichor.client import Client, ClientError
from ichor.machinery import proc
from ichor.machinery.clientconfig import GlobalOptions

PY = sys.executable
MODES = machine_pb2.ApplyConfigurationRequest

# 9 levels of 9 references: 9**9 strings when expanded (the reproduction of defect 1).
ALIAS_BOMB = (
    "version: v1alpha1\n"
    + 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(f"{n}: &{n} [{','.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))
)


def _status(pid: int, key: str) -> int:
    """A ``/proc/<pid>/status`` size in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


@contextlib.contextmanager
def _peak_rss(pid: int) -> Iterator[list[int]]:
    """Samples VmRSS every 2 ms while the block runs; yields [peak KiB] (filled in on exit)."""
    peak = [_status(pid, "VmRSS")]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.002):
            peak[0] = max(peak[0], _status(pid, "VmRSS"))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def _hosts_config(base: str, target_bytes: int) -> str:
    """``base`` with enough host entries (no reboot needed to apply them) to reach ``target_bytes``."""
    entry = "            - ip: 10.{a}.{b}.{c}\n              aliases:\n                  - host-{i:06d}.{pad}.example\n"
    pad = "a-long-name-to-keep-the-node-count-under-its-limit"
    lines, size, i = [], len(base.encode()) + 64, 0
    while size < target_bytes:
        line = entry.format(a=i // 65536, b=(i // 256) % 256, c=i % 256, i=i, pad=pad)
        lines.append(line)
        size += len(line)
        i += 1
    network = "    network:\n        hostname: big\n        extraHostEntries:\n" + "".join(lines)
    return base.replace("    network: {}", network, 1)


async def _while_applying(
    prober: Client, apply: Callable[[], Awaitable[Any]], pid: int
) -> tuple[str, float, list[float], int]:
    """Runs ``apply`` while ``prober`` calls Version in a loop: (answer, seconds, latencies, peak RSS KiB)."""
    with _peak_rss(pid) as peak:
        started = time.perf_counter()
        task = asyncio.ensure_future(apply())
        latencies: list[float] = []
        while not task.done():
            t = time.perf_counter()
            await prober.machine.Version(empty_pb2.Empty())
            latencies.append(time.perf_counter() - t)
            await asyncio.sleep(0.01)
        try:
            reply = await task
            message = reply.messages[0]
            if message.metadata.error:  # one-to-many replies carry a node's error in its metadata
                answer = f"refused: {message.metadata.error.splitlines()[0][:110]}"
            else:
                answer = (message.mode_details.splitlines() or ["ok"])[0]
        except ClientError as exc:
            answer = f"refused: {str(exc).splitlines()[0][:110]}"
        elapsed = time.perf_counter() - started
    return answer, elapsed, latencies, peak[0]


def _latency_line(samples: list[float]) -> str:
    if not samples:
        return "no Version call completed"
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"Version x{len(ordered)}: p50 {statistics.median(ordered) * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"
    )


async def _replays(home: Path, address: str, pid: int, applies: int) -> None:
    maintenance = GlobalOptions(nodes=[address])
    opts = GlobalOptions(talosconfig=str(home / "talosconfig"), endpoints=[address], nodes=[address])
    base = (home / "controlplane.yaml").read_text()

    def apply_to(client: Client, text: str | bytes) -> Callable[[], Awaitable[Any]]:
        data = text.encode() if isinstance(text, str) else text
        return lambda: client.machine.ApplyConfiguration(MODES(data=data, mode=MODES.NO_REBOOT))

    async with Client.from_options(maintenance, insecure=True) as client:
        with _peak_rss(pid) as peak:
            t = time.perf_counter()
            try:
                await client.machine.ApplyConfiguration(MODES(data=ALIAS_BOMB.encode(), mode=MODES.AUTO))
                answer = "accepted (!)"
            except ClientError as exc:
                answer = f"refused: {str(exc).splitlines()[0][:110]}"
            took = time.perf_counter() - t
        print(f"defect 1, alias bomb ({len(ALIAS_BOMB)} bytes), maintenance mode: {answer}")
        print(f"  in {took * 1000:.0f} ms, peak RSS {peak[0] / 1024:.0f} MiB")
        await client.machine.ApplyConfiguration(MODES(data=base.encode(), mode=MODES.AUTO))

    deadline = time.monotonic() + 60
    while True:
        try:
            async with Client.from_options(opts) as probe:
                await probe.machine.Version(empty_pb2.Empty())
            break
        except ClientError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
    await asyncio.sleep(5)  # let the control plane's services (etcd) settle before measuring

    async with Client.from_options(opts) as client, Client.from_options(opts) as prober:
        idle: list[float] = []
        for _ in range(200):
            t = time.perf_counter()
            await prober.machine.Version(empty_pb2.Empty())
            idle.append(time.perf_counter() - t)
            await asyncio.sleep(0.01)
        print(f"baseline, nothing applied: {_latency_line(idle)}; RSS {_status(pid, 'VmRSS') / 1024:.0f} MiB")

        if applies:
            before, warm = _status(pid, "VmRSS"), 0
            all_latencies: list[float] = []
            for i in range(applies):
                text = _hosts_config(base, 100 * 1024).replace("hostname: big", f"hostname: h{i}", 1)
                _, _, latencies, _ = await _while_applying(prober, apply_to(client, text), pid)
                all_latencies += latencies
                if i == applies // 10:
                    warm = _status(pid, "VmRSS")
            after = _status(pid, "VmRSS")
            print(
                f"{applies} applies of a 100 KiB config: RSS {before / 1024:.0f} MiB before, "
                f"{warm / 1024:.0f} MiB after {applies // 10 + 1}, {after / 1024:.0f} MiB after {applies} "
                f"({(after - warm) / 1024:+.1f} MiB over the last {applies - applies // 10 - 1}); "
                f"{_latency_line(all_latencies)}"
            )

        answer, took, _, rss = await _while_applying(prober, apply_to(client, ALIAS_BOMB), pid)
        print(f"defect 1, alias bomb, configured node: {answer}")
        print(f"  in {took * 1000:.0f} ms, peak RSS {rss / 1024:.0f} MiB")

        for label, size in (("10 MB", 10_000_000), ("4 MiB", 4 * 1024 * 1024 - 64 * 1024)):
            text = _hosts_config(base, size)
            answer, took, latencies, rss = await _while_applying(prober, apply_to(client, text), pid)
            print(f"defect 3, {label} config ({len(text.encode()) / 1024 / 1024:.1f} MiB): {answer}")
            print(f"  in {took:.2f} s; {_latency_line(latencies)}; peak RSS {rss / 1024:.0f} MiB")
    print(f"node peak RSS since start (VmHWM): {_status(pid, 'VmHWM') / 1024:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--applies", type=int, default=50, help="repeated applies of a 100 KiB config")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        address = f"127.{random.randint(100, 199)}.{random.randint(0, 255)}.{random.randint(2, 250)}"
        node = proc.start(
            [PY, "-m", "ichor.machined", "--root", str(home / "node"), "--address", address],
            output=home / "node.log",
        )
        try:
            proc.run([PY, "-m", "ichor", "gen", "config", "bench", f"https://{address}:6443"], cwd=home)
            console = home / "node/var/log/console.log"
            deadline = time.monotonic() + 60
            while "entering maintenance service" not in (console.read_text() if console.exists() else ""):
                if time.monotonic() > deadline or node.poll() is not None:
                    raise SystemExit(
                        f"node did not reach maintenance mode:\n{(home / 'node.log').read_text()}"
                    )
                time.sleep(0.1)
            print(f"node {address}, pid {node.pid}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
            asyncio.run(_replays(home, address, node.pid, args.applies))
        finally:
            node.stop()


if __name__ == "__main__":
    main()
