"""Filesystems the installer makes, on a partition device or inside a disk image file, without mounting.

BOOT is ``mkfs.xfs -L BOOT`` populated in the same call from a prototype file (``-p``), so no mount
is needed; inside an image file it is built in a sparse temporary file and copied in sparsely.
EFI is ``mkfs.vfat -F 32 -s 1 -n EFI`` (``--offset`` inside an image) filled with mtools: the host this
runs on may have no vfat driver at all (os-design §3.6).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ichor.machinery import proc
from ichor.machinery.errors import InstallError

__all__ = ["Target", "format_if_blank", "make_boot_xfs", "make_efi_vfat"]

_MTOOLS_ENV = {"MTOOLS_SKIP_CHECK": "1"}


@dataclass(frozen=True)
class Target:
    """Where a partition is: its own device node, or ``offset``/``size`` bytes into an image file."""

    path: Path
    offset: int
    size: int
    is_partition_device: bool

    def mtools_image(self) -> str:
        return str(self.path) if self.is_partition_device else f"{self.path}@@{self.offset}"


def _protofile(files: Mapping[str, Path]) -> str:
    """An xfs prototype file: directories 755, files 644, owned by root."""
    tree: dict[str, object] = {}
    for rel, source in sorted(files.items()):
        parts = PurePosixPath(rel).parts
        if not parts or any(p in ("", ".", "..") or any(c.isspace() for c in p) for p in parts):
            raise InstallError(f"cannot place {rel!r} on BOOT")
        node = tree
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise InstallError(f"{rel!r}: {part} is a file on BOOT")
            node = child
        source = Path(source).resolve()
        if not source.is_file() or any(c.isspace() for c in str(source)):
            raise InstallError(f"{source} is not a file the installer can copy to BOOT")
        node[parts[-1]] = source

    lines = ["/dev/null", "0 0", "d--755 0 0"]

    def walk(node: dict[str, object]) -> None:
        for name, child in node.items():
            if isinstance(child, dict):
                lines.append(f"{name} d--755 0 0")
                walk(child)
                lines.append("$")
            else:
                lines.append(f"{name} ---644 0 0 {child}")

    walk(tree)
    lines.append("$")
    return "\n".join(lines) + "\n"


def _copy_sparse(source: Path, dest: Path, offset: int) -> None:
    """Copy ``source`` into ``dest`` at ``offset``, data regions only (holes stay holes)."""
    src = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
    dst = os.open(dest, os.O_WRONLY | os.O_CLOEXEC)
    try:
        end = os.fstat(src).st_size
        pos = 0
        while pos < end:
            try:
                pos = os.lseek(src, pos, os.SEEK_DATA)
            except OSError:
                break  # no data after pos
            hole = os.lseek(src, pos, os.SEEK_HOLE)
            while pos < hole:
                chunk = os.pread(src, min(8 * 1024 * 1024, hole - pos), pos)
                os.pwrite(dst, chunk, offset + pos)
                pos += len(chunk)
        os.fsync(dst)
    finally:
        os.close(src)
        os.close(dst)


def _xfs_inodes(device: str) -> list[int]:
    """Every inode in use on a small xfs: the root's metadata inodes and the tree under it."""
    head = proc.run(["xfs_db", "-r", "-c", "sb 0", "-c", "print rootino rbmino rsumino", device]).stdout
    inodes = [int(line.split("=")[1]) for line in head.splitlines() if "=" in line]
    pending = ["/"]
    while pending:
        directory = pending.pop()
        for line in proc.run(["xfs_db", "-r", "-c", f"ls {directory}", device]).stdout.splitlines():
            fields = line.split()
            if len(fields) < 6 or fields[5] in (".", ".."):
                continue
            inodes.append(int(fields[1]))
            if fields[2] == "directory":
                pending.append(f"{directory.rstrip('/')}/{fields[5]}")
    return sorted(set(inodes))


def _pin_xfs_times(device: str, epoch: int) -> None:
    """Set every inode's times to ``epoch`` and its generation to 0 (mkfs.xfs has no SOURCE_DATE_EPOCH)."""
    raw = epoch + 2**31  # bigtime: stored as seconds since 1901-12-13 (xfsprogs 6.1 makes bigtime)
    commands: list[str] = []
    for inode in _xfs_inodes(device):
        commands += ["-c", f"inode {inode}"]
        for name in ("core.atime", "core.mtime", "core.ctime", "v3.crtime"):
            commands += ["-c", f"write -d {name}.sec {raw}", "-c", f"write -d {name}.nsec 0"]
        commands += ["-c", "write -d core.gen 0"]
    proc.run(["xfs_db", "-x", *commands, device])


def make_boot_xfs(
    target: Target,
    files: Mapping[str, Path],
    *,
    label: str = "BOOT",
    uuid: str | None = None,
    source_date_epoch: int | None = None,
) -> None:
    """Format ``target`` as xfs labelled ``label`` holding ``files`` (path on BOOT -> host file).

    With ``uuid`` and ``source_date_epoch`` the result is the same bytes every time.
    """
    extra = ["-m", f"uuid={uuid}"] if uuid else []
    with tempfile.TemporaryDirectory(
        prefix="ichor-boot-", dir=None if target.is_partition_device else target.path.parent
    ) as tmp:
        proto = Path(tmp) / "proto"
        proto.write_text(_protofile(files))
        if target.is_partition_device:
            proc.run(["mkfs.xfs", "-q", "-f", "-L", label, *extra, "-p", str(proto), str(target.path)])
            if source_date_epoch is not None:
                _pin_xfs_times(str(target.path), source_date_epoch)
            return
        image = Path(tmp) / "boot.img"
        with image.open("wb") as f:
            f.truncate(target.size)
        proc.run(["mkfs.xfs", "-q", "-f", "-L", label, *extra, "-p", str(proto), str(image)])
        if source_date_epoch is not None:
            _pin_xfs_times(str(image), source_date_epoch)
        _copy_sparse(image, target.path, target.offset)


def make_efi_vfat(
    target: Target,
    files: Mapping[str, Path],
    *,
    label: str = "EFI",
    volume_id: str | None = None,
    source_date_epoch: int | None = None,
) -> None:
    """Format ``target`` as FAT32 labelled ``label`` and copy ``files`` in with mtools.

    With ``volume_id`` and ``source_date_epoch`` the result is the same bytes every time.
    """
    env = dict(_MTOOLS_ENV)
    if source_date_epoch is not None:
        env["SOURCE_DATE_EPOCH"] = str(source_date_epoch)
    # Talos runs `mkfs.vfat -F 32 -n EFI`; on 100 MiB that gives 4 KiB clusters, too few for a FAT32
    # by the spec, and mtools then refuses to make directories. 512-byte clusters (-s 1) give 200k.
    args = ["mkfs.vfat", "-F", "32", "-s", "1", "-n", label]
    if volume_id:
        args += ["--invariant", "-i", volume_id]  # in this order: --invariant also sets an id
    if target.is_partition_device:
        args.append(str(target.path))
    else:
        args += [f"--offset={target.offset // 512}", str(target.path), str(target.size // 1024)]
    proc.run(args)
    image = target.mtools_image()
    made: set[str] = set()
    for rel, source in sorted(files.items()):
        parts = PurePosixPath(rel).parts
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            if directory not in made:
                proc.run(["mmd", "-i", image, f"::{directory}"], env=env)
                made.add(directory)
        proc.run(["mcopy", "-i", image, str(source), f"::{rel}"], env=env)


def format_if_blank(device: Path, label: str) -> bool:
    """Talos's format on first mount: make an xfs labelled ``label`` unless a filesystem is there.

    STATE and EPHEMERAL are left zeroed by the installer and by a reset; machined calls this before
    mounting them. True when it formatted.
    """
    from ichor.machinery.blockdev import device_size, open_device, probe

    if probe(device) is not None:
        return False
    with open_device(device) as fd:
        size = device_size(fd)
    # xfsprogs >= 5.19 refuses filesystems under 300 MB (STATE is 100 MiB) unless it believes it
    # runs under fstests; these three variables are that escape hatch.
    env = {"TEST_DIR": "1", "TEST_DEV": "1", "QA_CHECK_FS": "1"} if size < 300 * 10**6 else None
    proc.run(["mkfs.xfs", "-q", "-f", "-n", "ftype=1", "-m", "bigtime=1", "-L", label, str(device)], env=env)
    return True
