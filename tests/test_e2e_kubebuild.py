"""The Kubernetes images built here are pushed to a real registry under their repository and tag."""

from __future__ import annotations

import json
import random
import urllib.request
from pathlib import Path

import pytest
from registry_helpers import REGISTRY_TOOLS
from test_kubebuild import NEEDS_IMAGE_TOOLS, fake_go  # noqa: F401 - fake_go is the fixture

from ichor.images import catalog, manifest_digest, parse_reference
from ichor.kubebuild import (
    IMAGES,
    ensure_built,
    push_images,
)
from ichor.machinery.errors import MachineryError
from ichor.provision._registry import start_registry
from ichor.provision._teardown import stop_all

pytestmark = pytest.mark.e2e


@REGISTRY_TOOLS
@NEEDS_IMAGE_TOOLS
def test_every_image_is_pushed_to_a_real_registry_under_its_repository_and_tag(
    tmp_path: Path,
    fake_go: tuple[str, str],  # noqa: F811 - the fixture
) -> None:
    artifacts = ensure_built(go=fake_go[0], cc=fake_go[1])
    state_dir = tmp_path / "registry-state"
    state_dir.mkdir()
    endpoint, child = start_registry(state_dir, f"127.{random.randint(100, 199)}.{random.randint(0, 255)}.1")
    try:
        said: list[str] = []
        push_images(artifacts, endpoint, said.append)
        assert sorted(catalog(endpoint)) == sorted(parse_reference(r.reference).repository for r in IMAGES)
        for reference, image in artifacts.images.items():
            assert manifest_digest(endpoint, parse_reference(reference)) == image.manifest_digest
            assert any(line.startswith(f"pushed {reference} to {endpoint}") for line in said)
        tags = json.loads(urllib.request.urlopen(f"http://{endpoint}/v2/siderolabs/kubelet/tags/list").read())
        assert tags == {"name": "siderolabs/kubelet", "tags": ["v1.30.3"]}
    finally:
        survivors = stop_all(None, state_dir, progress=lambda _: None)
        child.wait(timeout=5)
    assert survivors == []
    with pytest.raises(MachineryError) as caught:  # the registry is gone: the push says where it looked
        push_images(artifacts, endpoint)
    assert f"is the registry at {endpoint} running?" in (caught.value.hint or "")
