"""``python -m ichor.imager <profile> [--output DIR] [--extra-kernel-arg ARG]... [--meta K=V]...``: build an OS artefact.

Profiles (Talos's names): ``kernel`` -> ``vmlinuz-amd64``, ``initramfs`` -> ``initramfs-amd64.xz``,
``cmdline`` -> ``cmdline-amd64`` (the kernel command line a bootloader passes, with the extra
arguments applied), ``iso`` -> ``metal-amd64.iso`` (boots under UEFI and BIOS), ``metal`` ->
``metal-amd64.raw.xz`` (an installed disk; ``--out-format raw`` leaves it uncompressed),
``installer`` -> ``installer-amd64.tar`` (an OCI image archive for install and upgrade; ``--push
REGISTRY/REPOSITORY:TAG`` copies it to a registry with skopeo; ``--version`` labels it and titles the
boot entries, default Talos's). Customisation (every output but
``cmdline``): ``--system-extension-image`` (repeatable; Talos's extension rules, one layer each,
``/etc/extensions.yaml``, extension kernel modules indexed with the kernel's), ``--rootfs-overlay
DIR`` (a top layer), ``--rm PATH`` (repeatable), ``--kernel-path VMLINUZ --modules-dir DIR`` (a
kernel built elsewhere). ``--meta``
values go into META (``metal``) or onto the command line as
``talos.environment=INSTALLER_META_BASE64=...`` (the others), as Talos's imager does. File times in
``iso`` and ``metal`` are ``SOURCE_DATE_EPOCH`` (default 2024-01-01). Progress goes to stderr; the
artefact's sha256 and path to stdout (``sha256sum`` format). Exit code 1 with ``error:``/``hint:``
on a bad input or output.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

from ichor.imager import ImagerError, InputError
from ichor.imager._build import DEFAULT_EPOCH, BuildOptions, OutFormat, Profile, build, default_cache
from ichor.imager._installer_image import open_installer_archive
from ichor.images import DOCKER_HUB, Reference, parse_reference, push
from ichor.machinery import TALOS_VERSION
from ichor.machinery.errors import MachineryError
from ichor.machinery.imageversion import is_version
from ichor.machinery.meta import MetaValue


def _meta(text: str) -> MetaValue:
    try:
        return MetaValue.parse(text)
    except MachineryError as err:
        raise InputError(
            f"--meta {text!r}: {err}", hint="pass --meta KEY=VALUE, KEY a number 0-255 (0xa=...)"
        ) from None


def _version(text: str) -> str:
    if not is_version(text):
        raise InputError(
            f"--version {text!r} is not a version tag",
            hint="pass --version as a tag such as v1.7.7-ichor.2 (letters, digits, .+_-, at most 64 characters)",
        )
    return text


def _epoch() -> int:
    text = os.environ.get("SOURCE_DATE_EPOCH", "")
    if not text:
        return DEFAULT_EPOCH
    if not text.isdigit():
        raise InputError(
            f"SOURCE_DATE_EPOCH={text!r} is not a number of seconds", hint="unset it or give seconds"
        )
    return int(text)


def _push_target(text: str | None, profile: Profile) -> Reference | None:
    if text is None:
        return None
    if profile is not Profile.INSTALLER:
        raise InputError(f"--push applies to the installer profile, not {profile}", hint="drop --push")
    reference = parse_reference(text, what="--push")
    if reference.registry == DOCKER_HUB:
        raise InputError(
            f"--push {text!r} names no registry",
            hint="name it: --push 10.5.0.1:5000/siderolabs/installer:TAG",
        )
    return reference


def push_installer(archive: Path, reference: Reference) -> None:
    """Copy the installer archive to ``reference``'s registry with :func:`ichor.images.push`."""
    with tempfile.TemporaryDirectory(prefix="ichor-installer-push-") as work:
        image = open_installer_archive(archive, Path(work) / "layout")
        push(image, reference.registry, reference)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ichor.imager", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("profile", type=Profile, choices=list(Profile), help="what to build")
    parser.add_argument("--output", type=Path, default=Path("_out"), help="output directory (default _out)")
    parser.add_argument(
        "--extra-kernel-arg", action="append", default=[], metavar="ARG",
        help="an extra kernel argument (repeatable); -ARG drops ARG from the defaults (Talos's rule)",
    )  # fmt: skip
    parser.add_argument(
        "--meta", action="append", default=[], metavar="KEY=VALUE",
        help="a META value (repeatable): into META for metal, else talos.environment=INSTALLER_META_BASE64",
    )  # fmt: skip
    parser.add_argument(
        "--out-format", type=OutFormat, choices=list(OutFormat), default=OutFormat.XZ,
        help="the metal image's format: xz (default, metal-amd64.raw.xz) or raw (metal-amd64.raw)",
    )  # fmt: skip
    parser.add_argument(
        "--push", metavar="REGISTRY/REPOSITORY:TAG",
        help="installer only: push the built image there (e.g. 10.5.0.1:5000/siderolabs/installer:v1.7.6)",
    )  # fmt: skip
    parser.add_argument(
        "--system-extension-image", action="append", default=[], metavar="DIR|oci:LAYOUT[:TAG]|oci-archive:FILE|REGISTRY/REPO:TAG",
        help="a system extension (repeatable): each its own layer over the base, in the order given",
    )  # fmt: skip
    parser.add_argument(
        "--rootfs-overlay", type=Path, metavar="DIR",
        help="DIR's files in a layer on top of the root filesystem (DIR/etc/x becomes /etc/x)",
    )  # fmt: skip
    parser.add_argument(
        "--rm", action="append", default=[], metavar="PATH",
        help="remove PATH from the root filesystem (repeatable; rm -rf in the layers the imager builds)",
    )  # fmt: skip
    parser.add_argument("--kernel-path", type=Path, metavar="VMLINUZ",
                        help="a kernel built elsewhere in place of Debian's (with --modules-dir)")  # fmt: skip
    parser.add_argument("--modules-dir", type=Path, metavar="DIR",
                        help="that kernel's modules (/lib/modules/<release>); their release must be the kernel's")  # fmt: skip
    parser.add_argument(
        "--version", default=TALOS_VERSION,
        help=f"the version boot entries and the installer image carry (default {TALOS_VERSION})",
    )  # fmt: skip
    parser.add_argument("--cache-dir", type=Path, default=default_cache(), help=argparse.SUPPRESS)
    parser.add_argument("--debug", action="store_true", help="log every command the imager runs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.debug else logging.WARNING, stream=sys.stderr,
                        format="%(name)s: %(message)s")  # fmt: skip

    def say(line: str) -> None:
        print(f"imager: {line}", file=sys.stderr, flush=True)

    try:
        options = BuildOptions(
            output=args.output, cache=args.cache_dir, extra_kernel_args=tuple(args.extra_kernel_arg),
            meta=tuple(_meta(m) for m in args.meta), out_format=args.out_format, epoch=_epoch(), say=say,
            system_extension_images=tuple(args.system_extension_image), rootfs_overlay=args.rootfs_overlay,
            remove=tuple(args.rm), kernel_path=args.kernel_path, modules_dir=args.modules_dir,
            version=_version(args.version),
        )  # fmt: skip
        push_to = _push_target(args.push, args.profile)
        artefact = build(args.profile, options)
        if push_to is not None:
            say(f"pushing {artefact.path.name} to {push_to}")
            push_installer(artefact.path, push_to)
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
