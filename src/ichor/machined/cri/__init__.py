"""The node's two containerd instances (system and CRI): their configuration files as Talos 1.7
lays them out, registry mirrors as ``hosts.toml``, and a client over ``ctr``.

Exceptions::

    CRIError                        anything here; carries an optional ``hint``
    ├── CRIConfigError              a configuration that cannot be rendered (names the config key)
    ├── PullAttemptError            one ``ctr images pull`` that failed (its whole output)
    ├── ImagePullError              a pull given up: names each mirror asked and its answer
    └── ContainerdUnavailableError  containerd does not answer on its socket

It renders files and talks to a running containerd; the services that run containerd are
:mod:`ichor.machined.services.containerd`.
"""

from __future__ import annotations

from ichor.machined.cri._config import (
    CRI,
    CRI_BASE_PART,
    CRI_CONFD,
    CRI_HOSTS_DIR,
    CRI_MERGED_CONFIG,
    CRI_REGISTRIES_PART,
    SYSTEM,
    Instance,
    cri_base_part,
    cri_config,
    merge_parts,
    system_config,
)
from ichor.machined.cri._ctr import TASK_LOG_DIR, Container, Ctr, Image, TaskMetrics, parse_metrics
from ichor.machined.cri._errors import ContainerdUnavailableError, CRIConfigError, CRIError
from ichor.machined.cri._hosts import HostFiles, host_directory, render_registries
from ichor.machined.cri._pods import (
    CRI_STATUS_DIR,
    PodContainer,
    display_id,
    find_pod_container,
    parse_display,
    pod_container,
    pod_containers,
)
from ichor.machined.cri._pull import (
    PULL_TIMEOUT,
    ImagePullError,
    PullAttemptError,
    mirrors_for,
    pull_with_retry,
    registry_of,
)

__all__ = [
    "CRI",
    "CRI_BASE_PART",
    "CRI_CONFD",
    "CRI_HOSTS_DIR",
    "CRI_MERGED_CONFIG",
    "CRI_REGISTRIES_PART",
    "CRI_STATUS_DIR",
    "PULL_TIMEOUT",
    "SYSTEM",
    "TASK_LOG_DIR",
    "CRIConfigError",
    "CRIError",
    "Container",
    "ContainerdUnavailableError",
    "Ctr",
    "HostFiles",
    "Image",
    "ImagePullError",
    "Instance",
    "PodContainer",
    "PullAttemptError",
    "TaskMetrics",
    "cri_base_part",
    "cri_config",
    "display_id",
    "find_pod_container",
    "host_directory",
    "merge_parts",
    "mirrors_for",
    "parse_display",
    "parse_metrics",
    "pod_container",
    "pod_containers",
    "pull_with_retry",
    "registry_of",
    "render_registries",
    "system_config",
]
