"""machinery/compatibility.py: the Kubernetes versions Talos 1.7 runs, in Talos's words."""

from __future__ import annotations

import pytest

from ichor.machinery.compatibility import (
    KubernetesVersionError,
    check_kubernetes_version,
    kubernetes_version_of_image,
)


@pytest.mark.parametrize(
    ("text", "version"),
    [("1.30.3", "1.30.3"), ("v1.30.3", "1.30.3"), ("1.25.0", "1.25.0"), ("1.30.98", "1.30.98"), ("1.29", "1.29"),
     ("1.30.0-rc.1", "1.30.0-rc.1")],
)  # fmt: skip
def test_versions_talos_17_runs(text: str, version: str) -> None:
    assert check_kubernetes_version(text) == version


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.24.17", "version of Kubernetes 1.24.17 is too old to be used with Talos 1.7.6"),
        ("1.30.99", "version of Kubernetes 1.30.99 is too new to be used with Talos 1.7.6"),
        ("v1.31.0", "version of Kubernetes 1.31.0 is too new to be used with Talos 1.7.6"),
        ("banana", "'banana' is not a Kubernetes version (expected e.g. 1.30.3)"),
        ("1.30.03", "'1.30.03' is not a Kubernetes version (expected e.g. 1.30.3)"),
        ("", "'' is not a Kubernetes version (expected e.g. 1.30.3)"),
    ],
)
def test_versions_it_does_not_are_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(KubernetesVersionError) as refused:
        check_kubernetes_version(text)
    assert str(refused.value) == message


def test_an_images_tag_is_its_version() -> None:
    assert kubernetes_version_of_image("ghcr.io/siderolabs/kubelet:v1.30.3") == "1.30.3"
    assert kubernetes_version_of_image("127.0.0.1:5000/kubelet:v1.29.1@sha256:abcd") == "1.29.1"
    with pytest.raises(KubernetesVersionError, match="invalid image reference"):
        kubernetes_version_of_image("127.0.0.1:5000/kubelet")
