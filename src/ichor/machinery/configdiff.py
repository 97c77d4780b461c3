"""What changes between two machine configs, and whether a node can take them without a reboot.

Talos 1.7 (``CanApplyImmediate``) compares only the v1alpha1 document: it ignores ``debug``, all of
``cluster``, a list of machine sections that its controllers reconfigure live, and three feature
flags; any other difference (machine type, token, files, env, disks, udev, system disk encryption,
rbac, stableHostname, ...) needs a reboot. Other document kinds never block. Beyond Talos, the
answer names every field that needs the reboot and why, so ``apply-config --dry-run`` can say it
(a top complaint: "mode reboot says applied without a reboot").

This module compares plain data; it does not load, validate or apply anything.
"""

from __future__ import annotations

__all__ = ["ImmediateCheck", "can_apply_immediately", "changed_paths", "unified_diff"]

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# machine.* sections Talos reconfigures without a reboot.
LIVE_MACHINE_SECTIONS = frozenset(
    {
        "ca",
        "acceptedCAs",
        "time",
        "certSANs",
        "install",
        "network",
        "sysfs",
        "sysctls",
        "logging",
        "controlPlane",
        "kubelet",
        "kernel",
        "registries",
        "pods",
        "seccompProfiles",
        "nodeLabels",
        "nodeTaints",
    }
)
LIVE_FEATURES = frozenset({"kubernetesTalosAPIAccess", "kubePrism", "hostDNS"})
LIVE_TOP_LEVEL = frozenset({"debug", "cluster"})


def changed_paths(old: Any, new: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths (as key tuples; list indexes as strings) where ``old`` and ``new`` differ."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        paths: list[tuple[str, ...]] = []
        for key in list(old) + [k for k in new if k not in old]:
            if key not in new or key not in old:
                paths.append((*prefix, str(key)))
            else:
                paths.extend(changed_paths(old[key], new[key], (*prefix, str(key))))
        return paths
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        paths = []
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            paths.extend(changed_paths(a, b, (*prefix, str(index))))
        return paths
    return [] if old == new else [prefix]


def _needs_reboot(path: tuple[str, ...]) -> bool:
    if not path or path[0] in LIVE_TOP_LEVEL:
        return False
    if path[0] != "machine" or len(path) == 1:
        return True
    if path[1] in LIVE_MACHINE_SECTIONS:
        return False
    return not (path[1] == "features" and len(path) > 2 and path[2] in LIVE_FEATURES)


@dataclass(frozen=True)
class ImmediateCheck:
    """Whether the change can be applied live, and which fields force a reboot."""

    changed: list[str] = field(default_factory=list)
    needs_reboot: list[str] = field(default_factory=list)

    @property
    def immediate(self) -> bool:
        return not self.needs_reboot

    def explain(self) -> str:
        if not self.changed:
            return "no changes"
        if self.immediate:
            return "every change can be applied without a reboot"
        return "these changes need a reboot: " + ", ".join(self.needs_reboot)


def can_apply_immediately(
    old_v1alpha1: Mapping[str, Any] | None, new_v1alpha1: Mapping[str, Any] | None
) -> ImmediateCheck:
    """Compare two v1alpha1 documents (plain data) with Talos's rules."""
    paths = changed_paths(old_v1alpha1 or {}, new_v1alpha1 or {})
    dotted = [".".join(p) for p in paths]
    return ImmediateCheck(
        changed=dotted,
        needs_reboot=[".".join(p) for p in paths if _needs_reboot(p)],
    )


def unified_diff(old_text: str, new_text: str) -> str:
    """A unified diff of two config texts (``--- a`` / ``+++ b``), empty when they are equal."""
    lines = difflib.unified_diff(
        old_text.splitlines(keepends=True), new_text.splitlines(keepends=True), fromfile="a", tofile="b"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
