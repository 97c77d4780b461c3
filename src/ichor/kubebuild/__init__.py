"""Kubernetes and its companions built here from their Go modules, packed as the images a cluster
pulls, and pushed to a cluster's own registry (the Air-gapped guide, with images built instead of
pulled).

:mod:`._components` says what is built from which module and version (kube-apiserver,
kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl v1.30.3; CoreDNS; flannel
and its CNI plugin; the CNI reference plugins; pause; and, only when asked for, another Kubernetes
version's control plane, kubelet and kube-proxy for an upgrade: :func:`ensure_kubernetes`) and writes the wrapper go.mod;
:mod:`._images` lays out each image as the upstream image is laid out; :mod:`._build` builds what
the cache lacks (:func:`ensure_built`) and pushes (:func:`push_images`). ``python -m
ichor.kubebuild`` is the command. This package imports only :mod:`ichor.machinery` and
:mod:`ichor.images`; it never starts a cluster.

::

    MachineryError
    └── KubeBuildError      a component that cannot be built, verified, packed or pushed
"""

from __future__ import annotations

from ichor.kubebuild._build import (
    KubernetesArtifacts,
    artifacts_root,
    ensure_built,
    ensure_kubernetes,
    push_images,
    verify,
)
from ichor.kubebuild._components import (
    COMPONENTS,
    KUBERNETES_RELEASES,
    UPGRADE_BINARIES,
    Binary,
    Component,
    kubernetes_component,
    parse_replaces,
    tools_go,
    wrapper_go_mod,
)
from ichor.kubebuild._errors import KubeBuildError
from ichor.kubebuild._images import IMAGES, ImageRecipe, assemble_rootfs, kubernetes_images

__all__ = [
    "COMPONENTS",
    "IMAGES",
    "KUBERNETES_RELEASES",
    "UPGRADE_BINARIES",
    "Binary",
    "Component",
    "ImageRecipe",
    "KubeBuildError",
    "KubernetesArtifacts",
    "artifacts_root",
    "assemble_rootfs",
    "ensure_built",
    "ensure_kubernetes",
    "kubernetes_component",
    "kubernetes_images",
    "parse_replaces",
    "push_images",
    "tools_go",
    "verify",
    "wrapper_go_mod",
]
