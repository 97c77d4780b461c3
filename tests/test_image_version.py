"""The version a node reports: its OS image's (``imager --version``), else Talos 1.7.6's."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_imager_customise import KVER, listing

from ichor.imager import __main__ as imager_main
from ichor.imager import _build
from ichor.machinery import TALOS_VERSION
from ichor.machinery.errors import MachineryError
from ichor.machinery.imageversion import IMAGE_VERSION_FILE, image_version, running_version


def test_the_ichor_layer_carries_the_build_version_and_a_new_version_is_a_new_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    source = tmp_path / "ichor"
    source.mkdir()
    (source / "__init__.py").write_text("")
    (source / IMAGE_VERSION_FILE).write_text("stale\n")  # a source tree's own file is not copied
    monkeypatch.setattr(_build._Builder, "kernel", lambda self: (tmp_path, KVER))

    def layer(version: str) -> Path:
        options = _build.BuildOptions(output=tmp_path / "out", cache=tmp_path / "cache", source=source,
                                      version=version)  # fmt: skip
        return _build._Builder(options, tmp_path).ichor_layer()

    v2 = layer("v1.7.7-ichor.2")
    assert f"usr/lib/python3/dist-packages/ichor/{IMAGE_VERSION_FILE}" in listing(v2)
    out = tmp_path / "unpacked"
    subprocess.run(["unsquashfs", "-q", "-no-progress", "-d", str(out), str(v2)], check=True)
    package = out / "usr/lib/python3/dist-packages/ichor"
    assert image_version(package) == "v1.7.7-ichor.2"
    assert "VERSION_ID=v1.7.7-ichor.2\n" in (out / "etc/os-release").read_text()
    assert layer("v1.7.8") != v2


def test_image_version_reads_only_a_well_formed_tag(tmp_path: Path) -> None:
    assert image_version(tmp_path) is None  # a source tree: none
    for text, expected in (("v1.7.7-ichor.2\n", "v1.7.7-ichor.2"), ("v1 7\n", None), ("x" * 65, None),
                           ("../etc\n", None), ("", None)):  # fmt: skip
        (tmp_path / IMAGE_VERSION_FILE).write_text(text)
        assert image_version(tmp_path) == expected, text
    (tmp_path / IMAGE_VERSION_FILE).write_bytes(b"v1.7.7\xff")
    assert image_version(tmp_path) is None
    assert running_version() == TALOS_VERSION  # the tests run from the source tree


def test_imager_refuses_a_version_that_is_not_a_tag() -> None:
    with pytest.raises(MachineryError) as err:
        imager_main._version("v1.7.7 beta")
    assert "--version 'v1.7.7 beta' is not a version tag" in str(err.value)
    assert imager_main._version("v1.7.7-ichor.2") == "v1.7.7-ichor.2"
