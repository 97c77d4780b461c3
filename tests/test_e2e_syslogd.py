"""End to end: syslogd (004:724-728) on a process node and on a container node.

* Process cluster (one control plane): an RFC 3164 and an RFC 5424 message sent to the node's
  ``/dev/log`` come back from ``talosctl logs syslogd`` as Talos's JSON lines; ``service syslogd``
  is Running.
* Container cluster (one control plane) with an extension service that mounts ``/dev/log`` and
  logs with busybox ``logger``: its message is in ``logs syslogd``, so an extension service that
  logs to syslog keeps its logs.
"""

from __future__ import annotations

import json
import os
import random
import socket
from pathlib import Path

import pytest
from cluster_helpers import talosctl_in
from container_helpers import CONTAINER_NODES, container_cluster
from test_e2e_extension_services import MANIFEST, MOUNT_POINTS, eventually

from ichor.images import busybox_rootfs
from ichor.machined.platform import Layout
from ichor.provision._cluster import ClusterRecord

pytestmark = pytest.mark.e2e

LOGGER = """\
name: syslogger
container:
  entrypoint: /bin/busybox
  args: [sh, -c, "/bin/busybox logger -t syslogger 'hello from an extension'; exec /bin/busybox sleep 3600"]
  mounts:
    - source: /dev/log
      destination: /dev/log
      type: bind
      options: [bind, rw]
restart: always
"""


def _json_lines(text: str) -> list[dict[str, object]]:
    """The JSON objects of ``logs syslogd``, each line after talosctl's ``<node>: `` prefix."""
    return [json.loads(line[line.index("{") :]) for line in text.splitlines() if "{" in line]


def test_dev_log_messages_in_logs_syslogd_on_a_process_node(tmp_path: Path) -> None:
    name, prefix = "syslogp", f"127.{random.randint(150, 199)}.{random.randint(0, 255)}"
    node = f"{prefix}.2"
    created = talosctl_in(tmp_path, "cluster", "create", "--provisioner", "process", "--name", name,
                          "--cidr", f"{prefix}.0/24", "--workers", "0", "--wait-timeout", "3m", timeout=300)  # fmt: skip
    try:
        assert created.exit_code == 0, created.stderr[-3000:]
        root = Path(ClusterRecord.load(tmp_path / ".talos/clusters", name).nodes[0].root)
        dev_log = Layout(root, node).socket("/dev/log")

        def running() -> str | None:
            shown = talosctl_in(tmp_path, "-n", node, "service", "syslogd")
            return (
                None
                if "STATE    Running" in shown.stdout and dev_log.is_socket()
                else shown.stdout + shown.stderr
            )

        eventually(running, "syslogd running")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
            client.sendto(b"<30>Nov 26 12:00:01 myapp[42]: rfc3164 & friends", os.fspath(dev_log))
            client.sendto(
                b"<165>1 2003-10-11T22:14:15.003Z host app 7 ID47 - rfc5424 message", os.fspath(dev_log)
            )

        def logged() -> str | None:
            shown = talosctl_in(tmp_path, "-n", node, "logs", "syslogd")
            return None if "rfc5424 message" in shown.stdout else shown.stdout + shown.stderr

        eventually(logged, "both messages in logs syslogd", 20)
        shown = talosctl_in(tmp_path, "-n", node, "logs", "syslogd").stdout
        assert '"content":"rfc3164 \\u0026 friends"' in shown, shown  # Go's JSON, as Talos writes it
        first, second = _json_lines(shown)[-2:]
        assert (first["tag"], first["hostname"], first["facility"], first["severity"]) == (
            "myapp",
            "localhost",
            3,
            6,
        )
        assert (second["app_name"], second["msg_id"], second["timestamp"]) == (
            "app",
            "ID47",
            "2003-10-11T22:14:15.003Z",
        )
    finally:
        destroyed = talosctl_in(tmp_path, "cluster", "destroy", "--name", name)
    assert destroyed.exit_code == 0, destroyed.stderr
    assert not dev_log.exists()


@CONTAINER_NODES
def test_an_extension_service_logging_to_syslog_keeps_its_logs(tmp_path: Path) -> None:
    ext = tmp_path / "exts/syslogger"
    rootfs = ext / "rootfs/usr/local"
    (rootfs / "etc/containers").mkdir(parents=True)
    root = busybox_rootfs(rootfs / "lib/containers/syslogger", applets=("sh", "sleep"))
    for mount_point in MOUNT_POINTS:
        (root / mount_point).mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/containers/syslogger.yaml").write_text(LOGGER)
    (ext / "manifest.yaml").write_text(MANIFEST.replace("hello-world", "syslogger"))
    with container_cluster(tmp_path, "syslogc") as cluster:
        cluster.create("--workers", "0", "--extension", str(ext))
        node = cluster.address(2)

        def logged() -> str | None:
            shown = cluster.talosctl("-n", node, "logs", "syslogd")
            lines = [
                line
                for line in _json_lines(shown.stdout)
                if "hello from an extension" in str(line["content"])
            ]
            return (
                None
                if lines
                else shown.stdout + shown.stderr + cluster.talosctl("-n", node, "service").stdout
            )

        eventually(logged, "the extension's syslog message in logs syslogd", 120)
        line = next(
            line for line in _json_lines(cluster.talosctl("-n", node, "logs", "syslogd").stdout)
            if "hello from an extension" in str(line["content"])
        )  # fmt: skip
        # busybox logger writes "syslogger: ..." without a [pid]: Talos's parser leaves the tag unknown.
        assert (line["tag"], line["content"], line["priority"]) == (
            "unknown",
            "syslogger: hello from an extension",
            13,
        )
