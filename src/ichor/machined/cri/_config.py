"""The two containerd instances of a Talos node, as Talos 1.7 lays them out on disk.

* **system containerd** (service ``containerd``): namespace ``system``, socket
  ``/system/run/containerd/containerd.sock``, state ``/system/run/containerd``, root
  ``/system/var/lib/containerd``, config ``/etc/containerd/config.toml`` (its CRI plugin disabled);
* **CRI containerd** (service ``cri``): namespace ``k8s.io``, socket ``/run/containerd/containerd.sock``,
  config ``/etc/cri/containerd.toml``, which imports ``/etc/cri/conf.d/cri.toml``: the deep merge
  of ``/etc/cri/conf.d/*.part`` in name order (``00-base.part`` written here,
  ``01-registries.part`` by the registry controller, ``20-customization.part`` from
  ``machine.files``). Registry hosts live in ``/etc/cri/conf.d/hosts/<host>/hosts.toml``.

What differs from Talos, and why: this host gives no ``CAP_SYS_RESOURCE`` (a negative
``oom_score_adj`` is refused, so ``restrict_oom_score_adj = true``), and its cgroups are v1, so
runc uses the cgroupfs driver (``SystemdCgroup = false``).

This module renders text and merges parts; it never starts anything.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ichor.machined.cri import _toml
from ichor.machined.cri._errors import CRIConfigError
from ichor.machinery.constants import PAUSE_IMAGE, PAUSE_VERSION

__all__ = [
    "CRI",
    "CRI_BASE_PART",
    "CRI_CONFD",
    "CRI_HOSTS_DIR",
    "CRI_MERGED_CONFIG",
    "CRI_REGISTRIES_PART",
    "SYSTEM",
    "Instance",
    "cri_base_part",
    "cri_config",
    "merge_parts",
    "system_config",
]

CRI_CONFD = "/etc/cri/conf.d"
CRI_MERGED_CONFIG = f"{CRI_CONFD}/cri.toml"
CRI_HOSTS_DIR = f"{CRI_CONFD}/hosts"
CRI_BASE_PART = "00-base.part"
CRI_REGISTRIES_PART = "01-registries.part"
_CRI_PLUGIN = "io.containerd.grpc.v1.cri"


@dataclass(frozen=True)
class Instance:
    """One containerd: the service that runs it, its namespace, socket and directories (Talos paths)."""

    service: str
    namespace: str
    """The containerd namespace Talos uses in it (``talosctl image ls --namespace`` maps onto it)."""
    address: str
    config: str
    state: str
    root: str

    def args(self, binary: str, resolve: Any) -> list[str]:
        """containerd's command line, each Talos path mapped through ``resolve`` (``Layout.path``)."""
        return [
            binary, "--address", str(resolve(self.address)), "--config", str(resolve(self.config)),
            "--state", str(resolve(self.state)), "--root", str(resolve(self.root)),
        ]  # fmt: skip


SYSTEM = Instance(
    service="containerd", namespace="system", address="/system/run/containerd/containerd.sock",
    config="/etc/containerd/config.toml", state="/system/run/containerd", root="/system/var/lib/containerd",
)  # fmt: skip
CRI = Instance(
    service="cri", namespace="k8s.io", address="/run/containerd/containerd.sock",
    config="/etc/cri/containerd.toml", state="/run/containerd", root="/var/lib/containerd",
)  # fmt: skip


def system_config() -> str:
    """``/etc/containerd/config.toml``: the system containerd runs no CRI."""
    return _toml.dumps({"version": 2, "disabled_plugins": [_CRI_PLUGIN]})


def cri_config() -> str:
    """``/etc/cri/containerd.toml``: everything else comes from the merged parts."""
    return _toml.dumps({"version": 2, "imports": [CRI_MERGED_CONFIG]})


def cri_base_part() -> str:
    """``00-base.part``: the CRI plugin's settings every Talos node has (see the module doc)."""
    cri: dict[str, Any] = {
        # containerd 1.7 (Talos 1.7's) defaults to pause 3.8; Debian's 1.6 would ask for 3.6.
        "sandbox_image": f"{PAUSE_IMAGE}:{PAUSE_VERSION}",
        "restrict_oom_score_adj": True,
        "enable_unprivileged_ports": True,
        "enable_unprivileged_icmp": True,
        "containerd": {
            "discard_unpacked_layers": True,
            "runtimes": {
                "runc": {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": False}}
            },
        },
        "registry": {"config_path": CRI_HOSTS_DIR},
    }
    return _toml.dumps({"version": 2, "plugins": {_CRI_PLUGIN: cri}})


def merge_parts(confd: Path) -> str:
    """The deep merge of ``confd/*.part`` in name order (later parts win), as ``cri.toml``'s text.

    A part that is not TOML is refused by name: containerd would otherwise fail to start with an
    error that does not say which file is wrong."""
    merged: dict[str, Any] = {}
    for part in sorted(confd.glob("*.part")):
        try:
            merged = _toml.merge(merged, tomllib.loads(part.read_text()))
        except tomllib.TOMLDecodeError as err:
            raise CRIConfigError(
                f"{CRI_CONFD}/{part.name} is not valid TOML: {err}",
                hint="fix or remove the file (machine.files entries ending in .part under /etc/cri/conf.d)",
            ) from err
    return _toml.dumps(merged)
