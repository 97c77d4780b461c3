"""The imager's iso, metal and installer outputs: build time and size, warm and after an Ichor-only change.

Run (root for nothing; holds the shared lock itself since it keeps both cores busy):
``.venv/bin/python benchmarks/imager.py [--xz]``

With the layer cache as it is (a first run builds the layers: minutes), builds each profile into a
scratch directory and prints seconds and MB, then builds ``iso`` again from a scratch copy of
Ichor's source with one file added (the top layer's key changes: what an Ichor-only edit costs).
``--xz`` also times ``metal`` as ``.raw.xz`` (xz reads every zero of the 1246 MiB disk: a minute or
more on 2 cores). The floor printed beside them is the initramfs alone, which every output embeds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import ichor
from ichor.imager._build import BuildOptions, OutFormat, Profile, build

LOCK = "/tmp/ichor-heavy.lock"


def _timed(profile: Profile, options: BuildOptions) -> None:
    started = time.monotonic()
    artefact = build(profile, options)
    print(f"{profile.value + ' -> ' + artefact.path.name:44} {time.monotonic() - started:6.1f} s"
          f"  {artefact.size / 1e6:7.1f} MB", flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--xz", action="store_true", help="also time metal-amd64.raw.xz")
    args = parser.parse_args()
    if os.environ.get("ICHOR_HEAVY_LOCKED") != "1":
        os.environ["ICHOR_HEAVY_LOCKED"] = "1"
        os.execvp("flock", ["flock", LOCK, sys.executable, *sys.argv])
    work = Path(tempfile.mkdtemp(prefix="ichor-imager-bench-"))
    try:
        options = BuildOptions(output=work / "out", out_format=OutFormat.RAW)
        _timed(Profile.INITRAMFS, options)  # warms the layers; the floor of everything below
        _timed(Profile.INITRAMFS, options)
        for profile in (Profile.ISO, Profile.METAL, Profile.INSTALLER):
            _timed(profile, options)
        if args.xz:
            _timed(Profile.METAL, BuildOptions(output=work / "out", out_format=OutFormat.XZ))
        source = work / "src" / "ichor"
        shutil.copytree(Path(ichor.__file__).parent, source, ignore=shutil.ignore_patterns("__pycache__"))
        (source / "_bench_marker.py").write_text(f"STAMP = {time.time()!r}\n")
        print("after an Ichor-only change (the top layer rebuilt):")
        _timed(Profile.ISO, BuildOptions(output=work / "out2", source=source))
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
