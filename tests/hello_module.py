"""The Proprietary Kernel Modules procedure's module (seed 001:729-781), as Ichor builds one: a tiny
out-of-tree module with a parameter, compiled here from source against Debian's
``linux-headers-<the image's kernel release>`` (``scripts/os-packages.txt``) and packed as a system
extension (``manifest.yaml`` + ``rootfs/lib/modules/<release>/extras/hello.ko``) for the imager's
``--system-extension-image``.

The module says ``hello: hello, <greeting>`` when loaded; ``greeting`` is readable under
``/sys/module/hello/parameters``. Its licence is "Proprietary", so loading it taints the kernel,
as the procedure's modules do.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ichor.machinery import proc

__all__ = ["HELLO_SOURCE", "build_hello_extension", "headers_dir", "hello_skip_reason"]

HELLO_SOURCE = r"""
#include <linux/module.h>
#include <linux/moduleparam.h>

static char *greeting = "world";
module_param(greeting, charp, 0444);
MODULE_PARM_DESC(greeting, "who the module greets");

static int __init hello_init(void)
{
	pr_info("hello: hello, %s\n", greeting);
	return 0;
}

static void __exit hello_exit(void)
{
	pr_info("hello: goodbye, %s\n", greeting);
}

module_init(hello_init);
module_exit(hello_exit);
MODULE_LICENSE("Proprietary");
MODULE_DESCRIPTION("Ichor's out-of-tree test module");
"""


def headers_dir(kernel_release: str) -> Path:
    """Where Debian's ``linux-headers-<release>`` puts the kbuild tree."""
    return Path("/usr/src") / f"linux-headers-{kernel_release}"


def hello_skip_reason(kernel_release: str) -> str | None:
    """Why the module cannot be built here, or None."""
    if not (headers_dir(kernel_release) / "Makefile").is_file():
        return f"needs linux-headers-{kernel_release} (scripts/os-packages.txt; run.sh installs it)"
    missing = next((tool for tool in ("make", "gcc") if shutil.which(tool) is None), None)
    return f"needs {missing} to build a kernel module" if missing else None


def build_hello_extension(where: Path, kernel_release: str, *, name: str = "ichor-hello-module") -> Path:
    """Compile ``hello.ko`` for ``kernel_release`` and lay it out as extension ``name`` under
    ``where``; returns the extension's directory (``--system-extension-image`` takes it)."""
    source = where / "hello-src"
    source.mkdir(parents=True)
    (source / "hello.c").write_text(HELLO_SOURCE)
    (source / "Kbuild").write_text("obj-m := hello.o\n")
    proc.run(
        ["make", "-s", "-C", str(headers_dir(kernel_release)), f"M={source}", "modules"],
        timeout=300, hint=f"install linux-headers-{kernel_release}",
    )  # fmt: skip
    extension = where / name
    extras = extension / "rootfs/lib/modules" / kernel_release / "extras"
    extras.mkdir(parents=True)
    shutil.copyfile(source / "hello.ko", extras / "hello.ko")
    (extension / "manifest.yaml").write_text(
        f"version: v1alpha1\nmetadata:\n  name: {name}\n  version: 1.0.0\n  author: Ichor tests\n"
        "  description: an out-of-tree kernel module built from source (Proprietary Kernel Modules)\n"
        '  compatibility:\n    talos:\n      version: ">= v1.7.0"\n'
    )
    return extension
