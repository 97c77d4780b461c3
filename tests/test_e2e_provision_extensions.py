"""A container node with a system extension lists it and sees its files."""

from __future__ import annotations

from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, container_cluster
from test_provision_extensions import SPEC, make_extension

from ichor.images import ImageSpec, build_layout

pytestmark = pytest.mark.e2e


@CONTAINER_NODES
def test_a_container_node_lists_its_extension_and_sees_its_files(tmp_path: Path) -> None:
    ext = make_extension(tmp_path / "exts")
    image = build_layout(
        make_extension(tmp_path / "exts", "two"), tmp_path / "two-image", tag="v1", spec=ImageSpec()
    )
    with container_cluster(tmp_path, "ext-e2e") as cluster:
        cluster.create("--controlplanes", "1", "--workers", "0", "--extension", str(ext),
                       "--extension", f"oci:{image.layout}:v1")  # fmt: skip
        node = cluster.address(2)
        listed = cluster.talosctl("-n", node, "get", "extensions")
        assert listed.exit_code == 0, listed.stderr
        header, row = listed.stdout.splitlines()[:2]
        assert header.split() == ["NODE", "NAMESPACE", "TYPE", "ID", "VERSION", "NAME", "VERSION"]
        assert row.split()[1:] == ["runtime", "ExtensionStatus", "0", "1", "hello", "1.2.3"]
        # the second came as an OCI image layout, unpacked into the cluster's state directory
        assert listed.stdout.splitlines()[2].split()[1:] == [
            "runtime",
            "ExtensionStatus",
            "1",
            "1",
            "two",
            "1.2.3",
        ]
        spec = cluster.talosctl("-n", node, "read", "/usr/local/etc/containers/hello.yaml")
        assert spec.exit_code == 0, spec.stderr
        assert spec.stdout == SPEC
        listing = cluster.talosctl("-n", node, "ls", "/usr/local/lib/containers/hello")
        assert "hello" in listing.stdout.split(), listing.stdout + listing.stderr
    # destroy left no mount of the extension anywhere on the host
    assert str(ext) not in Path("/proc/self/mountinfo").read_text()
