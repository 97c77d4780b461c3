"""The ``talosctl cluster create`` flags of Talos 1.7 that Ichor does not take, each with why.

Talos 1.7.6's ``cmd/talosctl/cmd/mgmt/cluster/create.go`` is the list. A flag here is refused before
anything starts, naming it and the reason (``error: --with-kubespan is not supported ...``); a few are
accepted when their value is what Ichor does anyway (``--ipv4``, ``--ipv6=false``, ``--arch`` of this
machine). The QEMU flags of :data:`QEMU_TAKES` pass with ``--provisioner qemu`` only. ``--masters`` is Talos's deprecated alias of ``--controlplanes``: it works and prints cobra's
deprecation notice.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass

from ichor.machinery.errors import MachineryError

__all__ = [
    "MASTERS_DEPRECATED",
    "QEMU_TAKES",
    "UNSUPPORTED",
    "Unsupported",
    "refuse_unsupported",
    "refused_help",
]

MASTERS_DEPRECATED = "Flag --masters has been deprecated, use --controlplanes instead"
"""What cobra prints (to stderr) when a deprecated flag is used (pflag's ``Deprecated``)."""

_VM = "Talos's QEMU provisioner's, which Ichor's (--provisioner qemu) does not take"
_VM_NODES = (
    "Talos's QEMU provisioner's: container and process nodes are processes on this machine's kernel; "
    "VM nodes take it (--provisioner qemu)"
)
QEMU_TAKES = frozenset({
    "vmlinuz-path", "initrd-path", "iso-path", "extra-boot-kernel-args", "with-apply-config", "with-uefi",
    "with-bootloader", "disk", "extra-disks", "extra-disks-size",
})  # fmt: skip
"""Talos's QEMU flags Ichor takes with ``--provisioner qemu`` (refused, with why, for the others)."""
_PORTS = (
    "Talos's docker provisioner's port mapping; Ichor maps no ports: each node's address on the cluster "
    "bridge (--cidr) is reachable from this machine as it is"
)
_DISKS = "container nodes have no disks or partitions: their STATE, EPHEMERAL and /var are directories"
_WIREGUARD = (
    "it needs WireGuard links, which the shared host kernel container nodes run on cannot create "
    "(ARCHITECTURE.md: WireGuard is not yet tested end to end)"
)


def _arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


@dataclass(frozen=True)
class Unsupported:
    why: str
    takes_value: bool = False
    """Whether ``--flag value`` (space-separated) consumes the next argument (a bool flag does not)."""
    accept: Callable[[str], bool] | None = None
    """Values accepted because they are what Ichor does anyway (``"true"`` for a bare bool flag)."""


def _is(*values: str) -> Callable[[str], bool]:
    return lambda value: value.lower() in values


UNSUPPORTED: dict[str, Unsupported] = {
    # QEMU only in Talos
    **{
        name: Unsupported(_VM, takes_value=True)
        for name in (
            "disk-image-path",
            "ipxe-boot-script",
            "extra-uefi-search-paths",
            "cni-bin-path",
            "cni-conf-dir",
            "cni-cache-dir",
            "cni-bundle-url",
            "control-plane-port",
            "with-network-jitter",
            "with-network-latency",
            "with-network-packet-loss",
            "with-network-packet-reorder",
            "with-network-packet-corrupt",
            "with-network-bandwidth",
            "with-firewall",
            "with-siderolink",
        )
    },
    **{
        name: Unsupported(_VM)
        for name in (
            "with-tpm2",
            "bad-rtc",
            "disable-dhcp-hostname",
            "with-network-chaos",
            "with-uuid-hostnames",
        )
    },
    **{
        name: Unsupported(_VM_NODES, takes_value=True)
        for name in ("vmlinuz-path", "iso-path", "initrd-path", "extra-boot-kernel-args")
    },
    **{name: Unsupported(_VM_NODES) for name in ("with-apply-config", "with-uefi")},
    "with-bootloader": Unsupported(
        "a container node boots machined directly, with no bootloader; VM nodes take it (--provisioner qemu)"
    ),
    "ipv6": Unsupported(
        "Talos's QEMU provisioner only; Ichor's cluster network is IPv4", accept=_is("false", "0", "f")
    ),
    "ipv4": Unsupported(
        "Ichor's cluster network is IPv4 only (--ipv4=false leaves no network)", accept=_is("true", "1", "t")
    ),
    "wireguard-cidr": Unsupported(_WIREGUARD, takes_value=True),
    "with-kubespan": Unsupported("KubeSpan: " + _WIREGUARD),
    # disks
    **{
        name: Unsupported(_DISKS + "; VM nodes have disks (--provisioner qemu)", takes_value=True)
        for name in ("disk", "extra-disks", "extra-disks-size")
    },
    "user-disk": Unsupported(_DISKS, takes_value=True),
    "disk-preallocate": Unsupported(_DISKS),
    "encrypt-state": Unsupported(_DISKS + ", so there is no partition to encrypt"),
    "encrypt-ephemeral": Unsupported(_DISKS + ", so there is no partition to encrypt"),
    "disk-encryption-key-types": Unsupported(
        _DISKS + ", so there is no partition to encrypt", takes_value=True
    ),
    # docker only in Talos
    "image": Unsupported(
        "Ichor's container nodes run this installation's machined, not a Talos container image",
        takes_value=True,
    ),
    "exposed-ports": Unsupported(_PORTS, takes_value=True),
    "docker-host-ip": Unsupported(_PORTS, takes_value=True),
    "docker-disable-ipv6": Unsupported(
        "Ichor's container nodes have no IPv6 to disable (the cluster network is IPv4)"
    ),
    # others
    "arch": Unsupported(
        f"the nodes run on this machine's kernel and Python, so their architecture is this machine's ({_arch()})",
        takes_value=True,
        accept=lambda value: value == _arch(),
    ),
    "with-init-node": Unsupported(
        "init nodes are deprecated since Talos 0.13 (an init node bootstraps itself); create bootstraps the first "
        "control plane with `talosctl bootstrap`, as Talos's create does by default"
    ),
    "skip-injecting-config": Unsupported(
        "container nodes boot with their config as Talos's docker nodes do; to have the configs written, "
        "use `talosctl gen config` (and --input-dir to boot a cluster from them)"
    ),
    "crashdump": Unsupported(
        "a failed create keeps every node's log in the state directory (<state>/<name>/<node>.log) and says "
        "where; `talosctl support` collects a bundle from a running node"
    ),
}
"""Talos 1.7.6's ``cluster create`` flags Ichor refuses (by name, without ``--``)."""

_SHORT = {"-p": "exposed-ports"}


def _asks_qemu(args: list[str]) -> bool:
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--provisioner=qemu" or (arg == "--provisioner" and args[i + 1 : i + 2] == ["qemu"]):
            return True
    return False


def refuse_unsupported(args: list[str]) -> list[str]:
    """``args`` without the flags of :data:`UNSUPPORTED` whose value Ichor accepts (it does that
    anyway); the first other one is refused, naming it and why. With ``--provisioner qemu`` the
    flags of :data:`QEMU_TAKES` are kept."""
    qemu = _asks_qemu(args)
    kept: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return kept + args[i:]
        name, eq, value = arg.partition("=")
        key = _SHORT.get(name) or (name[2:] if name.startswith("--") else "")
        entry = UNSUPPORTED.get(key)
        if entry is None or (qemu and key in QEMU_TAKES):
            kept.append(arg)
            i += 1
            continue
        if not eq:
            if entry.takes_value and i + 1 < len(args):
                i += 1
                value = args[i]
            elif not entry.takes_value:
                value = "true"
        if entry.accept is None or not entry.accept(value):
            raise MachineryError(
                f"--{key} is not supported by Ichor's cluster create: {entry.why}",
                hint="leave it out; `talosctl cluster create --help` lists the flags Ichor takes",
            )
        i += 1
    return kept


def refused_help() -> str:
    """The help epilog naming every refused flag, as a paragraph click does not rewrap (``\\b``)."""
    import textwrap

    refused = ", ".join(f"--{n}" for n in sorted(UNSUPPORTED) if n not in QEMU_TAKES)
    vm = ", ".join(f"--{n}" for n in sorted(QEMU_TAKES))
    text = f"Talos 1.7 flags Ichor refuses, saying why: {refused}. Only with --provisioner qemu: {vm}."
    return "\b\n" + textwrap.fill(text, width=78, break_on_hyphens=False, break_long_words=False)
