"""Ichor's boot-counting block run by GRUB itself (grub-emu, GRUB's user-space build) on an xfs BOOT image.

GRUB reads grub.cfg and the grubenv from the xfs image through its own xfs driver and writes the
grubenv back through its block list (``save_env``), exactly as on a disk. Each "boot" runs grub-emu
until it tries to boot an entry (it has no ``linux`` loader), then stops it. Every step is compared
with the pure model :func:`ichor.machinery.bootloader.boot`; a bless is an in-place rewrite of the
grubenv's bytes, as Linux does on a mounted BOOT.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from ichor.installer._filesystems import Target, make_boot_xfs
from ichor.machinery import proc
from ichor.machinery.bootloader import (
    BootState,
    MenuEntry,
    Slot,
    bless,
    boot,
    create_env,
    installed,
    parse_env,
    render_env,
    render_grub_cfg,
    upgrade,
)

MIB = 1024 * 1024
HEADER = b"# GRUB Environment Block\n"


def _env_offset(image: Path) -> int:
    """Where the grubenv's 1024 bytes are inside the image (xfs keeps a 1 KiB file in one block)."""
    with image.open("rb") as f:
        data = f.read(300 * MIB)
    found = [m.start() for m in re.finditer(re.escape(HEADER), data) if m.start() % 512 == 0]
    assert len(found) == 1, f"grubenv found {len(found)} times"
    return found[0]


def _rewrite_env(image: Path, offset: int, state: BootState) -> None:
    """What Linux does to bless: the grubenv's 1024 bytes rewritten where they are."""
    fd = os.open(image, os.O_WRONLY)
    try:
        os.pwrite(fd, render_env(state.to_env()), offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def _grub_boot(tmp_path: Path, devmap: Path, run: int) -> str:
    """One boot: the title GRUB picks. grub-emu then waits for a key; it is stopped by its PID."""
    out = tmp_path / f"emu-{run}.log"
    child = proc.start(["grub-emu", "-m", str(devmap), "-r", "hd0", "-d", "/grub"], output=out)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            text = out.read_text(errors="replace")
            match = re.search(r"Booting `([^']+)'", text)
            if match:
                return match.group(1)
            if child.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"grub-emu did not boot an entry: {out.read_text(errors='replace')[-500:]}")
    finally:
        if child.poll() is None:
            child.signal_group(signal.SIGKILL)
        child.wait(10)


@pytest.mark.skipif(
    shutil.which("grub-emu") is None, reason="grub-emu not installed (scripts/os-packages.txt)"
)
def test_grub_counts_tries_and_falls_back_like_the_model(tmp_path: Path) -> None:
    if shutil.which("mkfs.xfs") is None:
        pytest.skip("mkfs.xfs not installed (xfsprogs; scripts/os-packages.txt)")
    state = upgrade(installed("v1"), "v2").state  # B on trial, 3 tries
    entries = {Slot.A: MenuEntry("v1", "console=ttyS0"), Slot.B: MenuEntry("v2", "console=ttyS0")}
    (tmp_path / "grub.cfg").write_text(render_grub_cfg(entries, Slot.A, timeout=0))
    create_env(tmp_path / "grubenv", state.to_env())
    kernel = tmp_path / "kernel"
    kernel.write_bytes(b"k")
    image = tmp_path / "boot.img"
    with image.open("wb") as f:
        f.truncate(300 * MIB)
    files = {"grub/grub.cfg": tmp_path / "grub.cfg", "grub/grubenv": tmp_path / "grubenv"}
    files |= {f"{s}/{name}": kernel for s in "AB" for name in ("vmlinuz", "initramfs.xz")}
    make_boot_xfs(Target(image, 0, 300 * MIB, False), files)
    devmap = tmp_path / "device.map"
    devmap.write_text(f"(hd0) {image}\n")
    offset = _env_offset(image)

    def on_disk() -> BootState:
        with image.open("rb") as f:
            f.seek(offset)
            return BootState.from_env(parse_env(f.read(1024)))

    titles = {Slot.A: "A - Talos v1", Slot.B: "B - Talos v2"}
    booted = []
    for run in range(5):
        expected_slot, t = boot(state)
        title = _grub_boot(tmp_path, devmap, run)
        assert title == titles[expected_slot], f"boot {run}: GRUB chose {title!r}, the model {expected_slot}"
        assert on_disk() == t.state, f"boot {run}: GRUB saved {on_disk()}, the model {t.state}"
        state = t.state
        booted.append(expected_slot)
    assert booted == [Slot.B, Slot.B, Slot.B, Slot.A, Slot.A]
    assert state.failed == "B:v2:no healthy boot in its tries"

    # a second upgrade that becomes healthy: Linux blesses it by rewriting the grubenv in place
    state = upgrade(state, "v2").state
    _rewrite_env(image, offset, state)
    assert _grub_boot(tmp_path, devmap, 5) == titles[Slot.B]
    _, t = boot(state)
    state = bless(t.state, Slot.B).state
    _rewrite_env(image, offset, state)
    assert _grub_boot(tmp_path, devmap, 6) == titles[Slot.B]
    assert on_disk() == state  # nothing left to count: GRUB saved nothing
