"""``imager --system-extension-image <registry>/<repository>:<tag>``: an extension image served by a
real registry on loopback is pulled with skopeo, unpacked and checked like a directory.

Starts ``docker-registry`` on a random loopback address (stopped by its PID afterwards); a few
seconds.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from registry_helpers import REGISTRY_TOOLS
from test_imager_extensions import KVER, make_extension

from ichor.imager import InputError, _extensions
from ichor.images import ImageSpec, build_layout, parse_reference, push
from ichor.provision._registry import start_registry
from ichor.provision._teardown import stop_all

pytestmark = pytest.mark.e2e


@REGISTRY_TOOLS
def test_an_extension_in_a_loopback_registry_is_pulled_and_checked(tmp_path: Path) -> None:
    registry_dir = tmp_path / "registry"
    registry_dir.mkdir()
    endpoint, child = start_registry(
        registry_dir, f"127.{random.randint(100, 199)}.{random.randint(0, 255)}.1"
    )
    try:
        for name, files in (("hello", None), ("bad", {"etc/passwd": b"x"})):
            layout = build_layout(make_extension(tmp_path / name, name, files=files), tmp_path / f"{name}-layout",
                                  tag="v1", spec=ImageSpec(env=()))  # fmt: skip
            push(layout, endpoint, parse_reference(f"{endpoint}/ext/{name}:v1"))
        (loaded,) = _extensions.load_image_extensions(
            [f"{endpoint}/ext/hello:v1"], tmp_path / "work", kernel_release=KVER
        )
        assert (loaded.rootfs / "usr/local/share/hello.txt").read_bytes() == b"hello\n"
        with pytest.raises(
            InputError, match='error validating extension "bad": path "/etc/passwd" is not allowed'
        ):
            _extensions.load_image_extensions(
                [f"docker://{endpoint}/ext/bad:v1"], tmp_path / "w2", kernel_release=KVER
            )
        with pytest.raises(InputError) as missing:
            _extensions.load_image_extensions(
                [f"{endpoint}/ext/hello:v2"], tmp_path / "w3", kernel_release=KVER
            )
        assert "does the registry at" in (missing.value.hint or "")
    finally:
        stop_all(None, registry_dir, progress=lambda _: None)
        child.wait(timeout=5)
