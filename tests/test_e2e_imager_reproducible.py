"""The real image builds byte-identically twice: every layer rebuilt from the same pinned inputs.

Two builds of ``initramfs`` and ``kernel``, each with a fresh layer cache (the downloaded debs and
wheels are shared, already checked by hash), must give the same sha256 for each layer and each
artefact. Slow by design: ~3-6 min on 2 busy cores (three squashfs layers and the .pyc of the
standard library and the wheels, twice).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from ichor.imager._build import BuildOptions, Profile, build, default_cache

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_two_builds_of_the_image_are_byte_identical(tmp_path: Path) -> None:
    for tool in ("mksquashfs", "apt-get", "dpkg-deb", "depmod"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (scripts/os-packages.txt)")
    shared = default_cache()
    results = []
    for run in ("one", "two"):
        cache = tmp_path / run / "cache"
        cache.mkdir(parents=True)
        for inputs in ("debs", "wheels"):
            if (shared / inputs).is_dir():
                os.symlink(shared / inputs, cache / inputs)
        options = BuildOptions(output=tmp_path / run / "out", cache=cache)
        artefacts = {p: build(p, options).sha256 for p in (Profile.KERNEL, Profile.INITRAMFS)}
        layers = {p.name.split("-")[0]: p.read_bytes() for p in sorted((cache / "layers").glob("*.sqsh"))}
        results.append((artefacts, {name: hashlib.sha256(data).hexdigest() for name, data in layers.items()}))
    assert results[0] == results[1]
    assert set(results[0][1]) == {"base", "pydeps", "ichor"}
