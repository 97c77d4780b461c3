"""An extension service from ``service start`` to its task running, beside ``ctr run`` of the same spec.

One container cluster (1 control plane) is created with a busybox-httpd extension (``ext-bench``). Each
run, in alternating order:

- service: ``talosctl service ext-bench stop``, then the wall time from ``talosctl service ext-bench
  start`` until the node's system containerd lists task ``ext-bench`` RUNNING (``ctr tasks ls``
  polled every 20 ms inside the node): the talosctl call, apid/machined, the supervisor's states,
  writing ``config.json`` and ``ctr run``;
- baseline: the wall time of ``ctr run -d --rm --config <the service's config.json>`` for a
  container ``bench-base`` (same spec, same rootfs, same containerd) until it returns with the task
  started, then the container removed.

Reported: the medians and the ratio service / ``ctr run``. Measured (2 CPUs shared, 5 runs): 0.52 s
vs 0.11 s, 4.8x (the service figure includes a whole talosctl process and mutual-TLS call; how it
splits between that, the supervisor and the ``ctr tasks ls`` polls was not measured). Root only, with container nodes that have
cgroups of their own. Every cluster is destroyed in a ``finally``. Run:
``.venv/bin/python benchmarks/extensions.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ichor.images import busybox_rootfs
from ichor.provision._processes import find

PY = sys.executable
NAME = "bench"
SPEC = f"name: {NAME}\ncontainer:\n  entrypoint: ./bin/busybox\n  args: [httpd, -f, -p, '8081', -h, /var/www]\nrestart: always\n"
MANIFEST = (
    "version: v1alpha1\nmetadata:\n  name: bench\n  version: 1.0.0\n  author: Ichor\n  description: bench\n"
)
SOCKET = "/system/run/containerd/containerd.sock"


def _talosctl(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HOME=str(home), TALOSCONFIG=str(home / "talosconfig"))
    return subprocess.run([PY, "-m", "ichor", *args], env=env, cwd=home, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def _extension(root: Path) -> Path:
    ext = root / NAME
    local = ext / "rootfs/usr/local"
    (local / "etc/containers").mkdir(parents=True)
    rootfs = busybox_rootfs(local / "lib/containers" / NAME)
    for mount_point in ("proc", "dev", "sys", "run"):
        (rootfs / mount_point).mkdir(exist_ok=True)
    (local / "etc/containers" / f"{NAME}.yaml").write_text(SPEC)
    (ext / "manifest.yaml").write_text(MANIFEST)
    return ext


def _machined(state: Path) -> int:
    for process in find(state):
        if process.role == "launcher":
            todo = [process.id.pid]
            while todo:
                pid = todo.pop()
                if b"ichor.machined" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return pid
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                todo += [int(c) for c in children]
    raise SystemExit(f"no machined under {state}")


def _ctr(pid: int, *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["nsenter", "-t", str(pid), "-m", "-r", "-n", "-p", "ctr", "--address", SOCKET, "-n", "system"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60, check=False)


def _running(pid: int, task: str) -> bool:
    return any(
        line.split()[:1] == [task] and "RUNNING" in line
        for line in _ctr(pid, "tasks", "ls").stdout.splitlines()
    )


def _service(home: Path, node: str, pid: int) -> float:
    _talosctl(home, "-n", node, "service", f"ext-{NAME}", "stop")
    while _running(pid, f"ext-{NAME}"):
        time.sleep(0.05)
    start = time.perf_counter()
    _talosctl(home, "-n", node, "service", f"ext-{NAME}", "start")
    while not _running(pid, f"ext-{NAME}"):
        time.sleep(0.02)
    return time.perf_counter() - start


def _baseline(pid: int, config: str) -> float:
    start = time.perf_counter()
    ran = _ctr(pid, "run", "-d", "--config", config, "bench-base")
    took = time.perf_counter() - start
    if ran.returncode != 0:
        raise SystemExit(f"ctr run failed: {ran.stderr}")
    _ctr(pid, "tasks", "delete", "--force", "bench-base")
    _ctr(pid, "containers", "delete", "bench-base")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ichor-bench-ext-") as tmp:
        home, state = Path(tmp) / "home", Path(tmp) / "clusters"
        home.mkdir()
        cidr = f"10.{random.choice([n for n in range(200, 251) if n != 244])}.{random.randint(0, 255)}.0/24"
        node = cidr.rsplit(".", 1)[0] + ".2"
        try:
            created = _talosctl(home, "cluster", "create", "--provisioner", "container", "--name", "bench-ext",
                                "--state", str(state), "--cidr", cidr, "--controlplanes", "1", "--workers", "0",
                                "--extension", str(_extension(Path(tmp))))  # fmt: skip
            if created.returncode != 0:
                raise SystemExit(created.stdout + created.stderr)
            pid = _machined(state / "bench-ext")
            while not _running(pid, f"ext-{NAME}"):
                time.sleep(0.1)
            # The baseline runs the service's own spec with `sleep` in place of httpd (the port is taken).
            spec = _ctr(pid, "containers", "info", f"ext-{NAME}").stdout
            config = f"/system/run/extensions/{NAME}/base.json"
            oci = json.loads(spec)["Spec"]
            oci["process"]["args"] = ["./bin/busybox", "sleep", "30"]
            Path(f"/proc/{pid}/root{config}").write_text(json.dumps(oci))
            service: list[float] = []
            base: list[float] = []
            for run in range(args.runs):
                if run % 2:
                    service.append(_service(home, node, pid))
                    base.append(_baseline(pid, config))
                else:
                    base.append(_baseline(pid, config))
                    service.append(_service(home, node, pid))
        finally:
            _talosctl(home, "cluster", "destroy", "--name", "bench-ext", "--state", str(state), "--force")
    s, b = statistics.median(service), statistics.median(base)
    print(f"runs={args.runs} service start -> task running: median {s:.3f} s; ctr run -d: median {b:.3f} s; "
          f"ratio {s / b:.1f}x")  # fmt: skip


if __name__ == "__main__":
    main()
