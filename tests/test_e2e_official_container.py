"""End to end: the official talosctl v1.7.6 against the session's 1+1 container cluster with
Kubernetes (``k8s_cluster``, first of ``tiers.K8S_ORDER``: it reads the boot's events before the
other files add theirs).

Issue 25 §4's sweep (run.sh builds the official talosctl with ``scripts/build_official_talosctl.py``;
``tests/test_e2e_official_talosctl.py`` does the same on a process cluster, with ``reboot --wait``):
every resource of every type decodes in Talos's Go types in both forms on container nodes too (their
links, host DNS, kubelet and CRI resources), ``events --duration`` streams the boot sequence
without a panic and ``--since`` refuses a non-id with Talos's text, each node has a boot id of its
own, ``ls -r`` recurses, ``/etc/kubernetes/manifests`` is there and empty, ``--insecure`` against a
configured node reports Talos's TLS refusal, every config create wrote validates in container mode,
``image ls --namespace system`` lists the kubelet's image, ``time``, ``usage``, ``get etcdmembers``
and ``get securitystate`` answer, ``logs apid`` has a line per call, ``netstat --pods`` names the
pods' sockets, ``health --server=false`` passes and ``apply-config --mode try``
returns. Time budget: 2 min (measured alone: 188 s on its own cluster, creating it ~130 s of that).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cluster_helpers import NO_TALOS_GO_TYPE, cli_env
from container_helpers import CONTAINER_NODES, KUBE_NAME, KubeCluster

from ichor.machinery import proc

pytestmark = [pytest.mark.e2e, pytest.mark.k8s, pytest.mark.slow, pytest.mark.official, CONTAINER_NODES]

CACHE = Path.home() / ".cache" / "ichor" / "talosctl-official"
OFFICIAL = CACHE / "talosctl"
CHECK = CACHE / "talos-cosi-check"

if not (OFFICIAL.exists() and CHECK.exists()):
    pytest.skip(
        "build them first: python scripts/build_official_talosctl.py (bash run.sh test does)",
        allow_module_level=True,
    )


def test_official_talosctl_against_a_container_cluster_with_kubernetes(
    k8s_cluster: KubeCluster, tmp_path: Path
) -> None:
    cluster = k8s_cluster.cluster
    env = cli_env(cluster.home)
    cp, worker = k8s_cluster.cp, k8s_cluster.worker

    def official(*args: str, timeout: float = 120) -> proc.Completed:
        return proc.run([str(OFFICIAL), *args], env=env, cwd=cluster.home, check=False, timeout=timeout)

    # Every resource, both forms, in Talos's own Go types: links, host DNS, CRI and kubelet too.
    checked = proc.run([str(CHECK), cp, worker], env=env, check=False, timeout=300)
    lines = checked.stdout.splitlines()
    problems = [line for line in lines if not line.startswith(("OK", "NOTYPE", " "))]
    assert checked.exit_code == 0 and not problems, checked.stdout + checked.stderr
    assert {line.split()[1] for line in lines if line.startswith("OK")} >= {
        "LinkSpecs.net.talos.dev", "HostDNSConfigs.net.talos.dev", "KubeletSpecs.kubernetes.talos.dev",
    }  # fmt: skip
    notype = {line.split()[1] for line in lines if line.startswith("NOTYPE")}
    assert notype <= NO_TALOS_GO_TYPE, notype

    # events --duration: the boot sequence as Talos sends it, no panic; --since wants an id.
    with pytest.raises(proc.ProcessError):  # the stream stays open: the timeout ends it
        proc.run([str(OFFICIAL), "-n", cp, "events", "--duration", "1h"], env=env,
                 output=tmp_path / "events.log", timeout=8)  # fmt: skip
    events = (tmp_path / "events.log").read_text()
    assert "panic" not in events, events
    for sequence in ("initialize", "boot"):
        for phase in ("START", "STOP"):
            assert re.search(rf"^\s+{sequence}\s+{phase}$", events, re.M), events
    since = official("-n", cp, "events", "--since", "1m", timeout=10)
    assert since.exit_code == 1 and "error parsing tail_id: xid: invalid ID" in since.stderr, since.stderr

    # A boot id per node boot, not the host's.
    ids = [official("-n", n, "read", "/proc/sys/kernel/random/boot_id").stdout.strip() for n in (cp, worker)]
    host = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert all(ids) and len({*ids, host}) == 3, (ids, host)

    # ls -r recurses (Talos's unlimited depth); the manifests directory is there, empty.
    listed = official("-n", cp, "ls", "-r", "/etc")
    assert listed.exit_code == 0 and "kubernetes/manifests" in listed.stdout, listed.stdout
    manifests = official("-n", cp, "ls", "/etc/kubernetes/manifests")
    assert manifests.exit_code == 0 and manifests.stdout.split()[2:] == [cp, "."], manifests.stdout

    # --insecure against a configured node: Talos's client names the TLS refusal.
    config = cluster.state_dir / f"{KUBE_NAME}-controlplane-1.yaml"
    for args in (("disks", "--insecure"), ("apply-config", "--insecure", "--file", str(config))):
        refused = official("-n", cp, *args)
        assert refused.exit_code == 1 and "tls: certificate required" in refused.stderr, (
            args,
            refused.stderr,
        )

    # Every config create wrote validates in container mode.
    for node_config in sorted(cluster.state_dir.glob(f"{KUBE_NAME}-*.yaml")):
        valid = official("validate", "--mode", "container", "--config", str(node_config))
        assert valid.exit_code == 0 and "is valid for container mode" in valid.stdout, (
            valid.stdout + valid.stderr
        )

    # The kubelet's image in the CRI containerd's namespace system.
    images = official("-n", cp, "image", "ls", "--namespace", "system")
    assert images.exit_code == 0 and "ghcr.io/siderolabs/kubelet:v1.30.3" in images.stdout, images.stdout

    # time, usage, and the resources Talos's reboot/reset/etcd flows read first.
    for args in (("time",), ("usage", "/etc"), ("get", "etcdmembers"), ("get", "securitystate")):
        got = official("-n", cp, *args)
        assert got.exit_code == 0 and got.stdout.count("\n") >= 2, (args, got.stdout, got.stderr)

    # apid logs every call, as Talos's does.
    apid_log = official("-n", cp, "logs", "apid", "--tail", "5")
    calls = [line for line in apid_log.stdout.splitlines() if re.search(r" log\.go:\d+: \w+ \[/", line)]
    assert apid_log.exit_code == 0 and len(calls) == 5, apid_log.stdout

    # netstat --pods: the pods' own sockets, each named by its pod (CoreDNS on :53 in its own).
    pods = official("-n", f"{cp},{worker}", "netstat", "--pods", "-l")
    assert pods.exit_code == 0 and re.search(r":53\s.*LISTEN\s+kube-system/coredns-", pods.stdout), (
        pods.stdout
    )

    health = official("-n", cp, "health", "--server=false", "--wait-timeout", "2m", timeout=180)
    assert health.exit_code == 0, health.stdout + health.stderr

    # apply-config --mode try through Talos's client library (its event watch) returns.
    worker_config = cluster.state_dir / f"{KUBE_NAME}-worker-1.yaml"
    tried = official("-n", worker, "apply-config", "--file", str(worker_config), "--mode", "try",
                     "--timeout", "20s", timeout=60)  # fmt: skip
    assert tried.exit_code == 0, tried.stdout + tried.stderr
    assert "will be automatically reverted back in 20s" in tried.stdout + tried.stderr
