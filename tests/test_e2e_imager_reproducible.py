"""The real image builds byte-identically twice: every layer rebuilt from the same pinned inputs.

Two builds of ``initramfs`` and ``kernel`` must give the same sha256 for each layer and each
artefact: one with a fresh layer cache (the downloaded debs and wheels are shared, already checked
by hash), one with the machine's own cache (``~/.cache/ichor/image``), whose layers an earlier
build made -- an earlier run, or the VM tests of this one; where it lacks them, that build makes
them now, also from scratch. So a warm machine builds the layers once here, not twice, and still
compares two independent builds (one of them possibly days older). Slow by design: ~2-3 min on 2
busy cores warm (three squashfs layers and the .pyc of the standard library and the wheels), about
twice that cold.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from ichor.imager._build import BuildOptions, Profile, _Builder, build, default_cache

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_a_fresh_build_of_the_image_is_byte_identical_to_the_machines(tmp_path: Path) -> None:
    for tool in ("mksquashfs", "apt-get", "dpkg-deb", "depmod"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (scripts/os-packages.txt)")
    shared = default_cache()
    results = []
    for run, cache in (("fresh", tmp_path / "fresh" / "cache"), ("machine", shared)):
        if run == "fresh":
            cache.mkdir(parents=True)
            for inputs in ("debs", "wheels"):
                if (shared / inputs).is_dir():
                    os.symlink(shared / inputs, cache / inputs)
        options = BuildOptions(output=tmp_path / run / "out", cache=cache)
        artefacts = {p: build(p, options).sha256 for p in (Profile.KERNEL, Profile.INITRAMFS)}
        results.append(artefacts)
    fresh_layers = sorted((tmp_path / "fresh" / "cache" / "layers").glob("*.sqsh"))
    # with etcd built here (run.sh builds it) the image carries it in a layer of its own
    etcd = {"etcd"} if _Builder(BuildOptions(output=tmp_path / "x")).etcd_build() is not None else set()
    assert {p.name.split("-")[0] for p in fresh_layers} == {"base", "pydeps", "ichor", *etcd}
    for layer in fresh_layers:  # the same inputs give the same layer name, and the same bytes
        machine = shared / "layers" / layer.name
        assert machine.is_file(), f"{layer.name}: the machine's cache holds no layer for these inputs"
        assert (
            hashlib.sha256(layer.read_bytes()).hexdigest() == hashlib.sha256(machine.read_bytes()).hexdigest()
        ), layer.name
    assert results[0] == results[1]
