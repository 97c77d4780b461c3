"""A node's ``/etc/os-release`` (Talos's): what the kubelet reads as the Node's OS image."""

from __future__ import annotations

import shlex

from ichor.machinery import TALOS_VERSION
from ichor.machinery.constants import OS_RELEASE


def _fields(text: str) -> dict[str, str]:
    """os-release parsed as the kubelet and systemd read it (shell-style quoting, one assignment a line)."""
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {key: shlex.split(value)[0] for key, value in pairs}


def test_pretty_name_is_talos_with_the_version_talosctl_version_reports() -> None:
    fields = _fields(OS_RELEASE)
    assert fields["PRETTY_NAME"] == f"Talos ({TALOS_VERSION})" == "Talos (v1.7.6)"
    assert (fields["NAME"], fields["ID"], fields["VERSION_ID"]) == ("Talos", "talos", TALOS_VERSION)
    assert fields["HOME_URL"] == "https://www.talos.dev/"
    assert fields["VENDOR_NAME"] == "Sidero Labs"
    assert OS_RELEASE.endswith("\n")
