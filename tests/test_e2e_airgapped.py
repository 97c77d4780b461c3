"""End to end: the Air-gapped guide as a user runs it, on one control plane and one worker.

``cluster create --with-registry docker.io,ghcr.io`` starts the internal registry on the bridge's
gateway and makes it the mirror of both registries; busybox is built here and pushed under both
names (the guide's "Preparing the Internal Registry"). Then, on the worker: ``image pull`` into
the CRI and the system namespaces, ``image ls`` with Talos's table, every blob served to the
worker's address by the registry and nobody else asked; an image the registry lacks fails at once
naming the mirror, a registry with no mirror says where to add one; with the registry stopped a pull
retries with the reason on the node's console, and finishes once the registry is back.
"""

from __future__ import annotations

import concurrent.futures
import time
from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, container_cluster
from registry_helpers import (
    BUSYBOX_NAMES,
    REGISTRY_TOOLS,
    assert_pulled_through_mirror,
    assert_served,
    publish_busybox,
)

from ichor.images import access_log
from ichor.provision._processes import ProcessId, signal_and_wait
from ichor.provision._record import ClusterRecord
from ichor.provision._registry import registry_log, start_registry

pytestmark = [pytest.mark.e2e, CONTAINER_NODES, REGISTRY_TOOLS]

NAME = "airgap"
DOCKER_IMAGE, GHCR_IMAGE = BUSYBOX_NAMES


def _table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


def _console_until(cluster, node: str, wanted: str, deadline: float) -> str:  # type: ignore[no-untyped-def]
    while True:
        out = cluster.talosctl("-n", node, "dmesg").stdout
        hits = [line for line in out.splitlines() if wanted in line]
        if hits:
            return hits[-1]
        if time.monotonic() > deadline:
            raise AssertionError(f"{wanted!r} not on {node}'s console:\n{out[-2000:]}")
        time.sleep(0.5)


def test_air_gapped_guide_pulls_only_through_the_internal_registry(tmp_path: Path) -> None:
    with container_cluster(tmp_path, NAME) as cluster:
        cluster.create("--workers", "1", "--with-registry", "docker.io,ghcr.io")
        gateway, controlplane, worker = cluster.address(1), cluster.address(2), cluster.address(3)
        registry = f"{gateway}:5000"
        log = registry_log(cluster.state_dir)
        built = publish_busybox(tmp_path / "image", registry)

        assert_pulled_through_mirror(cluster, f"{NAME}-worker-1", worker, log, DOCKER_IMAGE)
        system = cluster.talosctl("-n", worker, "image", "pull", "--namespace", "system", DOCKER_IMAGE)
        assert system.exit_code == 0, system.stdout + system.stderr
        for namespace in ("cri", "system"):
            listed = cluster.talosctl("-n", worker, "image", "ls", "--namespace", namespace)
            assert listed.exit_code == 0, listed.stderr
            rows = _table(listed.stdout)
            assert rows[0] == ["NODE", "IMAGE", "DIGEST", "SIZE", "CREATED"], listed.stdout
            assert [worker, DOCKER_IMAGE, built.manifest_digest] in [r[:3] for r in rows[1:]], listed.stdout
        # Nobody but the worker (and the pushes from the gateway) asked the registry for the image;
        # every node's kubelet service asks it for the kubelet image (not pushed here: a 404).
        asked = {e.client for e in access_log(log) if "/siderolabs/kubelet/" not in e.path}
        assert asked == {gateway, worker}, access_log(log)

        missing = cluster.talosctl("-n", worker, "image", "pull", "docker.io/library/nothere:1")
        assert missing.exit_code != 0
        assert "NotFound" in missing.stderr and f"mirror {registry}: not found (HTTP 404)" in missing.stderr
        assert "push docker.io/library/nothere:1 to the mirror" in missing.stderr
        unmirrored = cluster.talosctl("-n", worker, "image", "pull", "quay.io/some/image:1")
        assert unmirrored.exit_code != 0
        assert 'no mirror is configured for quay.io: add one in machine.registries.mirrors["quay.io"]' in (
            unmirrored.stderr
        )

        # The registry goes down: a pull waits for it, saying why on the node's console ...
        record = ClusterRecord.load(cluster.state, NAME)
        stopped = ProcessId.of(record.registry_pid)
        assert stopped is not None, "the cluster's registry is not running"
        signal_and_wait([stopped], 15, 10)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pulling = pool.submit(cluster.talosctl, "-n", worker, "image", "pull", "--namespace", "system",
                                  GHCR_IMAGE, timeout=300)  # fmt: skip
            retry = _console_until(
                cluster, worker, f"retrying pull of image {GHCR_IMAGE}", time.monotonic() + 60
            )
            assert f"mirror {registry}:" in retry and "connection refused" in retry, retry
            _console_until(cluster, worker, f"Pulling image {GHCR_IMAGE}...", time.monotonic() + 5)
            assert not pulling.done()
            # ... and finishes once it is back.
            _, back = start_registry(cluster.state_dir, gateway)
            try:
                pulled = pulling.result(timeout=300)
                assert pulled.exit_code == 0, pulled.stdout + pulled.stderr
                assert_served(log, GHCR_IMAGE, worker)
                _console_until(cluster, worker, f"Pulled image {GHCR_IMAGE}", time.monotonic() + 5)
                assert controlplane not in {
                    e.client for e in access_log(log) if "/siderolabs/kubelet/" not in e.path
                }
            finally:
                back.stop(timeout=10)
