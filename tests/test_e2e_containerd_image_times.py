"""End to end: ``image ls``'s CREATED comes from the real containerd 1.6 (Debian's), through the
Images API proto Ichor declares (``api/protos/containerd/images.proto``): a private containerd of the
test's own (own root, state and socket under the test's tmp dir, CRI plugin off) imports a one-layer
OCI image with ``ctr images import --no-unpack``; :meth:`ichor.machined.cri.Ctr.images` then gives
it ``ctr``'s name, digest and size and containerd's ``created_at`` (between the import's start and
end), in the namespace asked, and none in another namespace. Time budget: 20 s (measured: ~2 s).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tarfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ichor.images import ImageSpec, build_layout
from ichor.machined import cri
from ichor.machinery import proc

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.root,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("containerd") is None or shutil.which("ctr") is None,
        reason="a private containerd needs root and containerd + ctr (bash run.sh installs containerd as root)",
    ),
]

NAME = "ichor.test/smalls-created:v1"


@pytest.fixture
def containerd(tmp_path: Path) -> Iterator[Path]:
    # A short socket path (sun_path is 108 bytes) in the test's own directory.
    base = Path(f"/tmp/ichor-smalls-ctrd-{os.getpid()}")
    base.mkdir(mode=0o700)
    socket = base / "c.sock"
    config = tmp_path / "config.toml"
    config.write_text(
        "version = 2\n"
        f'root = "{tmp_path / "root"}"\n'
        f'state = "{base / "state"}"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{socket}"\n'
        f'[ttrpc]\n  address = "{base / "t.sock"}"\n'
        '[debug]\n  address = ""\n'
        '[metrics]\n  address = ""\n'
    )
    daemon = proc.start(["containerd", "--config", str(config)], output=tmp_path / "containerd.log")
    try:
        deadline = time.monotonic() + 15
        while proc.run(["ctr", "--address", str(socket), "version"], check=False, timeout=5).exit_code != 0:
            assert daemon.poll() is None, (tmp_path / "containerd.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "containerd did not answer in 15 s"
            time.sleep(0.2)
        yield socket
    finally:
        daemon.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_created_is_containerds_record_of_the_import(containerd: Path, tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    (rootfs / "etc" / "hello").write_text("hello\n")
    built = build_layout(rootfs, tmp_path / "layout", tag="v1", spec=ImageSpec())
    archive = tmp_path / "image.tar"
    with tarfile.open(archive, "w") as tar:
        for entry in sorted(built.layout.rglob("*")):
            tar.add(entry, arcname=str(entry.relative_to(built.layout)), recursive=False)

    before = datetime.now(UTC).replace(microsecond=0)
    imported = proc.run(
        ["ctr", "--address", str(containerd), "--namespace", "system", "images", "import", "--no-unpack",
         "--index-name", NAME, str(archive)],
        check=False, timeout=30,
    )  # fmt: skip
    after = datetime.now(UTC) + timedelta(seconds=1)
    assert imported.exit_code == 0, imported.stderr

    ctr = cri.Ctr(containerd)
    images = asyncio.run(ctr.images("system"))
    (image,) = [i for i in images if i.name == NAME]
    assert image.digest.startswith("sha256:") and image.size > 0
    assert image.created is not None and before <= image.created <= after, (before, image.created, after)
    assert asyncio.run(ctr.image_times("k8s.io")) == {}
