"""A system extension's OCI image served by a real registry on loopback is pulled and unpacked."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from registry_helpers import REGISTRY_TOOLS
from test_extension_images import _fetch, _refused
from test_provision_extensions import SPEC, make_extension

from ichor.images import ImageSpec, build_layout, parse_reference, push
from ichor.provision._registry import start_registry
from ichor.provision._teardown import stop_all

pytestmark = pytest.mark.e2e


@REGISTRY_TOOLS
def test_an_image_in_a_loopback_registry_is_pulled_and_unpacked(tmp_path: Path) -> None:
    registry_dir = tmp_path / "registry"
    registry_dir.mkdir()
    endpoint, child = start_registry(
        registry_dir, f"127.{random.randint(100, 199)}.{random.randint(0, 255)}.1"
    )
    try:
        push(build_layout(make_extension(tmp_path / "src"), tmp_path / "layout", tag="v1", spec=ImageSpec(env=())),
             endpoint, parse_reference(f"{endpoint}/siderolabs/hello:v1"))  # fmt: skip
        (unpacked,) = _fetch([f"{endpoint}/siderolabs/hello:v1"], tmp_path / "state")
        assert Path(unpacked).name == "000-hello"
        assert (Path(unpacked) / "rootfs/usr/local/etc/containers/hello.yaml").read_text() == SPEC
        assert sorted(p.name for p in (tmp_path / "state/extensions").iterdir()) == ["000-hello"]
        refused = _refused([f"docker://{endpoint}/siderolabs/hello:v2"], tmp_path / "state2")
        assert "does the registry at" in (refused.hint or "")
    finally:
        stop_all(None, registry_dir, progress=lambda _: None)
        child.wait(timeout=5)
