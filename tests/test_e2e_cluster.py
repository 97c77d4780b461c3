"""End to end: ``talosctl cluster create`` with node processes, then commands through the endpoint."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from ichor.machinery import proc

pytestmark = pytest.mark.e2e


def _talosctl(home: Path, *args: str) -> proc.Completed:
    env = {"HOME": str(home), "TALOSCONFIG": str(home / ".talos/config")}
    return proc.run([sys.executable, "-m", "ichor", *args], env=env, cwd=home, check=False, timeout=180)


def test_cluster_create_1_plus_1_and_talk_to_both_nodes(tmp_path: Path) -> None:
    cidr = f"127.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"
    prefix = cidr.rsplit(".", 1)[0]
    cp, worker = f"{prefix}.2", f"{prefix}.3"
    created = _talosctl(
        tmp_path, "cluster", "create", "--name", "e2e", "--cidr", cidr, "--wait-timeout", "2m"
    )
    try:
        assert created.exit_code == 0, created.stderr
        assert "cluster 'e2e' is up: 2 nodes configured" in created.stderr

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

        # The worker reboots through the control plane and its launcher brings it back.
        rebooted = _talosctl(tmp_path, "-n", worker, "reboot")
        assert rebooted.exit_code == 0 and f"{worker}: back up after" in rebooted.stderr
        for _ in range(60):
            again = _talosctl(tmp_path, "-n", worker, "dmesg")
            if again.stdout.count("booting as worker") >= 2:
                break
        assert again.stdout.count("booting as worker") >= 2

        # A second create with the same name is refused and changes nothing.
        twice = _talosctl(tmp_path, "cluster", "create", "--name", "e2e", "--cidr", cidr)
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
    result = _talosctl(tmp_path, "cluster", "create", "--name", "bad", *args)
    assert result.exit_code != 0 and message in result.stderr
    assert not (tmp_path / ".talos/clusters/bad/cluster.yaml").exists()
