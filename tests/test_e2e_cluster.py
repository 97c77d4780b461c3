"""End to end: ``talosctl cluster create`` with node processes, then commands through the endpoint."""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest
from cluster_helpers import cli_env
from cluster_helpers import talosctl_in as _talosctl

from ichor.machinery import proc
from ichor.provision._processes import ProcessId, find

pytestmark = pytest.mark.e2e


def _wait_for_text(path: Path, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in {path.name} within {timeout}s:\n{path.read_text()[-2000:]}")


def test_cluster_create_1_plus_1_and_talk_to_both_nodes(tmp_path: Path) -> None:
    cidr = f"127.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"
    prefix = cidr.rsplit(".", 1)[0]
    cp, worker = f"{prefix}.2", f"{prefix}.3"
    created = _talosctl(
        tmp_path,
        "cluster",
        "create",
        "--provisioner",
        "process",
        "--name",
        "e2e",
        "--cidr",
        cidr,
        "--wait-timeout",
        "2m",
    )
    try:
        assert created.exit_code == 0, created.stderr
        assert "cluster 'e2e' is up: 2 nodes configured" in created.stderr
        # Progress says what is awaited, never a raw gRPC error; etcd is up as `service etcd` shows it.
        assert "Unavailable" not in created.stderr and "StatusCode" not in created.stderr, created.stderr
        assert "waiting for etcd members to be control plane nodes: OK" in created.stderr
        etcd = _talosctl(tmp_path, "-n", cp, "service", "etcd")
        assert "STATE    Running" in etcd.stdout and "HEALTH   OK" in etcd.stdout, etcd.stdout

        shown = _talosctl(tmp_path, "cluster", "show", "--name", "e2e")
        assert "e2e-controlplane-1" in shown.stdout and "e2e-worker-1" in shown.stdout
        assert shown.stdout.count("running") == 2

        # Through the control plane endpoint (from the merged talosconfig) to both nodes.
        version = _talosctl(tmp_path, "-n", f"{cp},{worker}", "version", "--short")
        assert version.exit_code == 0, version.stderr
        assert f"{cp}: v1.7.6" in version.stdout and f"{worker}: v1.7.6" in version.stdout
        services = _talosctl(tmp_path, "-n", f"{cp},{worker}", "services")
        assert f"{cp}   trustd" in services.stdout and f"{worker}   apid" in services.stdout
        hostname = _talosctl(tmp_path, "-n", worker, "read", "/system/state/config.yaml")
        assert "hostname: e2e-worker-1" in hostname.stdout

        # Any resource through COSI, found by alias, on each node.
        status = _talosctl(tmp_path, "-n", f"{cp},{worker}", "get", "machinestatus")
        assert status.exit_code == 0, status.stderr
        assert status.stdout.splitlines()[0].split() == [
            "NODE",
            "NAMESPACE",
            "TYPE",
            "ID",
            "VERSION",
            "STAGE",
            "READY",
        ]
        assert (
            f"{worker}   runtime     MachineStatus   machine" in status.stdout and "running" in status.stdout
        )
        for rtype in ("machineconfig", "machinetype", "machinestatus", "services", "osrootsecret",
                      "apicertificates", "certsans", "hostnamestatus", "nodeaddress", "addresses"):  # fmt: skip
            got = _talosctl(tmp_path, "-n", f"{cp},{worker}", "get", rtype)
            assert got.exit_code == 0, (rtype, got.stderr)
            nodes = {line.split()[0] for line in got.stdout.splitlines()[1:]}
            assert nodes == {cp, worker}, (rtype, got.stdout)
        hostname_yaml = _talosctl(tmp_path, "-n", worker, "get", "hostname", "-o", "yaml")
        assert "type: HostnameStatuses.net.talos.dev" in hostname_yaml.stdout
        assert "hostname: e2e-worker-1" in hostname_yaml.stdout
        unknown = _talosctl(tmp_path, "-n", cp, "get", "nonsense")
        assert unknown.exit_code == 1 and 'resource type "nonsense" is not registered' in unknown.stderr

        # disks, cp, and config new for a reader (who may read state but not reboot or read files).
        disks = _talosctl(tmp_path, "-n", worker, "disks")
        assert disks.exit_code == 0 and "ichor node root" in disks.stdout
        copied = _talosctl(tmp_path, "-n", worker, "cp", "/system/state", str(tmp_path / "copy"))
        assert copied.exit_code == 0, copied.stderr
        assert "hostname: e2e-worker-1" in (tmp_path / "copy/state/config.yaml").read_text()
        reader = _talosctl(
            tmp_path, "-n", cp, "config", "new", str(tmp_path / "reader.talosconfig"), "--roles", "os:reader"
        )
        assert reader.exit_code == 0, reader.stderr
        as_reader = ("--talosconfig", str(tmp_path / "reader.talosconfig"), "-e", cp, "-n", cp)
        assert _talosctl(tmp_path, *as_reader, "version").exit_code == 0
        denied = _talosctl(tmp_path, *as_reader, "reboot")
        assert denied.exit_code == 1 and "not authorized" in denied.stderr
        denied_read = _talosctl(tmp_path, *as_reader, "read", "/system/state/config.yaml")
        assert denied_read.exit_code == 1

        # Security: a talosconfig from another cluster, an expired client certificate, a worker
        # asked to forward, and a node in maintenance mode asked for an admin RPC.
        other = tmp_path / "other"
        other.mkdir()
        assert (
            _talosctl(other, "gen", "config", "other", "https://10.0.0.1:6443", "-t", "talosconfig").exit_code
            == 0
        )
        foreign = _talosctl(
            tmp_path, "--talosconfig", str(other / "talosconfig"), "-e", cp, "-n", cp, "version"
        )
        assert foreign.exit_code == 1 and "certificate signed by unknown authority" in foreign.stderr
        assert "another cluster" in foreign.stderr
        expired = _expired_talosconfig(tmp_path)
        old = _talosctl(tmp_path, "--talosconfig", str(expired), "-e", cp, "-n", cp, "version")
        assert old.exit_code == 1
        forwarded = _talosctl(tmp_path, "-e", worker, "-n", cp, "version")
        assert forwarded.exit_code == 1 and "no request forwarding" in forwarded.stderr
        assert "workers do not forward requests" in forwarded.stderr and "os:admin" not in forwarded.stderr

        # A node that cannot be reached fails the command; the nodes that answered are still printed.
        unreachable = f"{prefix}.250"
        partial = _talosctl(tmp_path, "-n", f"{cp},{unreachable}", "services")
        assert partial.exit_code == 1, partial.stdout + partial.stderr
        assert f"{cp}   etcd" in partial.stdout and f"error: {unreachable}: " in partial.stderr
        gone = _talosctl(tmp_path, "-n", unreachable, "logs", "etcd")
        assert gone.exit_code == 1 and f"{unreachable}" in gone.stderr, gone.stdout + gone.stderr

        # The troubleshooting reads answer for both nodes through the control plane endpoint.
        both = ("-n", f"{cp},{worker}")
        logs = _talosctl(tmp_path, *both, "logs", "apid", "--tail", "5")
        assert logs.exit_code == 0, logs.stderr
        assert f"{cp}: " in logs.stdout and f"{worker}: " in logs.stdout
        dmesg = _talosctl(tmp_path, *both, "dmesg")
        assert f"{cp}: " in dmesg.stdout and "booting as controlplane" in dmesg.stdout
        assert f"{worker}: " in dmesg.stdout and "booting as worker" in dmesg.stdout
        listing = _talosctl(tmp_path, *both, "ls", "/system/state")
        assert listing.exit_code == 0, listing.stderr
        assert {(line.split()[0], line.split()[-1]) for line in listing.stdout.splitlines()[1:]} >= {
            (cp, "config.yaml"),
            (worker, "config.yaml"),
        }
        assert (
            "e2e-controlplane-1" in _talosctl(tmp_path, "-n", cp, "read", "/system/state/config.yaml").stdout
        )
        streams = tmp_path / "streams"
        streams.mkdir()
        env = cli_env(tmp_path)
        events = proc.start([sys.executable, "-m", "ichor", *both, "events", "--tail", "-1"],
                            output=streams / "events.log", env=env)  # fmt: skip
        watch = proc.start([sys.executable, "-m", "ichor", "-n", worker, "get", "-w", "hostname"],
                           output=streams / "watch.log", env=env)  # fmt: skip
        try:
            _wait_for_text(streams / "watch.log", "e2e-worker-1")
            worker_config = tmp_path / "worker-now.yaml"
            worker_config.write_text(
                _talosctl(tmp_path, "-n", worker, "read", "/system/state/config.yaml").stdout
            )
            patch = '[{"op": "replace", "path": "/machine/network/hostname", "value": "renamed-1"}]'
            renamed = _talosctl(tmp_path, "-n", worker, "apply-config", "-f", str(worker_config), "-p", patch)
            assert renamed.exit_code == 0 and "without a reboot" in renamed.stdout, renamed.stderr
            _wait_for_text(streams / "watch.log", "renamed-1")
            watched = (streams / "watch.log").read_text().splitlines()
            assert watched[0].split()[:3] == ["NODE", "*", "NAMESPACE"]
            assert watched[1].split()[:2] == [worker, "+"] and watched[-1].split()[:2] == [worker, "network"]
            _wait_for_text(streams / "events.log", f"{worker}   ")
            _wait_for_text(streams / "events.log", f"{cp}   ")
            assert "ServiceStateEvent" in (streams / "events.log").read_text()
        finally:
            for background in (events, watch):
                background.stop(timeout=10)
        restored = '[{"op": "replace", "path": "/machine/network/hostname", "value": "e2e-worker-1"}]'
        assert (
            _talosctl(
                tmp_path, "-n", worker, "apply-config", "-f", str(worker_config), "-p", restored
            ).exit_code
            == 0
        )

        # The worker reboots through the control plane and its launcher brings it back.
        rebooted = _talosctl(tmp_path, "-n", worker, "reboot")
        assert rebooted.exit_code == 0 and f"{worker}: back up after" in rebooted.stderr
        for _ in range(60):
            again = _talosctl(tmp_path, "-n", worker, "dmesg")
            if again.stdout.count("booting as worker") >= 2:
                break
        assert again.stdout.count("booting as worker") >= 2

        # A graceful reset of the only voting etcd member is refused over the API, before anything
        # happens: the node keeps its etcd data and its config, and says what to do instead.
        refused = _talosctl(tmp_path, "-n", cp, "reset", "--reboot", "--system-labels-to-wipe=EPHEMERAL")
        assert refused.exit_code != 0, refused.stdout + refused.stderr
        assert "only voting etcd member" in refused.stderr, refused.stderr
        assert "talosctl etcd snapshot" in refused.stderr and "--graceful=false" in refused.stderr
        data = _talosctl(tmp_path, "-n", cp, "ls", "/var/lib/etcd")
        assert data.exit_code == 0 and "member" in data.stdout, data.stdout + data.stderr
        still = _talosctl(tmp_path, "-n", cp, "service", "etcd")
        assert "STATE    Running" in still.stdout, still.stdout

        # A second create with the same name is refused and changes nothing.
        twice = _talosctl(
            tmp_path, "cluster", "create", "--provisioner", "process", "--name", "e2e", "--cidr", cidr
        )
        assert twice.exit_code != 0 and "already exists" in twice.stderr
    finally:
        destroyed = _talosctl(tmp_path, "cluster", "destroy", "--name", "e2e")
    assert destroyed.exit_code == 0, destroyed.stderr
    assert not (tmp_path / ".talos/clusters/e2e").exists()
    for line in shown.stdout.splitlines()[1:]:
        pid = int(line.split()[3])
        assert not proc.pid_alive(pid)


def _expired_talosconfig(home: Path) -> Path:
    """The cluster's own admin context, re-issued with a certificate that expired last year."""
    from datetime import UTC, datetime, timedelta

    from ichor.machinery.clientconfig import TalosConfig, issue_admin_context
    from ichor.machinery.secrets import SecretsBundle

    bundle = SecretsBundle.load(home / ".talos/clusters/e2e/secrets.yaml")
    _, current = TalosConfig.load(home / ".talos/config").get("e2e")
    context = issue_admin_context(
        bundle, endpoints=current.endpoints, nodes=current.nodes, ttl=timedelta(days=30),
        now=datetime.now(UTC) - timedelta(days=400),
    )  # fmt: skip
    path = home / "expired.talosconfig"
    TalosConfig(context="e2e", contexts={"e2e": context}).save(path)
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cidr", "10.5.0.0/24"], "not a loopback range"),
        (["--cidr", "nonsense"], "invalid CIDR"),
        (["--controlplanes", "0"], "0"),
    ],
)
def test_cluster_create_refuses_bad_input_and_starts_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = _talosctl(tmp_path, "cluster", "create", "--provisioner", "process", "--name", "bad", *args)
    assert result.exit_code != 0 and message in result.stderr
    assert not (tmp_path / ".talos/clusters/bad/cluster.yaml").exists()


def test_destroy_ends_a_node_whose_launcher_was_killed(tmp_path: Path) -> None:
    """kill -9 of a launcher leaves its machined (and etcd) serving: show says so, destroy ends them."""
    cidr = f"127.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"
    cp = cidr.rsplit(".", 1)[0] + ".2"
    state_dir = tmp_path / ".talos/clusters/orphan"
    seen: list[ProcessId] = []
    try:
        created = _talosctl(tmp_path, "cluster", "create", "--provisioner", "process", "--name", "orphan", "--cidr", cidr, "--workers", "0",
                            "--no-wait", timeout=120)  # fmt: skip
        assert created.exit_code == 0, created.stderr
        assert "cluster 'orphan' started: 1 node configured in" in created.stderr
        assert "not waiting for it to be healthy (--no-wait)" in created.stderr
        for _ in range(60):
            if "STATE    Running" in _talosctl(tmp_path, "-n", cp, "service", "etcd", timeout=20).stdout:
                break
            time.sleep(0.5)
        processes = {p.role: p for p in find(state_dir)}
        seen.extend(p.id for p in processes.values())
        assert {"launcher", "machined", "etcd", "discovery service"} <= set(processes), processes
        os.kill(processes["launcher"].id.pid, signal.SIGKILL)
        while processes["launcher"].id.alive():
            time.sleep(0.05)

        shown = _talosctl(tmp_path, "cluster", "show", "--name", "orphan")
        row = shown.stdout.splitlines()[1]
        assert f"launcher gone, machined running (PID {processes['machined'].id.pid})" in row, shown.stdout
        assert "stopped" not in row
        assert _talosctl(tmp_path, "-n", cp, "version", timeout=20).exit_code == 0  # still serving

        destroyed = _talosctl(tmp_path, "cluster", "destroy", "--name", "orphan", timeout=120)
        assert destroyed.exit_code == 0, destroyed.stderr
        assert f"stopping machined of orphan-controlplane-1 (PID {processes['machined'].id.pid})" in (
            destroyed.stderr
        )
        assert [p for p in seen if p.alive()] == [] and find(state_dir) == []
        assert not state_dir.exists()
        assert "removed context 'orphan' from" in destroyed.stderr

        # The context went with the cluster: the same name is created again as itself, not orphan-1.
        again = _talosctl(tmp_path, "cluster", "create", "--provisioner", "process", "--name", "orphan", "--cidr", cidr, "--workers", "0",
                          "--no-wait", timeout=120)  # fmt: skip
        assert again.exit_code == 0, again.stderr
        assert "renamed" not in again.stderr and "(context 'orphan'," in again.stderr, again.stderr
        seen.extend(p.id for p in find(state_dir))
        assert _talosctl(tmp_path, "cluster", "destroy", "--name", "orphan", timeout=120).exit_code == 0
    finally:
        for p in [*seen, *(p.id for p in find(state_dir))]:
            if p.alive():
                os.kill(p.pid, signal.SIGKILL)
