"""The Air-gapped guide as a procedure tests run: build a busybox image here, push it to a registry
under the names the nodes will ask for, and check what the registry holds and served.

``publish_busybox`` is the guide's "Preparing the Internal Registry" (images built locally instead
of pulled from the internet); ``assert_served`` reads the registry's access log, the guide's
``docker logs -f registry-airgapped``. ``assert_pulled_through_mirror`` is the check for a pull a
node makes through its containerd (``talosctl image pull``) once the nodes run containerd.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ichor.images import (
    AccessLogEntry,
    BuiltImage,
    ImageSpec,
    access_log,
    build_layout,
    busybox_rootfs,
    catalog,
    manifest_digest,
    parse_reference,
    push,
)

REGISTRY_TOOLS = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("docker-registry", "skopeo"))
    or not Path("/bin/busybox").is_file(),
    reason="needs docker-registry, skopeo and busybox-static (bash run.sh installs them as root)",
)
BUSYBOX_NAMES = ("docker.io/library/busybox:1.36", "ghcr.io/siderolabs/busybox:v1.36")


def publish_busybox(work: Path, registry: str, names: tuple[str, ...] = BUSYBOX_NAMES) -> BuiltImage:
    """Build a busybox image (``httpd`` in the foreground by default) and push it to ``registry``
    (``host:port``) under each of ``names``, checking each is then in the catalog with our digest."""
    root = busybox_rootfs(work / "busybox-rootfs")
    built = build_layout(root, work / "busybox-layout", tag="1.36",
                         spec=ImageSpec(entrypoint=["/bin/httpd"], cmd=["-f", "-p", "80", "-h", "/var/www"]))  # fmt: skip
    for name in names:
        reference = parse_reference(name)
        push(built, registry, reference)
        assert reference.repository in catalog(registry)
        assert manifest_digest(registry, reference) == built.manifest_digest
    return built


def requests_for(log: Path, name: str) -> list[AccessLogEntry]:
    """What the registry served for image ``name`` (manifests and blobs of its repository)."""
    repository = parse_reference(name).repository
    return [e for e in access_log(log) if e.path.startswith(f"/v2/{repository}/")]


def assert_served(log: Path, name: str, client: str) -> list[AccessLogEntry]:
    """The registry served ``name``'s manifest (200) to ``client`` (an IP address)."""
    reference = parse_reference(name)
    served = [e for e in requests_for(log, name) if e.client == client and e.status == 200
              and e.path.startswith(f"/v2/{reference.repository}/manifests/")]  # fmt: skip
    assert served, f"{client} got no manifest of {name}; the registry's log: {access_log(log)}"
    return served


def assert_pulled_through_mirror(cluster: object, node: str, node_address: str, log: Path, name: str) -> None:
    """For when nodes run containerd: ``talosctl image pull`` of ``name`` on ``node`` succeeds and
    the cluster's registry served the manifest and every blob to the node's address (the mirror
    was used; with no route off the machine, no other host could have answered)."""
    pulled = cluster.talosctl("-n", node_address, "image", "pull", name)  # type: ignore[attr-defined]
    assert pulled.exit_code == 0, pulled.stdout + pulled.stderr
    assert_served(log, name, node_address)
    blobs = [e for e in requests_for(log, name) if "/blobs/" in e.path and e.client == node_address]
    assert blobs and all(e.status in (200, 307) for e in blobs), blobs
