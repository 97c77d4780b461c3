"""Extension services on container nodes: the seed's ``ext-hello-world`` built from busybox httpd."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, ContainerCluster, container_cluster

from ichor.images import busybox_rootfs

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

MANIFEST = """\
version: v1alpha1
metadata:
  name: hello-world
  version: 1.0.0
  author: Ichor tests
  description: busybox httpd as the seed's hello-world extension service
  compatibility:
    talos:
      version: ">= v1.7.0"
"""
HELLO = """\
name: hello-world
container:
  entrypoint: ./bin/busybox
  args: [httpd, -f, -v, -p, "8080", -h, /var/www]
depends:
  - network:
    - addresses
restart: always
"""
ONESHOT = """\
name: oneshot
container:
  entrypoint: ./bin/busybox
  args: [sh, -c, "echo going away; exit 3"]
restart: never
"""
UNTIL = """\
name: until
container:
  entrypoint: ./bin/busybox
  args: [sh, -c, "exit 0"]
restart: untilSuccess
"""
FOREVER = """\
name: forever
container:
  entrypoint: ./bin/busybox
  args: [sh, -c, "exit 1"]
restart: always
"""
BROKEN = "name: Bad_Name\ncontainer:\n  entrypoint: ./x\ndepends:\n  - bogus: 1\nrestart: always\n"
MOUNT_POINTS = ("proc", "dev", "sys", "run")
CONFIG = """\
apiVersion: v1alpha1
kind: ExtensionServiceConfig
name: hello-world
configFiles:
  - content: "{text}"
    mountPath: /var/www/config.txt
environment:
  - GREETING={text}
"""


def make_extension(root: Path) -> Path:
    ext = root / "hello-world"
    rootfs = ext / "rootfs/usr/local"
    specs = rootfs / "etc/containers"
    specs.mkdir(parents=True)
    for name in ("hello-world", "oneshot", "until", "forever"):
        root = busybox_rootfs(rootfs / "lib/containers" / name)
        for mount_point in MOUNT_POINTS:  # a read-only rootfs must ship its mount points
            (root / mount_point).mkdir(parents=True, exist_ok=True)
        (root / "var/www/config.txt").write_text("")
    (rootfs / "lib/containers/hello-world/var/www/index.html").write_text("hello from an extension\n")
    (specs / "hello-world.yaml").write_text(HELLO)
    (specs / "oneshot.yaml").write_text(ONESHOT)
    (specs / "until.yaml").write_text(UNTIL)
    (specs / "forever.yaml").write_text(FOREVER)
    (specs / "broken.yaml").write_text(BROKEN)
    (ext / "manifest.yaml").write_text(MANIFEST)
    return ext


def eventually(check: Callable[[], str | None], what: str, timeout: float = 90) -> None:
    """Poll ``check`` (None = done, else the reason it is not) until done or ``timeout``."""
    deadline = time.monotonic() + timeout
    reason: str | None = "not checked"
    while time.monotonic() < deadline:
        reason = check()
        if reason is None:
            return
        time.sleep(1)
    raise AssertionError(f"{what}: {reason}")


def system_containerd(cluster: ContainerCluster, node: str) -> int:
    """The host PID of ``node``'s system containerd (a descendant of its launcher)."""
    todo = [cluster.launcher_pid(node)]
    while todo:
        pid = todo.pop()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if argv[0].endswith(b"containerd") and b"/etc/containerd/config.toml" in argv:
            return pid
        todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    raise AssertionError(f"no system containerd in {node}")


def host_cgroups(name: str) -> list[Path]:
    return [p for p in Path("/sys/fs/cgroup").glob(f"*/**/extensions/{name}") if p.is_dir()]


def test_hello_world_extension_service(tmp_path: Path) -> None:
    ext = make_extension(tmp_path / "exts")
    with container_cluster(tmp_path, "ext-svc") as cluster:
        cluster.create("--controlplanes", "1", "--workers", "1", "--extension", str(ext))
        cp, worker_name = cluster.address(2), "ext-svc-worker-1"

        def service(node: str, sid: str) -> str:
            shown = cluster.talosctl("-n", node, "service", sid)
            return shown.stdout + shown.stderr

        def running(node: str, sid: str = "ext-hello-world") -> Callable[[], str | None]:
            return lambda: None if "STATE    Running" in (text := service(node, sid)) else text

        def more_starts(than: int) -> Callable[[], str | None]:
            def check() -> str | None:
                text = service(cp, "ext-hello-world")
                return None if text.count("Started task") > than else text

            return check

        eventually(running(cp), "ext-hello-world Running on the control plane")
        shown = service(cp, "ext-hello-world")
        assert "HEALTH   ?" in shown
        events = [line.split("]: ", 1)[1].rsplit(" (", 1)[0] for line in shown.splitlines() if "]: " in line]
        assert events[0].startswith("Started task ext-hello-world (PID ")
        assert events[0].endswith(" for container ext-hello-world")
        assert events[1:3] == ["Creating service runner", "Running pre state"]
        assert any(e.startswith('Waiting for service "containerd" to be "up"') for e in events[3:]), shown

        def page() -> str | None:
            got = cluster.in_node(worker_name, "busybox", "wget", "-q", "-O", "-", f"http://{cp}:8080/")
            return None if got.stdout == "hello from an extension\n" else got.stdout + got.stderr

        eventually(page, "the page answers from the worker", timeout=30)
        logs = cluster.talosctl("-n", cp, "logs", "ext-hello-world")
        # busybox httpd -v logs each answer with the client's address: the worker's
        assert f"[::ffff:{cluster.address(3)}]" in logs.stdout, logs.stdout + logs.stderr
        assert "response:200" in logs.stdout, logs.stdout

        # stats, restart and a bad id through the container API
        stats = cluster.talosctl("-n", cp, "stats")
        assert stats.stdout.splitlines()[0].split() == ["NODE", "NAMESPACE", "ID", "MEMORY(MB)", "CPU"]
        row = next((r.split() for r in stats.stdout.splitlines() if "ext-hello-world" in r.split()), [])
        assert row[:3] == [cp, "system", "ext-hello-world"], stats.stdout + stats.stderr
        assert float(row[3]) > 0 and int(row[4]) > 0, row
        missing = cluster.talosctl("-n", cp, "restart", "no-such-container")
        assert missing.exit_code != 0 and 'container "no-such-container" not found' in missing.stderr
        for wrong in (("restart", "-k", "ext-hello-world"), ("logs", "-k", "ext-hello-world")):
            refused = cluster.talosctl("-n", cp, *wrong)
            assert refused.exit_code != 0 and "drop -k (--kubernetes)" in refused.stderr, refused.stderr
        before = service(cp, "ext-hello-world").count("Started task")
        restarted = cluster.talosctl("-n", cp, "restart", "ext-hello-world")
        assert restarted.exit_code == 0 and restarted.stdout == "", restarted.stderr
        eventually(more_starts(before), "restarted by its supervisor after talosctl restart")
        eventually(page, "the page answers after talosctl restart", timeout=30)

        # stop / start / restart through the API
        assert cluster.talosctl("-n", cp, "service", "ext-hello-world", "stop").exit_code == 0
        eventually(
            lambda: None if "STATE    Finished" in (t := service(cp, "ext-hello-world")) else t, "stopped"
        )
        assert "Sending SIGTERM to task ext-hello-world" in service(cp, "ext-hello-world")
        assert (
            cluster.in_node(worker_name, "busybox", "wget", "-q", "-O", "-", f"http://{cp}:8080/").exit_code
            != 0
        )
        assert cluster.talosctl("-n", cp, "service", "ext-hello-world", "start").exit_code == 0
        eventually(running(cp), "started again")
        eventually(page, "the page answers after start", timeout=30)
        before = service(cp, "ext-hello-world").count("Started task")
        assert cluster.talosctl("-n", cp, "service", "ext-hello-world", "restart").exit_code == 0
        eventually(more_starts(before), "restarted")

        # a new ExtensionServiceConfig version restarts it, with the file and environment
        base = cluster.talosctl("-n", cp, "read", "/system/state/config.yaml").stdout
        for text in ("first", "second"):
            started = service(cp, "ext-hello-world").count("Started task")
            patched = tmp_path / f"config-{text}.yaml"
            patched.write_text(base.rstrip("\n") + "\n---\n" + CONFIG.format(text=text))
            applied = cluster.talosctl(
                "-n", cp, "apply-config", "--file", str(patched), "--mode", "no-reboot"
            )
            assert applied.exit_code == 0, applied.stdout + applied.stderr
            eventually(more_starts(started), f"restart for config {text}")
            eventually(running(cp), "running with the config")

            def served(text: str = text) -> str | None:
                got = cluster.in_node(
                    worker_name, "busybox", "wget", "-q", "-O", "-", f"http://{cp}:8080/config.txt"
                )
                return None if got.stdout == text else got.stdout + got.stderr

            eventually(served, f"config file {text} served", timeout=30)

        # kill -9 the system containerd: the supervisor restarts it and ext-hello-world comes back
        started = service(cp, "ext-hello-world").count("Started task")
        os.kill(system_containerd(cluster, "ext-svc-controlplane-1"), signal.SIGKILL)
        eventually(more_starts(started), "ext-hello-world back after containerd was killed")
        eventually(page, "the page answers again", timeout=30)

        # a process that exits at once under restart: never, and a refused spec
        eventually(
            lambda: None if "STATE    Failed" in (t := service(cp, "ext-oneshot")) else t, "oneshot Failed"
        )
        assert "exit status 3" in service(cp, "ext-oneshot")
        assert "going away" in cluster.talosctl("-n", cp, "logs", "ext-oneshot").stdout
        # untilSuccess: a clean exit finishes it; always: an exit is restarted, with the reason
        eventually(
            lambda: None if "STATE    Finished" in (t := service(cp, "ext-until")) else t, "until Finished"
        )
        assert "Service finished successfully" in service(cp, "ext-until")
        restarting = "Error running Containerd(ext-forever), going to restart forever: exit status 1"
        eventually(
            lambda: None if restarting in (t := service(cp, "ext-forever")) else t, "forever restarting"
        )
        broken = service(cp, "ext-broken")
        assert "STATE    Failed" in broken and 'name "Bad_Name" is invalid' in broken, broken
        assert "depends[0].bogus: unknown key" in broken, broken
        listed = cluster.talosctl("-n", cp, "services")
        for sid in ("apid", "containerd", "cri", "etcd", "machined", "trustd", "ext-hello-world"):
            row = next((r for r in listed.stdout.splitlines() if r.split()[1:2] == [sid]), "")
            assert "Running" in row, listed.stdout
        assert host_cgroups("hello-world"), "the container runs in a cgroup of its own"
    assert not host_cgroups("hello-world"), "destroy left the extension's cgroups behind"
