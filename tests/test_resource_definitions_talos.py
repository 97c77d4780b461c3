"""Every resource type Ichor registers that Talos 1.7 has carries Talos's explicit aliases, print
columns and sensitivity (``tests/data/talos_resource_definitions.json``, read from Talos v1.7.6's
``ResourceDefinition()`` literals by ``scripts/gen_talos_resource_definitions.py``), so
``talosctl get <alias>`` resolves and prints as against a Talos node; and the Talos types Ichor does
not register are exactly the ones listed here, each with why (issue 25 §3)."""

from __future__ import annotations

import json
from pathlib import Path

from ichor.machined.resources import NODE_TYPES

TALOS = json.loads((Path(__file__).parent / "data" / "talos_resource_definitions.json").read_text())
TYPES = {t.type: t for t in NODE_TYPES}

DELIBERATE = {
    # `get ms` stays the machine status (MachineStatuses, ManifestStatuses, MemoryStats and
    # MountStatuses all abbreviate to ms): Ichor declares it, where Talos's client calls it ambiguous.
    ("MachineStatuses.runtime.talos.dev", "aliases"),
    # Ichor hides these from os:reader: extension config files and the bootstrap token's Secret.
    ("ExtensionServiceConfigs.runtime.talos.dev", "sensitive"),
    ("Manifests.kubernetes.talos.dev", "sensitive"),
}

NOT_ON_CONTAINER_NODES = {
    "BlockDevices.block.talos.dev": "Talos lists no devices in container mode (udev/kobject events of a machine's own)",
    "DiscoveredVolumes.block.talos.dev": "probes the block devices above: none in container mode",
    "Processors.hardware.talos.dev": "SMBIOS, which Talos skips in container mode",
    "MemoryModules.hardware.talos.dev": "SMBIOS, which Talos skips in container mode",
    "SystemInformations.hardware.talos.dev": "SMBIOS, which Talos skips in container mode",
    "AdjtimeStatuses.v1alpha1.talos.dev": "the host's clock: Talos skips it in container mode",
    "SiderolinkConfigs.siderolink.talos.dev": "Talos makes none in container mode",
    "SiderolinkTunnels.siderolink.talos.dev": "SideroLink's WireGuard tunnel: none without its config",
    "MetaLoads.runtime.talos.dev": "META is a partition of the boot disk: none in container mode",
    "UniqueMachineTokens.runtime.talos.dev": "read from META once loaded: none in container mode",
}
NOT_YET = {
    "KubeSpanEndpoints.kubespan.talos.dev": "KubeSpan's WireGuard manager is not implemented",
    "KubeSpanPeerStatuses.kubespan.talos.dev": "KubeSpan's WireGuard manager is not implemented",
    "LinkRefreshes.net.talos.dev": "KubeSpan's WireGuard link refresh signal",
    "AcquireConfigSpecs.v1alpha1.talos.dev": "written by Talos's sequencer; Ichor's config store acquires directly",
    "MaintenanceRootSecrets.secrets.talos.dev": "Ichor's maintenance API makes its own certificate",
    "MaintenanceServiceCertificates.secrets.talos.dev": "Ichor's maintenance API makes its own certificate",
}


def test_the_snapshot_is_talos_1_7s() -> None:
    assert len(TALOS) == 121
    assert TALOS["MountStatuses.runtime.talos.dev"]["aliases"] == ["mounts"]
    assert TALOS["NodeCordonedSpecs.k8s.talos.dev"]["sensitive"] is True


def test_every_talos_type_ichor_registers_has_talos_aliases_columns_and_sensitivity() -> None:
    drifted = []
    for name, talos in TALOS.items():
        rtype = TYPES.get(name)
        if rtype is None:
            continue
        mine = {
            "aliases": list(rtype.aliases),
            "columns": [[c.name, c.json_path] for c in rtype.print_columns],
            "sensitive": rtype.sensitive,
        }
        drifted += [
            f"{name} {key}: {mine[key]!r}, Talos {talos[key]!r}"
            for key in ("aliases", "columns", "sensitive")
            if mine[key] != talos[key] and (name, key) not in DELIBERATE
        ]
    assert drifted == []


def test_the_talos_types_ichor_lacks_are_the_listed_ones() -> None:
    lacking = set(TALOS) - set(TYPES)
    assert lacking == set(NOT_ON_CONTAINER_NODES) | set(NOT_YET)
    assert not set(NOT_ON_CONTAINER_NODES) & set(NOT_YET)
