"""The Proprietary Kernel Modules procedure's first steps (seed 001:729-781) on this machine, without
a VM: an out-of-tree module built from source against Debian's headers for the image's pinned
kernel, packed as a system extension that the imager accepts for that kernel (and refuses for
another). ``tests/test_e2e_metal_install.py`` boots it in an image and loads it through
``machine.kernel.modules``.

Time budget: 5-15 s (the build ~4 s on 2 cores; the pinned kernel is unpacked once into
``~/.cache/ichor/image``, which the VM tests share).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hello_module import build_hello_extension, hello_skip_reason

from ichor.imager import InputError, _build
from ichor.imager._extensions import load_image_extensions
from ichor.machinery import proc

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def kernel_release() -> str:
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("needs apt-get and dpkg-deb (the image's pinned kernel)")
    _root, release = _build._Builder(_build.BuildOptions(output=Path(os.devnull))).kernel()
    reason = hello_skip_reason(release)
    if reason:
        pytest.skip(reason)
    return release


def test_a_module_built_from_source_is_an_extension_for_the_images_kernel(
    kernel_release: str, tmp_path: Path
) -> None:
    extension = build_hello_extension(tmp_path, kernel_release)
    module = extension / "rootfs/lib/modules" / kernel_release / "extras/hello.ko"
    info = proc.run(["modinfo", "-F", "vermagic", str(module)]).stdout.split()
    assert info[0] == kernel_release, info  # built for the image's kernel, not the host's
    assert proc.run(["modinfo", "-F", "license", str(module)]).stdout.strip() == "Proprietary"
    assert proc.run(["modinfo", "-F", "parm", str(module)]).stdout.startswith("greeting:")

    loaded = load_image_extensions([str(extension)], tmp_path / "work", kernel_release=kernel_release)
    assert [ext.extension.metadata.name for ext in loaded] == ["ichor-hello-module"]

    with pytest.raises(
        InputError, match=r"ships kernel modules for .*, the image.s kernel is 6\.1\.0-99-amd64"
    ):
        load_image_extensions([str(extension)], tmp_path / "other", kernel_release="6.1.0-99-amd64")
