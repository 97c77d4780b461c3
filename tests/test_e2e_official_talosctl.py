"""End to end: the official talosctl v1.7.6 (built from Talos's source) against an Ichor cluster.

What Talos's own client does with Ichor's answers: every resource of every type decodes in
Talos's Go types in both forms (``talos-cosi-check``), ``events`` streams without the panic a
status-less MachineStatusEvent caused, ``reboot --wait`` sees the reboot (events, then a new boot
id), ``health --server=false`` gets past the etcd member checks that need the typed Member
addresses, and the resources Talos's flows read (SecurityState, EtcdMember, PlatformMetadata)
are served. Skipped unless ``scripts/build_official_talosctl.py`` has built the binaries.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from cluster_helpers import NO_TALOS_GO_TYPE, cli_env
from cluster_helpers import talosctl_in as _ichor

from ichor.machinery import proc

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.official]

CACHE = Path.home() / ".cache" / "ichor" / "talosctl-official"
OFFICIAL = CACHE / "talosctl"
CHECK = CACHE / "talos-cosi-check"

if not (OFFICIAL.exists() and CHECK.exists()):
    pytest.skip(
        "build them first: python scripts/build_official_talosctl.py (bash run.sh test does)",
        allow_module_level=True,
    )


def _official(home: Path, *args: str, timeout: float = 120) -> proc.Completed:
    return proc.run([str(OFFICIAL), *args], env=cli_env(home), cwd=home, check=False, timeout=timeout)


def test_official_talosctl_against_a_process_cluster(tmp_path: Path) -> None:
    cidr = f"127.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"
    prefix = cidr.rsplit(".", 1)[0]
    cp, worker = f"{prefix}.2", f"{prefix}.3"
    created = _ichor(tmp_path, "cluster", "create", "--provisioner", "process", "--name", "official",
                     "--cidr", cidr, "--wait-timeout", "3m", timeout=600)  # fmt: skip
    try:
        assert created.exit_code == 0, created.stderr
        # Every resource, both forms, in Talos's own Go types.
        checked = proc.run([str(CHECK), cp, worker], env=cli_env(tmp_path), check=False, timeout=300)
        problems = [
            line for line in checked.stdout.splitlines() if not line.startswith(("OK", "NOTYPE", " "))
        ]
        assert checked.exit_code == 0 and not problems, checked.stdout + checked.stderr
        assert sum(line.startswith("OK") for line in checked.stdout.splitlines()) > 100
        notype = {line.split()[1] for line in checked.stdout.splitlines() if line.startswith("NOTYPE")}
        assert notype <= NO_TALOS_GO_TYPE, notype

        # The event stream: the whole history, no panic, the boot sequence as Talos sends it.
        with pytest.raises(proc.ProcessError):  # the stream stays open: the timeout ends it
            proc.run([str(OFFICIAL), "-n", cp, "events", "--tail=-1"], env=cli_env(tmp_path),
                     output=tmp_path / "events.log", timeout=8)  # fmt: skip
        events_text = (tmp_path / "events.log").read_text()
        assert "panic" not in events_text, events_text
        assert re.search(r"^\s+boot\s+STOP$", events_text, re.M), events_text
        assert "machine.MachineStatusEvent" in events_text

        # What Talos's reboot/reset/etcd flows read first.
        for resource in ("securitystate", "etcdmembers", "platformmetadata", "secretstatuses"):
            got = _official(tmp_path, "-n", cp, "get", resource)
            assert got.exit_code == 0 and got.stdout.count("\n") >= 2, (resource, got.stdout, got.stderr)

        # health --server=false: the etcd member checks use the typed Members' addresses.
        health = _official(
            tmp_path, "-n", cp, "health", "--server=false", "--wait-timeout", "20s", timeout=60
        )
        assert "waiting for etcd members to be control plane nodes: OK" in health.stdout + health.stderr
        assert "no IP address found for member" not in health.stdout + health.stderr

        # reboot --wait: events until the node is back, then a new boot id.
        before = _official(tmp_path, "-n", worker, "read", "/proc/sys/kernel/random/boot_id").stdout.strip()
        rebooted = _official(tmp_path, "-n", worker, "reboot", "--wait", timeout=300)
        assert rebooted.exit_code == 0, rebooted.stdout + rebooted.stderr
        assert "post check passed" in rebooted.stdout + rebooted.stderr
        after = _official(tmp_path, "-n", worker, "read", "/proc/sys/kernel/random/boot_id").stdout.strip()
        assert before and after and before != after
    finally:
        destroyed = _ichor(tmp_path, "cluster", "destroy", "--name", "official", timeout=300)
        assert destroyed.exit_code == 0, destroyed.stderr
