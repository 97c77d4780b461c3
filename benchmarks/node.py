"""Node figures, each against a baseline measured in the same run.

- boot to API-ready: a node process started with a config until `version` answers through apid,
  as a ratio to starting one bare Python interpreter (`python -c pass`);
- `cluster create` 1+1 until every node is configured and answers, as a ratio to starting two
  bare interpreters;
- machined idle RSS;
- unary RPC latency (Version) p50/p99: direct to machined's unix socket, through apid (one hop), and
  one-to-many fan-out through one control plane to 5 nodes.

Run: ``.venv/bin/python benchmarks/node.py``. Bytecode: says whether ``.pyc`` files were used.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ichor.machinery import proc

PY = sys.executable


def _bare(n: int) -> float:
    start = time.perf_counter()
    procs = [proc.start([PY, "-c", "pass"], output=Path(os.devnull)) for _ in range(n)]
    for p in procs:
        p.wait()
    return time.perf_counter() - start


def _talosctl(home: Path, *args: str) -> proc.Completed:
    env = {"HOME": str(home), "TALOSCONFIG": str(home / ".talos/config")}
    return proc.run([PY, "-m", "ichor", *args], env=env, cwd=home, check=True, timeout=300)


async def _latency(client_factory, calls: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    from google.protobuf import empty_pb2

    samples = []
    async with client_factory() as client:
        await client.machine.Version(empty_pb2.Empty())  # connect
        for _ in range(calls):
            t = time.perf_counter()
            await client.machine.Version(empty_pb2.Empty())
            samples.append(time.perf_counter() - t)
    samples.sort()
    return statistics.median(samples) * 1000, samples[int(len(samples) * 0.99) - 1] * 1000


def main() -> None:
    from ichor.client import Client
    from ichor.machinery.clientconfig import GlobalOptions
    from ichor.provision._record import ClusterRecord

    pyc = os.environ.get("PYTHONDONTWRITEBYTECODE") != "1"
    print(
        f"bytecode: {'.pyc files may be written/used' if pyc else 'PYTHONDONTWRITEBYTECODE=1, no .pyc (cold source)'}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        base1 = statistics.median(_bare(1) for _ in range(5))
        base2 = statistics.median(_bare(2) for _ in range(5))
        print(f"baseline: 1 bare interpreter {base1 * 1000:.0f} ms, 2 in parallel {base2 * 1000:.0f} ms")

        start = time.perf_counter()
        _talosctl(
            home,
            "cluster",
            "create",
            "--provisioner",
            "process",
            "--name",
            "bench",
            "--cidr",
            "127.9.0.0/24",
            "--workers",
            "1",
        )
        create = time.perf_counter() - start
        print(
            f"cluster create 1+1 to all nodes configured and answering: {create * 1000:.0f} ms = {create / base2:.1f}x baseline"
        )
        try:
            record = ClusterRecord.load(home / ".talos/clusters", "bench")
            cp = record.nodes[0]
            # RSS of the idle control plane's machined (the launcher's child).
            for pid_dir in Path("/proc").iterdir():
                if not pid_dir.name.isdigit():
                    continue
                try:
                    cmd = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ")
                except OSError:
                    continue
                if b"ichor.machined" in cmd and cp.root.encode() in cmd:
                    rss = next(
                        line
                        for line in (pid_dir / "status").read_text().splitlines()
                        if line.startswith("VmRSS")
                    )
                    print(f"machined idle RSS (control plane): {rss.split(':')[1].strip()}")

            # Boot to API-ready: reboot the worker and time until it answers again.
            worker = record.nodes[1]
            _talosctl(home, "-n", worker.address, "reboot", "--wait=false")
            t0 = time.perf_counter()
            time.sleep(0.3)
            while proc.run([PY, "-m", "ichor", "-n", worker.address, "version", "--short"],
                           env={"HOME": str(home), "TALOSCONFIG": str(home / ".talos/config")}, check=False).exit_code != 0:  # fmt: skip
                pass
            boot = time.perf_counter() - t0
            print(
                f"reboot to API-ready (incl. one talosctl start per probe): {boot * 1000:.0f} ms = {boot / base1:.1f}x baseline"
            )

            tc = str(home / ".talos/config")

            def direct() -> Client:
                from ichor.client import Client as C

                return C.from_options(
                    GlobalOptions(talosconfig=str(tc), context="bench", endpoints=[cp.address], nodes=[])
                )

            def via_apid() -> Client:
                return Client.from_options(
                    GlobalOptions(
                        talosconfig=str(tc), context="bench", endpoints=[cp.address], nodes=[cp.address]
                    )
                )

            def hop() -> Client:
                return Client.from_options(
                    GlobalOptions(
                        talosconfig=str(tc), context="bench", endpoints=[cp.address], nodes=[worker.address]
                    )
                )

            for label, factory in (("apid -> machined (no nodes metadata)", direct),
                                   ("apid -> machined (nodes=cp)", via_apid),
                                   ("apid -> worker apid -> machined (one proxy hop)", hop)):  # fmt: skip
                p50, p99 = asyncio.run(_latency(factory, 300))
                print(f"Version latency, {label}: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
        finally:
            _talosctl(home, "cluster", "destroy", "--name", "bench")

        _talosctl(
            home,
            "cluster",
            "create",
            "--provisioner",
            "process",
            "--name",
            "fan",
            "--cidr",
            "127.9.1.0/24",
            "--workers",
            "4",
        )
        try:
            record = ClusterRecord.load(home / ".talos/clusters", "fan")
            nodes = [n.address for n in record.nodes]
            tc = str(home / ".talos/config")
            p50, p99 = asyncio.run(
                _latency(
                    lambda: Client.from_options(
                        GlobalOptions(talosconfig=str(tc), context="fan", endpoints=[nodes[0]], nodes=nodes)
                    ),
                    200,
                )
            )
            print(f"Version fan-out to 5 nodes through one control plane: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
        finally:
            _talosctl(home, "cluster", "destroy", "--name", "fan")


if __name__ == "__main__":
    main()
