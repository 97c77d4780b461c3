"""The imager's containerd layer: an image whose extensions ship an extension service gets
containerd, its runc shim, ``ctr`` and runc (``layers/25-containerd.sqsh``, stacked between the
ichor layer and the extensions), built from the pinned packages of layer ``containerd``; an image
without one does not; a lock file without those packages is refused naming the layer.

The packages are fakes (trees laid out as the Debian packages unpack); mksquashfs/unsquashfs are
the real tools.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_imager_extensions import builder, listing, make_extension

from ichor.imager import InputError, _build, _inputs

pytestmark = pytest.mark.skipif(
    not all(__import__("shutil").which(t) for t in ("mksquashfs", "unsquashfs", "depmod")),
    reason="needs squashfs-tools and kmod (scripts/os-packages.txt)",
)

SERVICE = b"name: agent\ncontainer:\n  entrypoint: /bin/agent\nrestart: always\n"
PACKAGES = {
    "containerd": ["usr/bin/containerd", "usr/bin/containerd-shim", "usr/bin/containerd-shim-runc-v1",
                   "usr/bin/containerd-shim-runc-v2", "usr/bin/ctr", "usr/share/doc/containerd/copyright",
                   "usr/share/man/man8/containerd.8.gz"],
    "runc": ["usr/sbin/runc", "usr/share/doc/runc/copyright"],
    "libseccomp2": ["usr/lib/x86_64-linux-gnu/libseccomp.so.2.5.4", "usr/share/doc/libseccomp2/copyright"],
}  # fmt: skip


def fake_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, packages: dict[str, list[str]]) -> None:
    entries = []
    for package, files in packages.items():
        tree = tmp_path / "debs" / package
        for name in files:
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes(f"{package}:{name}".encode())
            (tree / name).chmod(0o755 if "/bin/" in name else 0o644)
        if package == "libseccomp2":
            (tree / "usr/lib/x86_64-linux-gnu/libseccomp.so.2").symlink_to("libseccomp.so.2.5.4")
        entries.append((_inputs.Deb(package, "1.0", "containerd"), tree, f"{package:0<16}"))
    monkeypatch.setattr(
        _build._Builder, "of_layer", lambda self, layer: entries if layer == "containerd" else []
    )
    monkeypatch.setattr(_build._Builder, "extracted", lambda self, deb, sha: deb)


def service_extension(tmp_path: Path) -> Path:
    return make_extension(
        tmp_path / "agent",
        "agent",
        files={
            "usr/local/etc/containers/agent.yaml": SERVICE,
            "usr/local/lib/containers/agent/bin/agent": b"#!/bin/sh\n",
        },
    )


def test_an_extension_service_brings_the_containerd_layer_under_the_extensions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_packages(tmp_path, monkeypatch, PACKAGES)
    plain = make_extension(tmp_path / "plain", "plain")
    b = builder(tmp_path, monkeypatch, system_extension_images=(str(plain), str(service_extension(tmp_path))))
    layers = b.extra_layers()
    names = [name for name, _ in layers]
    assert names == [
        "25-containerd.sqsh",
        "30-ext-000-plain.sqsh",
        "30-ext-001-agent.sqsh",
        "45-extensions.sqsh",
    ]
    # Stage 1 stacks in name order: over base, pydeps and ichor, under the extensions.
    assert sorted([_build.ICHOR_LAYER, *names])[:2] == [_build.ICHOR_LAYER, "25-containerd.sqsh"]
    files = listing(dict(layers)["25-containerd.sqsh"])
    assert [f for f in files if not f.endswith(("bin", "usr", "sbin", "lib", "x86_64-linux-gnu"))] == [
        "usr/bin/containerd", "usr/bin/containerd-shim-runc-v2", "usr/bin/ctr",
        "usr/lib/x86_64-linux-gnu/libseccomp.so.2", "usr/lib/x86_64-linux-gnu/libseccomp.so.2.5.4",
        "usr/sbin/runc",
    ]  # fmt: skip
    # Without an extension service there is nothing to run in containerd: no layer.
    without = builder(tmp_path, monkeypatch, cache="c2", system_extension_images=(str(plain),))
    assert [name for name, _ in without.extra_layers()] == ["30-ext-000-plain.sqsh", "45-extensions.sqsh"]


def test_a_lock_without_the_containerd_packages_is_refused_naming_the_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_packages(tmp_path, monkeypatch, {"containerd": PACKAGES["containerd"]})
    b = builder(tmp_path, monkeypatch, system_extension_images=(str(service_extension(tmp_path)),))
    with pytest.raises(InputError) as caught:
        b.extra_layers()
    assert "layer 'containerd' lacks usr/sbin/runc" in str(caught.value)
    monkeypatch.setattr(_build._Builder, "of_layer", lambda self, layer: [])
    with pytest.raises(InputError) as caught:
        builder(
            tmp_path,
            monkeypatch,
            cache="c3",
            system_extension_images=(str(service_extension(tmp_path / "x")),),
        ).extra_layers()
    assert "no package in layer 'containerd'" in str(caught.value)


def test_the_pinned_lock_names_containerd_runc_and_libseccomp_in_the_containerd_layer() -> None:
    pins = {d.package: d.layer for d in _inputs.read_deb_pins(_inputs.PINS / "debs.lock")}
    assert {p for p, layer in pins.items() if layer == "containerd"} == {"containerd", "runc", "libseccomp2"}
