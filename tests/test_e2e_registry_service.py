"""The cluster's registry (Debian's docker-registry) as a real process: serves what was pushed, stops with
teardown, and a port in use is reported with its log."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from registry_helpers import REGISTRY_TOOLS, assert_served, publish_busybox
from test_registry import _loopback

from ichor.images import access_log, catalog, parse_reference, push, registry_answers
from ichor.machinery.errors import MachineryError
from ichor.provision._processes import find
from ichor.provision._registry import REGISTRY_PORT, registry_log, start_registry
from ichor.provision._teardown import stop_all

pytestmark = pytest.mark.e2e


@REGISTRY_TOOLS
def test_the_clusters_registry_serves_what_was_pushed_and_teardown_stops_it(tmp_path: Path) -> None:
    state_dir = tmp_path / "cluster"
    state_dir.mkdir()
    endpoint, child = start_registry(state_dir, _loopback())
    try:
        assert endpoint.endswith(f".1:{REGISTRY_PORT}") and registry_answers(endpoint)
        [process] = find(state_dir)
        assert process.id.pid == child.pid and process.role == "docker-registry"
        assert catalog(endpoint) == []

        built = publish_busybox(tmp_path, endpoint)
        # The guide: "images in the registry don't have the registry endpoint prefix anymore".
        assert sorted(catalog(endpoint)) == ["library/busybox", "siderolabs/busybox"]
        served = assert_served(registry_log(state_dir), "docker.io/library/busybox:1.36", "127.0.0.1")
        assert {e.method for e in served} >= {"HEAD"}
        pushes = [e for e in access_log(registry_log(state_dir)) if e.method == "PUT"]
        assert any(e.path == "/v2/library/busybox/manifests/1.36" and e.status == 201 for e in pushes)
        assert (state_dir / "registry" / "docker" / "registry" / "v2" / "repositories" / "library").is_dir()
        assert built.content_bytes > 100_000
    finally:
        survivors = stop_all(None, state_dir, progress=lambda _: None)
        child.wait(timeout=5)
    assert survivors == [] and find(state_dir) == []
    assert not registry_answers(endpoint)
    with pytest.raises(MachineryError) as caught:
        push(built, endpoint, parse_reference("busybox:1.36"))
    assert "is the registry" in (caught.value.hint or "")


@REGISTRY_TOOLS
def test_a_registry_port_in_use_is_reported_with_the_log(tmp_path: Path) -> None:
    address = _loopback()
    with socket.socket() as taken:
        taken.bind((address, REGISTRY_PORT))
        taken.listen()
        with pytest.raises(MachineryError, match="registry did not start") as caught:
            start_registry(tmp_path, address)
    assert "in use" in (caught.value.hint or "") and "registry.log" in (caught.value.hint or "")
    assert find(tmp_path) == []
