"""``python -m ichor.imager <profile> [--output DIR] [--extra-kernel-arg ARG]...``: build an OS artefact.

Profiles (Talos's names): ``kernel`` -> ``vmlinuz-amd64``, ``initramfs`` -> ``initramfs-amd64.xz``,
``cmdline`` -> ``cmdline-amd64`` (the kernel command line a bootloader passes, with the extra
arguments applied). Progress goes to stderr; the artefact's sha256 and path to stdout
(``sha256sum`` format). Exit code 1 with ``error:``/``hint:`` on a bad input or output.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from ichor.imager import ImagerError
from ichor.imager._build import BuildOptions, Profile, build, default_cache
from ichor.machinery.errors import MachineryError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ichor.imager", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("profile", type=Profile, choices=list(Profile), help="what to build")
    parser.add_argument("--output", type=Path, default=Path("_out"), help="output directory (default _out)")
    parser.add_argument(
        "--extra-kernel-arg", action="append", default=[], metavar="ARG",
        help="an extra kernel argument (repeatable); -ARG drops ARG from the defaults (Talos's rule)",
    )  # fmt: skip
    parser.add_argument("--cache-dir", type=Path, default=default_cache(), help=argparse.SUPPRESS)
    parser.add_argument("--debug", action="store_true", help="log every command the imager runs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.debug else logging.WARNING, stream=sys.stderr,
                        format="%(name)s: %(message)s")  # fmt: skip

    def say(line: str) -> None:
        print(f"imager: {line}", file=sys.stderr, flush=True)

    options = BuildOptions(
        output=args.output, cache=args.cache_dir, extra_kernel_args=tuple(args.extra_kernel_arg), say=say
    )
    try:
        artefact = build(args.profile, options)
    except (ImagerError, MachineryError) as err:
        print(f"error: {err}", file=sys.stderr)
        if err.hint:
            print(f"hint: {err.hint}", file=sys.stderr)
        if args.debug:
            raise
        return 1
    print(f"{artefact.sha256}  {artefact.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
