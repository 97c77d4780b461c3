"""End to end: ``cluster create --provisioner container --with-registry docker.io,ghcr.io`` (root only).

The Air-gapped guide on a container cluster: the cluster's registry listens on the bridge's gateway,
every node's machine config mirrors the named registries to it, an image built here and pushed
there is listed and served to a node that asks from INSIDE its own network namespace (the access
log names the node's address), and destroy stops the registry with the rest and leaves nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, container_cluster
from registry_helpers import REGISTRY_TOOLS, assert_served, publish_busybox

from ichor.machinery.yamlio import load_documents, to_plain
from ichor.provision._processes import find
from ichor.provision._registry import registry_log

pytestmark = [pytest.mark.e2e, CONTAINER_NODES, REGISTRY_TOOLS]

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def test_the_clusters_registry_on_the_gateway_serves_the_nodes_and_goes_with_destroy(tmp_path: Path) -> None:
    with container_cluster(tmp_path, "reg") as cluster:
        created = cluster.create("--workers", "0", "--with-registry", "docker.io,ghcr.io")
        gateway, node, node_address = cluster.address(1), "reg-controlplane-1", cluster.address(2)
        registry = f"{gateway}:5000"
        assert f"image registry (docker-registry) on http://{registry}" in created.stderr
        [registry_process] = [p for p in find(cluster.state_dir) if p.role == "docker-registry"]

        config = to_plain(load_documents((cluster.state_dir / f"{node}.yaml").read_text())[0])
        mirrors = config["machine"]["registries"]["mirrors"]
        assert mirrors == {
            "docker.io": {"endpoints": [f"http://{registry}"]},
            "ghcr.io": {"endpoints": [f"http://{registry}"]},
        }

        built = publish_busybox(tmp_path, registry)
        log = registry_log(cluster.state_dir)

        listed = cluster.in_node(
            node, "/bin/busybox", "wget", "-q", "-O", "-", f"http://{registry}/v2/_catalog"
        )
        assert listed.exit_code == 0, listed.stderr
        assert '"library/busybox"' in listed.stdout and '"siderolabs/busybox"' in listed.stdout
        manifest = cluster.in_node(
            node, "/bin/busybox", "wget", "-q", "-O", "-", "--header", f"Accept: {OCI_MANIFEST}",
            f"http://{registry}/v2/library/busybox/manifests/1.36",
        )  # fmt: skip
        assert manifest.exit_code == 0, manifest.stderr
        assert built.config_digest in manifest.stdout
        assert_served(log, "docker.io/library/busybox:1.36", node_address)

    # Nothing is sent to the cluster's CIDR now: its blackhole route has gone with it.
    assert not cluster.state_dir.exists() and find(cluster.state_dir) == []
    assert not registry_process.id.alive()
