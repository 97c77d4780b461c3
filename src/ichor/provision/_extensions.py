"""System extensions in container nodes: ``cluster create --extension <dir>`` (repeatable).

Talos bakes extensions into the boot image as squashfs layers overlaid on its root. A container
node has no image, so the provisioner does the nearest thing: each extension's ``rootfs/usr/local``
becomes a read-only lower layer of an overlay mounted on the node's ``/usr/local`` (the host's
``/usr/local`` stays the bottom layer; an extension given later lies over earlier ones), and the
node's ``/etc/extensions.yaml`` lists the layers as Talos's installer writes it, which machined
turns into ``talosctl get extensions``.

Checked before anything starts (:func:`check_extensions`): Talos's rules for the directory
(:func:`ichor.machinery.extensions.load_extension`), files only under ``/usr/local`` (a container
node shares the host's kernel, so firmware and modules cannot be layered), one extension per name,
and paths overlayfs can take. The overlay is made in the node's own mount namespace
(:func:`layer`), so it goes with the node: ``cluster destroy`` leaves no mount behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ichor.machinery.errors import ExtensionError, MachineryError
from ichor.machinery.extensions import SystemExtension, load_extension
from ichor.machinery.yamlio import dump_document, from_plain
from ichor.provision import _linux as linux

__all__ = ["check_extensions", "extensions_yaml", "layer"]

_FLAG_HINT = "pass --extension a directory holding manifest.yaml and rootfs/ (Talos's extension layout)"
_OVERLAY_UNSAFE = (":", ",", "\\", "\n")


def _refuse(directory: str, message: str, hint: str) -> MachineryError:
    return MachineryError(f"--extension {directory}: {message}", hint=hint)


def check_extensions(
    directories: Sequence[str], *, container: bool, given: Sequence[str] | None = None
) -> list[SystemExtension]:
    """Load and check every ``--extension``; raises :class:`MachineryError` naming the flag (with
    ``given``, the words the user passed for each directory, e.g. the image it was unpacked from)."""
    if directories and not container:
        raise MachineryError(
            "--extension needs container nodes: process nodes share the host's file system",
            hint="run as root with --provisioner container, or leave out --extension",
        )
    loaded: list[SystemExtension] = []
    names: dict[str, str] = {}
    for directory, shown in zip(directories, given or directories, strict=True):
        path = Path(directory).expanduser().resolve()
        try:
            ext = load_extension(path)
        except ExtensionError as exc:
            raise _refuse(shown, str(exc), exc.hint or _FLAG_HINT) from None
        if any(ch in str(path) for ch in _OVERLAY_UNSAFE):
            raise _refuse(shown, "the path holds ':', ',' or '\\', which overlayfs cannot take",
                          "move or link the extension to a plain path")  # fmt: skip
        outside = [p.name for p in ext.rootfs.iterdir() if p.name != "usr"]
        outside += [f"usr/{p.name}" for p in (ext.rootfs / "usr").glob("*") if p.name != "local"]
        if outside:
            raise _refuse(shown, f"rootfs/{outside[0]}: container nodes layer only /usr/local",
                          "a container node shares the host's kernel (no firmware or modules); keep files under rootfs/usr/local")  # fmt: skip
        if ext.metadata.name in names:
            raise _refuse(shown, f"extension {ext.metadata.name!r} is already given by --extension {names[ext.metadata.name]}",
                          "give each extension once")  # fmt: skip
        names[ext.metadata.name] = shown
        loaded.append(ext)
    return loaded


def extensions_yaml(extensions: Sequence[SystemExtension]) -> str:
    """``/etc/extensions.yaml`` as Talos's installer writes it: the layers in order, with metadata."""
    layers = [{"image": ext.directory.name, "metadata": ext.metadata.to_yaml()} for ext in extensions]
    return dump_document(from_plain({"layers": layers}))


def layer(rootfs: Path, directories: Sequence[str]) -> None:
    """In the node's mount namespace: overlay the extensions on ``<rootfs>/usr/local``, write
    ``<rootfs>/etc/extensions.yaml``. Called by the launcher after the root is built."""
    extensions = check_extensions(directories, container=True)
    if not extensions:
        return
    lowers = [
        str(ext.rootfs / "usr/local") for ext in reversed(extensions) if (ext.rootfs / "usr/local").is_dir()
    ]
    if lowers:
        target = rootfs / "usr/local"
        target.mkdir(parents=True, exist_ok=True)
        if Path("/usr/local").is_dir():
            lowers.append("/usr/local")
        flags = linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV
        if len(lowers) == 1:  # overlayfs wants two layers when none is writeable
            linux.mount(lowers[0], str(target), None, linux.MS_BIND)
            linux.mount(None, str(target), None, linux.MS_BIND | linux.MS_REMOUNT | flags)
        else:
            linux.mount("overlay", str(target), "overlay", flags, "lowerdir=" + ":".join(lowers))
    (rootfs / "etc").mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/extensions.yaml").write_text(extensions_yaml(extensions))
