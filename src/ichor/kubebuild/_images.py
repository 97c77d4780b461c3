"""The images a cluster pulls, laid out as the upstream images lay them out, from our own binaries.

Each :class:`ImageRecipe` names Talos 1.7's reference for the image (:class:`~ichor.machinery.constants.Images`),
which built binaries go where (``/usr/local/bin/kube-apiserver``, ``/coredns``, ``/pause``,
``/opt/bin/flanneld`` + ``/flannel``), which busybox applets it needs (flannel's install-cni init
container runs ``cp``; kubelet execs ``mount``/``umount``/``nsenter``), and whether it carries the
host's iptables-nft tools (kube-proxy, kubelet and flannel program iptables): Debian's
``xtables-nft-multi``, its command links, its extension modules and every shared library ``ldd``
names, copied at their paths. :func:`assemble_rootfs` builds the directory; packing it is
:func:`ichor.images.build_layout`'s work. Nothing here reads the network.
"""

from __future__ import annotations

__all__ = ["IMAGES", "ImageRecipe", "assemble_rootfs", "kubernetes_images"]

import dataclasses
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ichor.images import ImageSpec, busybox_rootfs
from ichor.kubebuild._errors import KubeBuildError
from ichor.machinery import proc
from ichor.machinery.constants import Images

_XTABLES = Path("/usr/sbin/xtables-nft-multi")
_XTABLES_MODULES = Path("/usr/lib/x86_64-linux-gnu/xtables")
_XTABLES_LINKS = tuple(
    f"{family}{suffix}"
    for family in ("iptables", "ip6tables")
    for suffix in ("", "-save", "-restore", "-nft", "-nft-save", "-nft-restore")
)
IPTABLES_HINT = "install Debian's iptables (`apt-get install -y iptables`; `bash run.sh` does it as root)"
_PASSWD = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
_GROUP = "root:x:0:\nnobody:x:65534:\n"


@dataclass(frozen=True)
class ImageRecipe:
    key: str
    reference: str
    files: Mapping[str, tuple[str, str]]
    """Path in the image -> (component, binary)."""
    entrypoint: tuple[str, ...]
    applets: tuple[str, ...] = ()
    iptables: bool = False
    scripts: Mapping[str, str] = field(default_factory=dict)
    """Path in the image -> a shell script's text (mode 0755)."""

    def spec(self, source_version: str) -> ImageSpec:
        return ImageSpec(
            entrypoint=self.entrypoint,
            labels={"org.opencontainers.image.version": source_version,
                    "org.opencontainers.image.vendor": "built by Ichor from the upstream Go modules"},
        )  # fmt: skip


def _kube(key: str, name: str, reference: str, **extra: object) -> ImageRecipe:
    return ImageRecipe(key, reference, {f"usr/local/bin/{name}": ("kubernetes", name)},
                       (f"/usr/local/bin/{name}",), **extra)  # type: ignore[arg-type]  # fmt: skip


_INSTALL_CNI = """#!/bin/sh
# The flannel CNI plugin into the node's /opt/cni/bin (the DaemonSet's install-cni init container).
set -e
cp -f /flannel /host/opt/cni/bin/flannel.tmp
mv -f /host/opt/cni/bin/flannel.tmp /host/opt/cni/bin/flannel
"""
_DEFAULT = Images()
IMAGES: tuple[ImageRecipe, ...] = (
    _kube("kube-apiserver", "kube-apiserver", _DEFAULT.kube_apiserver),
    _kube("kube-controller-manager", "kube-controller-manager", _DEFAULT.kube_controller_manager),
    _kube("kube-scheduler", "kube-scheduler", _DEFAULT.kube_scheduler),
    _kube("kube-proxy", "kube-proxy", _DEFAULT.kube_proxy, iptables=True),
    _kube("kubelet", "kubelet", _DEFAULT.kubelet, iptables=True,
          applets=("sh", "mount", "umount", "nsenter", "losetup", "mkdir", "cat")),
    ImageRecipe("coredns", _DEFAULT.coredns, {"coredns": ("coredns", "coredns")}, ("/coredns",)),
    ImageRecipe("flannel", _DEFAULT.flannel,
                {"opt/bin/flanneld": ("flannel", "flanneld"), "flannel": ("flannel-cni", "flannel")},
                ("/opt/bin/flanneld",), applets=("sh", "cp", "mv", "mkdir", "cat", "ls"), iptables=True,
                scripts={"install-cni.sh": _INSTALL_CNI}),
    ImageRecipe("pause", _DEFAULT.pause, {"pause": ("pause", "pause")}, ("/pause",)),
)  # fmt: skip


def kubernetes_images(version: str) -> tuple[ImageRecipe, ...]:
    """The images of another Kubernetes ``version`` (``v1.30.2``) an upgrade pulls: the control plane's,
    kube-proxy's and the kubelet's, under Talos's references for that version, each laid out as the
    cluster version's image and cached beside it (``images/kube-apiserver-v1.30.2``)."""
    images = Images(kubernetes_version=version)
    references = {"kube-apiserver": images.kube_apiserver, "kube-controller-manager": images.kube_controller_manager,
                  "kube-scheduler": images.kube_scheduler, "kube-proxy": images.kube_proxy,
                  "kubelet": images.kubelet}  # fmt: skip
    return tuple(
        dataclasses.replace(recipe, key=f"{recipe.key}-{version}", reference=references[recipe.key])
        for recipe in IMAGES
        if recipe.key in references
    )


def _place(source: Path, target: Path) -> None:
    """``target`` becomes ``source``'s content: a hard link when possible (no copy of 100 MB binaries)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _libraries(binaries: list[Path]) -> set[Path]:
    """Every shared library ``ldd`` names for ``binaries`` (the dynamic loader included)."""
    found: set[Path] = set()
    for binary in binaries:
        out = proc.run(["ldd", str(binary)], timeout=30, check=False).stdout
        for match in re.finditer(r"(?:=>\s*)?(/\S+)\s+\(0x", out):
            found.add(Path(match[1]))
    return found


def iptables_files() -> dict[str, Path]:
    """Image path -> host file for the iptables-nft tools (links are made by :func:`assemble_rootfs`)."""
    if not _XTABLES.is_file():
        raise KubeBuildError(
            f"{_XTABLES} (the iptables-nft tools the images carry) is not installed", hint=IPTABLES_HINT
        )
    modules = sorted(_XTABLES_MODULES.glob("*.so")) if _XTABLES_MODULES.is_dir() else []
    files = {str(_XTABLES).lstrip("/"): _XTABLES}
    files |= {str(m).lstrip("/"): m for m in modules}
    for library in _libraries([_XTABLES, *modules]):
        files[str(library).lstrip("/")] = library.resolve()
    return files


def assemble_rootfs(recipe: ImageRecipe, root: Path, binaries: Mapping[str, Path]) -> Path:
    """Lay out ``recipe``'s root at ``root`` (recreated) from ``binaries`` (``component/binary`` -> path)."""
    shutil.rmtree(root, ignore_errors=True)
    if recipe.applets:
        busybox_rootfs(root, recipe.applets)
    for directory in ("etc", "tmp", "run", "var"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    # As on Debian: /var/run is /run (Talos mounts the node's /run at /var/run for the kubelet, which
    # then finds containerd's socket at /run/containerd/containerd.sock).
    (root / "var" / "run").symlink_to("../run")
    (root / "etc" / "passwd").write_text(_PASSWD)
    (root / "etc" / "group").write_text(_GROUP)
    (root / "etc" / "nsswitch.conf").write_text("hosts: files dns\n")
    for inside, (component, name) in recipe.files.items():
        _place(binaries[f"{component}/{name}"], root / inside)
    for inside, text in recipe.scripts.items():
        (root / inside).write_text(text)
        (root / inside).chmod(0o755)
    if recipe.iptables:
        for inside, host in iptables_files().items():
            target = root / inside
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(host, target)
        for name in _XTABLES_LINKS:
            (root / "usr" / "sbin" / name).symlink_to("xtables-nft-multi")
    return root
