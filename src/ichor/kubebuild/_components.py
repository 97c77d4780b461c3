"""What is built, from which Go module at which version, and how each binary proves its version.

Every Go component is built from a wrapper module of our own (``ichor.local/build/<name>``) that
requires the component's module at its release tag; :func:`wrapper_go_mod` writes it. A ``replace``
in the component's own go.mod does not apply to a dependent, so the wrapper carries them over:
a replacement by another module version is copied, and a replacement by a local directory is the
Kubernetes staging convention (``k8s.io/api => ./staging/src/k8s.io/api``, published as
``k8s.io/api v0.30.3`` for ``k8s.io/kubernetes v1.30.3``), so it becomes that published version.

Versions that the Go module proxy here does not serve (found on this machine kind, 2026-11):
flannel v0.25.3 (403 "not available"; v0.25.6 and v0.25.7 are served, so flannel lists fallbacks of
the same minor, and the image keeps the tag Talos's manifest asks for with the built version in its
labels) and every version of ``github.com/flannel-io/cni-plugin``; the flannel CNI plugin is built
from ``github.com/containernetworking/plugins`` v0.9.1's ``plugins/meta/flannel``, the same plugin
before it moved to its own repository. CoreDNS v1.11.1 needs Go 1.21 (its quic-go v0.37.4 refuses to
build with Go 1.22 or newer), which ``GOTOOLCHAIN`` fetches through the module proxy.
"""

from __future__ import annotations

__all__ = [
    "COMPONENTS",
    "KUBERNETES_RELEASES",
    "UPGRADE_BINARIES",
    "Binary",
    "Component",
    "kubernetes_component",
    "kubernetes_version_tag",
    "parse_replaces",
    "wrapper_go_mod",
]

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ichor.kubebuild._errors import KubeBuildError
from ichor.machinery.constants import (
    COREDNS_VERSION,
    DEFAULT_KUBERNETES_VERSION,
    FLANNEL_VERSION,
    PAUSE_VERSION,
)

KUBERNETES_VERSION = f"v{DEFAULT_KUBERNETES_VERSION}"
# Facts of each release tag (commit, build date), stamped into the binaries as Kubernetes's own
# build does. v1.30.3 is the cluster's version; the others are built only when asked for (an
# ``upgrade-k8s`` needs a second version): v1.30.2 shares every third-party module version with
# v1.30.3, so the Go build cache keeps all of them and only Kubernetes's own packages recompile.
KUBERNETES_RELEASES: Mapping[str, tuple[str, str]] = {
    "v1.30.3": ("6fc0a69044f1ac4c13841ec4391224a2df241460", "2024-07-16T00:00:00Z"),
    "v1.30.2": ("39683505b630ff2121012f3c5b16215a1449d5ed", "2024-06-11T20:27:59Z"),
}
UPGRADE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy")
"""What another Kubernetes version needs for an upgrade: the control plane, the kubelet and kube-proxy
(kubectl, CoreDNS, flannel and pause stay the cluster's)."""
CNI_PLUGINS_VERSION = "v1.4.1"
FLANNEL_CNI_VERSION = "v0.9.1"


@dataclass(frozen=True)
class Binary:
    """One program: its main package, and the command whose output must show ``expect``."""

    name: str
    package: str
    version_args: tuple[str, ...]
    expect: str
    version_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Component:
    """One cached build: a Go module at a version (or the C pause program) and its binaries."""

    name: str
    module: str
    versions: tuple[str, ...]
    """The version to build first, then same-minor fallbacks tried when the proxy does not serve it."""
    binaries: tuple[Binary, ...]
    ldflags: tuple[str, ...] = ("-s", "-w")
    toolchain: str | None = None
    """``GOTOOLCHAIN`` when the installed Go cannot build the module."""
    staged: str | None = None
    """Modules under this prefix replaced by a local directory are staging modules published at
    ``v0.<minor>.<patch>`` of the component's ``v1.<minor>.<patch>`` (Kubernetes's convention)."""
    cgo: bool = False
    """Built with cgo, linked statically (flannel's UDP backend is C on amd64, as upstream builds it)."""
    module_version: str | None = None
    """The module's version when it is not the component's (pause is a C file of Kubernetes's module)."""

    @property
    def version(self) -> str:
        return self.versions[0]

    def ldflags_for(self, version: str) -> str:
        return " ".join(flag.replace("{version}", version) for flag in self.ldflags)


def _kubernetes_ldflags(version: str) -> tuple[str, ...]:
    major, minor = version.removeprefix("v").split(".")[:2]
    commit, build_date = KUBERNETES_RELEASES[version]
    values = {"gitVersion": "{version}", "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean",
              "buildDate": build_date, "gitCommit": commit}  # fmt: skip
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in values.items()]
    return tuple(flags)


def _kube(name: str, version: str = KUBERNETES_VERSION) -> Binary:
    return Binary(name, f"k8s.io/kubernetes/cmd/{name}", ("--version",), f"Kubernetes {version}")


def kubernetes_version_tag(version: str) -> str:
    """``1.30.2`` or ``v1.30.2`` -> ``v1.30.2``."""
    return version if version.startswith("v") else f"v{version}"


def kubernetes_component(version: str) -> Component:
    """The Kubernetes build of another ``version`` (``1.30.2``): the binaries an upgrade needs, cached
    as ``kubernetes-v1.30.2`` beside the cluster's own. Raises :class:`KubeBuildError` for a release
    whose facts are not recorded here."""
    tag = kubernetes_version_tag(version)
    if tag == KUBERNETES_VERSION:
        return COMPONENTS[0]
    if tag not in KUBERNETES_RELEASES:
        raise KubeBuildError(
            f"no Kubernetes release {tag} is known to the builder",
            hint=f"--version takes one of {', '.join(v.removeprefix('v') for v in KUBERNETES_RELEASES)} "
            "(a release's commit and date go in ichor.kubebuild._components.KUBERNETES_RELEASES)",
        )
    return Component("kubernetes", "k8s.io/kubernetes", (tag,), tuple(_kube(n, tag) for n in UPGRADE_BINARIES),
                     _kubernetes_ldflags(tag), staged="k8s.io/")  # fmt: skip


_CNI_VERSION_ENV = {"CNI_COMMAND": "VERSION"}
_CNI_PLUGINS = {"bridge": "main/bridge", "host-local": "ipam/host-local", "loopback": "main/loopback",
                "portmap": "meta/portmap", "bandwidth": "meta/bandwidth", "firewall": "meta/firewall"}  # fmt: skip

COMPONENTS: tuple[Component, ...] = (
    Component(
        "kubernetes",
        "k8s.io/kubernetes",
        (KUBERNETES_VERSION,),
        (
            *(_kube(n) for n in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")),
            _kube("kube-proxy"),
            Binary(
                "kubectl",
                "k8s.io/kubernetes/cmd/kubectl",
                ("version", "--client"),
                f"Client Version: {KUBERNETES_VERSION}",
            ),
        ),
        _kubernetes_ldflags(KUBERNETES_VERSION),
        staged="k8s.io/",
    ),
    Component(
        "coredns",
        "github.com/coredns/coredns",
        (COREDNS_VERSION,),
        (
            Binary(
                "coredns",
                "github.com/coredns/coredns",
                ("-version",),
                f"CoreDNS-{COREDNS_VERSION.removeprefix('v')}",
            ),
        ),
        toolchain="go1.21.13",
    ),
    Component(
        "flannel",
        "github.com/flannel-io/flannel",
        (FLANNEL_VERSION, "v0.25.7", "v0.25.6"),
        (Binary("flanneld", "github.com/flannel-io/flannel", ("--version",), "{version}"),),
        ("-s", "-w", "-X github.com/flannel-io/flannel/pkg/version.Version={version}", "-extldflags=-static"),
        cgo=True,
    ),
    Component(
        "flannel-cni",
        "github.com/containernetworking/plugins",
        (FLANNEL_CNI_VERSION,),
        (
            Binary(
                "flannel",
                "github.com/containernetworking/plugins/plugins/meta/flannel",
                (),
                "supportedVersions",
                _CNI_VERSION_ENV,
            ),
        ),
    ),
    Component(
        "cni-plugins",
        "github.com/containernetworking/plugins",
        (CNI_PLUGINS_VERSION,),
        tuple(
            Binary(
                name,
                f"github.com/containernetworking/plugins/plugins/{path}",
                (),
                "supportedVersions",
                _CNI_VERSION_ENV,
            )
            for name, path in _CNI_PLUGINS.items()
        ),
        (
            "-s",
            "-w",
            "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion={version}",
        ),
    ),
    Component(
        "pause",
        "k8s.io/kubernetes",  # build/pause/linux/pause.c of the Kubernetes module, compiled with gcc
        (PAUSE_VERSION,),
        (Binary("pause", "build/pause/linux/pause.c", ("-v",), f"pause.c {PAUSE_VERSION}"),),
        module_version=KUBERNETES_VERSION,
    ),
)


_REPLACE_LINE = re.compile(r"^\s*(\S+)(?:\s+(\S+))?\s+=>\s+(\S+)(?:\s+(\S+))?\s*(?://.*)?$")


def parse_replaces(go_mod: str) -> list[tuple[str, str, str | None]]:
    """The ``replace`` directives of a go.mod: ``(module, new path, new version or None)``."""
    found: list[tuple[str, str, str | None]] = []
    in_block = False
    for raw in go_mod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if in_block:
            if line == ")":
                in_block = False
                continue
            text = line
        elif line.startswith("replace"):
            rest = line.removeprefix("replace").strip()
            if rest == "(":
                in_block = True
                continue
            text = rest
        else:
            continue
        if not text:
            continue
        match = _REPLACE_LINE.match(text)
        if match is None:
            raise KubeBuildError(
                f"cannot read the go.mod replace directive {raw.strip()!r}", hint="is it a go.mod?"
            )
        found.append((match[1], match[3], match[4]))
    return found


def _go_directive(go_mod: str) -> str:
    match = re.search(r"^go\s+(\S+)", go_mod, re.MULTILINE)
    return match[1] if match else "1.21"


def wrapper_go_mod(component: Component, version: str, upstream_go_mod: str) -> str:
    """Our build module's go.mod: require the component at ``version``, with its replaces resolved."""
    lines = [f"module ichor.local/build/{component.name}", "", f"go {_go_directive(upstream_go_mod)}", "",
             f"require {component.module} {version}"]  # fmt: skip
    replaces = []
    for module, path, new_version in parse_replaces(upstream_go_mod):
        if new_version is not None:
            replaces.append(f"\t{module} => {path} {new_version}")
        elif (
            component.staged
            and module.startswith(component.staged)
            and re.fullmatch(r"v1\.\d+\.\d+", version)
        ):
            staged = "v0." + version.split(".", 1)[1]
            replaces.append(f"\t{module} => {module} {staged}")
        else:
            raise KubeBuildError(
                f"{component.module}@{version} replaces {module} with the directory {path}, "
                "which a module that depends on it cannot see",
                hint="build it from a checkout instead, or pick a release without local replaces",
            )
    if replaces:
        lines += ["", "replace (", *replaces, ")"]
    return "\n".join(lines) + "\n"


def tools_go(component: Component) -> str:
    """``tools.go`` importing every main package, so ``go mod tidy`` records all their dependencies."""
    imports = "\n".join(f'\t_ "{b.package}"' for b in component.binaries)
    return f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"
