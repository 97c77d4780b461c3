"""Kernel command lines as Talos 1.7 reads and builds them (go-procfs's ``Cmdline``), and the installer's.

A command line is an ordered list of keys, each with its values in order: ``console=ttyS0
console=tty0`` is one key with two values and prints back together where the key first appeared;
a bare ``quiet`` and ``slab_nomerge=`` are both a key with the empty value and print as the bare
key. :func:`installer_cmdline` is what the installer writes into every boot entry:
``talos.platform``, ``talos.config`` (if any), the platform's console arguments (metal amd64:
``console=ttyS0 console=tty0``), ``kernel.DefaultArgs``, then ``.machine.install.extraKernelArgs``
where ``console`` and ``talos.platform`` replace the earlier values and a leading ``-`` drops an
argument: ``-console`` every console, ``-console=ttyS0`` just that one (seed 002:670).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_ARGS",
    "PLATFORM_CONSOLE_ARGS",
    "Cmdline",
    "installer_cmdline",
]

DEFAULT_ARGS: tuple[str, ...] = (
    "init_on_alloc=1",
    "slab_nomerge=",
    "pti=on",
    "consoleblank=0",
    "nvme_core.io_timeout=4294967295",
    "printk.devkmsg=on",
    "ima_template=ima-ng",
    "ima_appraise=fix",
    "ima_hash=sha512",
)
"""Talos 1.7's ``kernel.DefaultArgs``."""

PLATFORM_CONSOLE_ARGS: dict[tuple[str, str], tuple[str, ...]] = {
    ("metal", "amd64"): ("console=ttyS0", "console=tty0"),
    ("metal", "arm64"): ("console=ttyAMA0", "console=tty0"),
}
"""The console arguments a platform adds (``Platform.KernelArgs``), by (platform, arch)."""


@dataclass
class Cmdline:
    """An ordered multi-map of kernel parameters; ``str()`` is the command line."""

    params: list[tuple[str, list[str]]] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> Cmdline:
        cmdline = cls()
        for key, value in _fields(text):
            cmdline.append(key, value)
        return cmdline

    def _find(self, key: str) -> int | None:
        return next((i for i, (k, _) in enumerate(self.params) if k == key), None)

    def get(self, key: str) -> list[str] | None:
        """The values of ``key`` (``[""]`` for a bare flag), None when absent."""
        i = self._find(key)
        return None if i is None else list(self.params[i][1])

    def first(self, key: str) -> str | None:
        values = self.get(key)
        return values[0] if values else None

    def append(self, key: str, value: str) -> None:
        """Add a value to ``key`` (creating it at the end when new)."""
        i = self._find(key)
        if i is None:
            self.params.append((key, [value]))
        else:
            self.params[i][1].append(value)

    def set(self, key: str, values: Sequence[str]) -> None:
        """Replace ``key``'s values where it stands (or add it at the end)."""
        i = self._find(key)
        if i is None:
            self.params.append((key, list(values)))
        else:
            self.params[i] = (key, list(values))

    def set_all(self, args: Iterable[str]) -> None:
        """Talos's ``SetAll``: each key of ``args`` replaces the same key here."""
        for key, values in _grouped(args):
            self.set(key, values)

    def delete(self, key: str, values: Sequence[str] | None = None) -> None:
        """Remove a key entirely, or only the given values of it."""
        i = self._find(key)
        if i is None:
            return
        if values is None:
            del self.params[i]
        else:
            self.params[i] = (key, [v for v in self.params[i][1] if v not in values])

    def append_all(
        self, args: Iterable[str], *, overwrite: Sequence[str] = (), delete_negated: bool = False
    ) -> None:
        """Talos's ``AppendAll``: append each arg; keys in ``overwrite`` replace; ``-key`` drops."""
        for key, values in _grouped(args):
            if delete_negated and len(key) > 1 and key.startswith("-"):
                if values[0] == "":
                    self.delete(key[1:])
                else:
                    self.delete(key[1:], values)
                continue
            if key in overwrite:
                self.set(key, values)
                continue
            for value in values:
                self.append(key, value)

    def args(self) -> list[str]:
        return [key if value == "" else f"{key}={value}" for key, values in self.params for value in values]

    def __str__(self) -> str:
        return " ".join(self.args())


def _fields(text: str) -> list[tuple[str, str]]:
    out = []
    for arg in text.removesuffix("\n").split():
        key, _, value = arg.partition("=")
        out.append((key, value))
    return out


def _grouped(args: Iterable[str]) -> list[tuple[str, list[str]]]:
    """Args grouped by key in first-seen order (how go-procfs parses a joined list)."""
    grouped = Cmdline.parse(" ".join(args))
    return [(key, list(values)) for key, values in grouped.params]


def installer_cmdline(
    *,
    platform: str = "metal",
    arch: str = "amd64",
    config_url: str | None = None,
    extra_args: Sequence[str] = (),
    board_args: Sequence[str] = (),
    environment: Sequence[str] = (),
) -> Cmdline:
    """The command line Talos 1.7's installer writes for every boot entry (``install.go``).

    ``environment`` values become ``talos.environment=`` arguments before the extra ones: how
    Talos's imager passes ``INSTALLER_META_BASE64=...`` in outputs with no META (``out.go``)."""
    cmdline = Cmdline()
    cmdline.append("talos.platform", platform)
    if config_url:
        cmdline.append("talos.config", config_url)
    cmdline.set_all(PLATFORM_CONSOLE_ARGS.get((platform, arch), ()))
    cmdline.append_all(DEFAULT_ARGS)
    cmdline.set_all(board_args)
    for value in environment:
        cmdline.append("talos.environment", value)
    cmdline.append_all(extra_args, overwrite=("console", "talos.platform"), delete_negated=True)
    return cmdline
