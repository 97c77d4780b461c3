"""The control-plane troubleshooting guide's commands on the control plane of the session's shared
Kubernetes cluster (``k8s_cluster``):
``talosctl containers -k`` names the static pods and their containers as Talos 1.7 does, ``logs -k
<ns>/<pod>:<container>`` prints the container's CRI log, ``get staticpodstatus`` lists the three
control plane pods Ready. Then the guide's bad case: ``cluster.apiServer.extraArgs`` with a flag
kube-apiserver rejects. Its status turns not Ready with the container's exit, ``logs -k`` shows
the apiserver's complaint, and the node's Talos API keeps answering. The flag is then removed and
kube-apiserver is Ready again, for the next file."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from container_helpers import CONTAINER_NODES, KUBE_NAME, KubeCluster, until

pytestmark = [pytest.mark.e2e, pytest.mark.k8s, CONTAINER_NODES]

NODE = f"{KUBE_NAME}-controlplane-1"
APISERVER = f"kube-system/kube-apiserver-{NODE}"
CONTROL_PLANE = {f"kube-system/kube-{c}-{NODE}" for c in ("apiserver", "controller-manager", "scheduler")}


def _rows(text: str) -> list[list[str]]:
    """A talosctl table's rows (header dropped), the ``└─`` of a pod's container kept as its own cell."""
    return [line.split() for line in text.splitlines()[1:] if line.strip()]


def test_the_guides_commands_and_a_rejected_apiserver_flag(k8s_cluster: KubeCluster) -> None:
    cluster = k8s_cluster.cluster
    cp = cluster.address(2)

    def talosctl(*args: str) -> str:
        done = cluster.talosctl("-n", cp, *args, timeout=60)
        assert done.exit_code == 0, f"talosctl {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def statuses() -> dict[str, str]:
        """``get staticpodstatus``: id -> READY."""
        rows = _rows(cluster.talosctl("-n", cp, "get", "staticpodstatus", timeout=60).stdout)
        return {row[3]: row[-1] for row in rows if row[1:3] == ["k8s", "StaticPodStatus"]}

    # talosctl get staticpodstatus: the three control plane pods, READY True
    until("the control plane's static pods Ready in get staticpodstatus",
          lambda: {i for i, ready in statuses().items() if ready == "True"} >= CONTROL_PLANE, 240, 3)  # fmt: skip

    # talosctl containers -k: the sandbox by its pod name, its container under it
    container = re.compile(rf"^{re.escape(APISERVER)}:kube-apiserver:[0-9a-f]{{12}}$")

    def apiserver_rows() -> list[list[str]]:
        return [r for r in _rows(talosctl("containers", "-k")) if APISERVER in " ".join(r)]

    until("kube-apiserver's container running in containers -k",
          lambda: any(r[-1] == "CONTAINER_RUNNING" for r in apiserver_rows()), 120, 2)  # fmt: skip
    rows = apiserver_rows()
    sandbox = [r for r in rows if r[2] == APISERVER]
    assert sandbox and sandbox[0][:2] == [cp, "k8s.io"] and sandbox[0][-1] == "SANDBOX_READY", rows
    assert sandbox[0][3].startswith("registry.k8s.io/pause:"), rows
    running = [r for r in rows if r[-1] == "CONTAINER_RUNNING"]
    assert running[0][2] == "└─" and container.match(running[0][3]), rows
    assert running[0][4] == "registry.k8s.io/kube-apiserver:v1.30.3" and int(running[0][5]) > 0, rows
    full_id = running[0][3]

    # talosctl logs -k, as the guide writes it (no id: the newest attempt) and with the id
    for name in (f"{APISERVER}:kube-apiserver", full_id):
        lines = talosctl("logs", "-k", name, "--tail", "5").splitlines()
        assert len(lines) == 5, lines
        assert all(re.match(rf"{re.escape(cp)}: \S+Z (stdout|stderr) [FP] ", line) for line in lines), lines
    missing = cluster.talosctl("-n", cp, "logs", "-k", f"{APISERVER}:no-such-container", timeout=60)
    assert missing.exit_code != 0 and "not found" in missing.stderr, missing.stderr

    # the bad case: a flag kube-apiserver rejects (taken out again whatever happens below)
    patch = json.dumps({"cluster": {"apiServer": {"extraArgs": {"no-such-flag": "1"}}}})
    talosctl("patch", "mc", "--patch", patch)
    try:
        _rejected_flag_is_shown(talosctl, statuses)
    finally:
        unpatch = json.dumps([{"op": "remove", "path": "/cluster/apiServer/extraArgs/no-such-flag"}])
        talosctl("patch", "mc", "--patch", unpatch)
    until("kube-apiserver Ready again without the flag", lambda: statuses().get(APISERVER) == "True", 240, 3)


def _rejected_flag_is_shown(talosctl: Callable[..., str], statuses: Callable[[], dict[str, str]]) -> None:
    """With ``--no-such-flag`` in its extra args: kube-apiserver not Ready, its complaint in ``logs
    -k``, its container exited; the node's own API and services untouched."""

    seen: dict[str, str] = {}

    def apiserver_failing() -> bool:
        seen["ready"] = str(statuses().get(APISERVER))
        docs = talosctl("get", "staticpodstatus", "-o", "yaml").split("\n---\n")
        seen["doc"] = doc = next((d for d in docs if f"id: {APISERVER}\n" in d), "")
        failing = seen["ready"] == "False" and ("reason: Error" in doc or "reason: CrashLoopBackOff" in doc)
        if not failing:
            seen["containers"] = "\n".join(
                " ".join(r) for r in _rows(talosctl("containers", "-k")) if APISERVER in " ".join(r)
            )
            seen["waits"] = talosctl("get", "waits")
            seen["manifest"] = talosctl("get", "staticpods", "-o", "yaml")[-3000:]
        return failing

    try:
        until("staticpodstatus shows kube-apiserver not Ready with its container's exit",
              apiserver_failing, 300, 3)  # fmt: skip
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; last seen:\n" + "\n".join(f"--- {k}:\n{v}" for k, v in seen.items())
        ) from None
    until("logs -k shows the flag kube-apiserver rejected",
          lambda: "unknown flag: --no-such-flag" in talosctl("logs", "-k", f"{APISERVER}:kube-apiserver"),
          60, 3)  # fmt: skip
    exited = [r for r in _rows(talosctl("containers", "-k")) if APISERVER in " ".join(r)]
    assert any(r[-1] == "CONTAINER_EXITED" for r in exited), exited

    # the node and its Talos API stay up
    assert "Server:" in talosctl("version")
    services = {r[1]: r[2] for r in _rows(talosctl("services"))}
    assert services.get("kubelet") == "Running" and services.get("etcd") == "Running", services
