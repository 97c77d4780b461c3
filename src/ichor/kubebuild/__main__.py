"""``python -m ichor.kubebuild [--only NAME,...] [--version V] [--force] [--push HOST:PORT]``: build
Kubernetes v1.30.3, CoreDNS, flannel, the CNI plugins and pause into the user's cache and pack their images.

``--version 1.30.2`` builds another Kubernetes version instead, only what an upgrade to or from it
needs (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy and their
images), cached beside v1.30.3; nothing builds it unless asked.

Progress goes to stderr (which component, elapsed time and packages compiled every tick); stdout
gets one line per result (``bin``, ``kubectl``, ``cni``, then ``image <reference> <layout>``). The
first run takes many minutes; a second one does nothing. With ``--push`` every image is pushed to
that registry (plain http) under its repository and tag, as the Air-gapped guide's mirror holds it.
"""

from __future__ import annotations

__all__ = ["main"]

import argparse
import sys
import time

from ichor.images import ImageError
from ichor.kubebuild._build import ensure_built, ensure_kubernetes, push_images
from ichor.kubebuild._components import COMPONENTS
from ichor.kubebuild._errors import KubeBuildError
from ichor.machinery import gobuild
from ichor.machinery.errors import MachineryError


def _say(line: str) -> None:
    print(f"build-kubernetes: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ichor.kubebuild", description=__doc__.splitlines()[0])
    names = ", ".join(c.name for c in COMPONENTS)
    parser.add_argument("--only", help=f"comma-separated components to build (of {names}; default all)")
    parser.add_argument(
        "--version", help="build this other Kubernetes version's upgrade images instead (e.g. 1.30.2)"
    )
    parser.add_argument("--force", action="store_true", help="rebuild even what is already built")
    parser.add_argument("--push", metavar="HOST:PORT", help="push every image to this registry (plain http)")
    parser.add_argument(
        "--tick", type=float, default=15.0, help="seconds between progress lines (%(default)s)"
    )
    args = parser.parse_args(argv)
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    started = time.monotonic()
    try:
        if args.version:
            if only:
                parser.error("--only and --version cannot be combined")
            artifacts = ensure_kubernetes(args.version, _say, force=args.force, tick=args.tick)
        else:
            artifacts = ensure_built(_say, force=args.force, only=only, tick=args.tick)
        if args.push:
            push_images(artifacts, args.push, _say)
    except (KubeBuildError, ImageError, MachineryError) as err:
        print(f"build-kubernetes: error: {err}", file=sys.stderr)
        if err.hint:
            print(f"build-kubernetes: hint: {err.hint}", file=sys.stderr)
        return 1
    for label, path in (
        ("bin", artifacts.bin_dir),
        ("kubectl", artifacts.kubectl),
        ("cni", artifacts.cni_dir),
    ):
        if path is not None:
            print(f"{label} {path}")
    for reference, image in artifacts.images.items():
        print(f"image {reference} {image.layout}")
    _say(f"done in {gobuild.elapsed(time.monotonic() - started)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
