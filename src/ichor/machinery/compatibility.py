"""Which Kubernetes versions Talos 1.7 runs: 1.25.0 up to (not including) 1.30.99, as Talos's
``compatibility/talos17`` says; parsed the way Talos parses them (``v`` optional, semver).

Used where a Kubernetes version enters: ``gen config``/``cluster create --kubernetes-version``, and
on the node the tags of the kubelet and control-plane images of an applied config.
"""

from __future__ import annotations

import re

from ichor.machinery import TALOS_VERSION

__all__ = ["KubernetesVersionError", "check_kubernetes_version", "kubernetes_version_of_image"]

MINIMUM = (1, 25, 0)
MAXIMUM = (1, 30, 99)
"""Not included: 1.30.99 itself is "too new", as in Talos."""

_SEMVER = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)(?:\.(0|[1-9]\d*))?(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$"
)


class KubernetesVersionError(ValueError):
    """A Kubernetes version that is not one or that Talos 1.7 does not run; the text says which."""


def check_kubernetes_version(text: str) -> str:
    """``text`` without its ``v`` when Talos 1.7 runs that Kubernetes version, else the error."""
    found = _SEMVER.match(text.strip())
    if found is None:
        raise KubernetesVersionError(f"{text!r} is not a Kubernetes version (expected e.g. 1.30.3)")
    core = (int(found[1]), int(found[2]), int(found[3] or 0))
    version = text.strip().removeprefix("v")
    talos = TALOS_VERSION.removeprefix("v")
    if core < MINIMUM:
        raise KubernetesVersionError(
            f"version of Kubernetes {version} is too old to be used with Talos {talos}"
        )
    if core >= MAXIMUM:
        raise KubernetesVersionError(
            f"version of Kubernetes {version} is too new to be used with Talos {talos}"
        )
    return version


def kubernetes_version_of_image(ref: str) -> str:
    """The Kubernetes version an image's tag names (``...kubelet:v1.30.3`` -> ``1.30.3``), checked."""
    index = ref.rfind(":v")
    if index == -1:
        raise KubernetesVersionError(
            f'invalid image reference: "{ref}" (its tag must be the version, e.g. :v1.30.3)'
        )
    return check_kubernetes_version(ref[index + 2 :].split("@", 1)[0])
