"""Build every component missing from the cache, pack the images, and push them to a registry.

The cache is ``$XDG_CACHE_HOME/ichor/kubernetes/`` (default ``~/.cache``): one directory per
component build (``kubernetes-v1.30.3/bin``, ``coredns-v1.11.1/bin``, ...) and one OCI layout per
image (``images/<key>``), each with a stamp (``ichor-build.json``, ``ichor-image.json``) written
last, inside the staged directory that is renamed into place. A warm run checks the stamps against
the files (names, sizes, the image's blobs): a directory whose stamp is missing or does not match
is rebuilt, never trusted, and a complete cache costs a few ``stat`` calls and no ``go`` command.
"""

from __future__ import annotations

__all__ = ["KubernetesArtifacts", "artifacts_root", "ensure_built", "ensure_kubernetes", "push_images"]

import functools
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ichor.images import BuiltImage, build_layout, parse_reference, push
from ichor.kubebuild._components import (
    COMPONENTS,
    KUBERNETES_VERSION,
    Component,
    kubernetes_component,
    kubernetes_version_tag,
    tools_go,
    wrapper_go_mod,
)
from ichor.kubebuild._errors import KubeBuildError
from ichor.kubebuild._images import IMAGES, ImageRecipe, assemble_rootfs, kubernetes_images
from ichor.machinery import gobuild, proc
from ichor.machinery.errors import ProcessError

_MIN_GO = (1, 22)
_FALLBACK = "clusters can still use the public images when the nodes reach the internet"
_BUILD_STAMP = "ichor-build.json"
_IMAGE_STAMP = "ichor-image.json"
IMAGE_LAYOUT_VERSION = 3
"""Bumped whenever :func:`~ichor.kubebuild._images.assemble_rootfs` lays images out differently."""


@dataclass(frozen=True)
class KubernetesArtifacts:
    """What a build produced: binaries, the CNI plugin directory, and every image layout by reference."""

    bin_dir: Path | None
    """kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl (None
    when Kubernetes was left out with ``only``; so for the two below)."""
    kubectl: Path | None
    cni_dir: Path | None
    """The CNI reference plugins, for a node's /opt/cni/bin."""
    images: Mapping[str, BuiltImage]
    versions: Mapping[str, str]
    """Component -> the version actually built (flannel may be a same-minor fallback)."""


def artifacts_root(env: Mapping[str, str] | None = None) -> Path:
    return gobuild.cache_root(os.environ if env is None else env, "kubernetes")


def _read_stamp(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _built(root: Path, component: Component) -> tuple[Path, str] | None:
    """The component's verified bin dir and built version, None when missing or not what its stamp says."""
    target = root / f"{component.name}-{component.version}"
    stamp = _read_stamp(target / _BUILD_STAMP)
    if stamp is None or not isinstance(stamp.get("sizes"), dict):
        return None
    bin_dir = target / "bin"
    for binary in component.binaries:
        path = bin_dir / binary.name
        try:
            if path.stat().st_size != stamp["sizes"].get(binary.name) or not os.access(path, os.X_OK):
                return None
        except OSError:
            return None
    return bin_dir, str(stamp.get("version", component.version))


def verify(component: Component, bin_dir: Path, version: str) -> None:
    """Raise unless every binary of ``component`` in ``bin_dir`` shows its version."""
    for binary in component.binaries:
        path = bin_dir / binary.name
        expect = binary.expect.replace("{version}", version)
        try:
            done = proc.run(
                [str(path), *binary.version_args], env=binary.version_env, timeout=60, check=False
            )
        except ProcessError as err:
            raise KubeBuildError(f"{str(path)!r} does not run: {err}", hint=err.hint) from err
        if expect not in done.stdout + done.stderr:
            shown = (done.stdout + done.stderr).strip().splitlines()[:1] or ["(nothing)"]
            raise KubeBuildError(
                f"{str(path)!r} does not report {expect!r} (it said {shown[0]!r})",
                hint=f"the build did not produce {component.name} {version}; run `python -m ichor.kubebuild --force`",
            )


class _Builder:
    def __init__(self, root: Path, runner: gobuild.GoRunner, cc: str, report: Callable[[str], None]) -> None:
        self.root, self.runner, self.cc, self.report = root, runner, cc, report

    def module_dir(self, module: str, version: str, src: Path, env: Mapping[str, str]) -> tuple[Path, str]:
        """Download ``module@version``; its directory and go.mod text."""
        out = self.runner.output(["mod", "download", "-json", f"{module}@{version}"], cwd=src, env=env)
        info = json.loads(out)
        return Path(info["Dir"]), Path(info["GoMod"]).read_text()

    def build(self, component: Component, staging: Path) -> str:
        bin_dir = staging / "bin"
        bin_dir.mkdir()
        src = self.root / "src" / component.name
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        env = {"GOTOOLCHAIN": component.toolchain} if component.toolchain else {}
        if component.cgo:
            env["CGO_ENABLED"] = "1"
        version, module_dir, go_mod = self._download(component, src, env)
        if component.name == "pause":
            cc = shutil.which(self.cc)
            if cc is None:
                raise KubeBuildError(
                    f"cannot build pause: the C compiler {self.cc!r} is not on PATH",
                    hint="install gcc and the static C library (`apt-get install -y gcc libc6-dev`; "
                    "`bash run.sh` does it as root)",
                )
            self.runner.run_logged(
                [cc, "-static", "-O2", f"-DVERSION={version}", "-o", str(bin_dir / "pause"),
                 str(module_dir / component.binaries[0].package)], cwd=src, what="compiling pause",
            )  # fmt: skip
        else:
            (src / "go.mod").write_text(wrapper_go_mod(component, version, go_mod))
            (src / "tools.go").write_text(tools_go(component))
            # -e: a module needed only under build tags we never use (CoreDNS's dd-trace-go wants
            # inet.af/netaddr for Go < 1.19, which the proxy no longer serves) must not stop the build.
            self.runner.run(
                ["mod", "tidy", "-e"], cwd=src, what=f"resolving {component.module}@{version}", env=env
            )
            for binary in component.binaries:
                self.runner.run(
                    ["build", "-v", "-ldflags", component.ldflags_for(version), "-o", str(bin_dir / binary.name),
                     binary.package], cwd=src, what=f"compiling {binary.name}", env=env,
                )  # fmt: skip
        verify(component, bin_dir, version)
        sizes = {b.name: (bin_dir / b.name).stat().st_size for b in component.binaries}
        (staging / _BUILD_STAMP).write_text(json.dumps({"version": version, "sizes": sizes}, indent=1))
        return version

    def _download(self, component: Component, src: Path, env: Mapping[str, str]) -> tuple[str, Path, str]:
        """The version served (the first of ``component.versions`` the proxy has), its dir and go.mod."""
        errors: list[KubeBuildError] = []
        for version in component.versions:
            try:
                module_dir, go_mod = self.module_dir(
                    component.module, component.module_version or version, src, env
                )
            except KubeBuildError as err:
                errors.append(err)
                continue
            if version != component.version:
                self.report(
                    f"  {component.name} {component.version} is not served by the Go module proxy; "
                    f"building {version}, the nearest release it serves"
                )
            return version, module_dir, go_mod
        raise errors[0]


def _image_ready(layout: Path, inputs: Mapping[str, list[int]]) -> BuiltImage | None:
    """The image recorded in ``layout``'s stamp when its blobs are there and its inputs unchanged."""
    stamp = _read_stamp(layout / _IMAGE_STAMP)
    if stamp is None or stamp.get("inputs") != dict(inputs):
        return None
    try:
        image = BuiltImage(layout, str(stamp["tag"]), str(stamp["manifest_digest"]), str(stamp["config_digest"]),
                           str(stamp["layer_digest"]), int(stamp["layer_size"]), int(stamp["content_bytes"]))  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return None
    blobs = layout / "blobs" / "sha256"
    for digest in (image.manifest_digest, image.config_digest, image.layer_digest):
        if not (blobs / digest.removeprefix("sha256:")).is_file():
            return None
    if (blobs / image.layer_digest.removeprefix("sha256:")).stat().st_size != image.layer_size:
        return None
    return image if (layout / "index.json").is_file() else None


def _pack(root: Path, recipe: ImageRecipe, binaries: Mapping[str, Path], versions: Mapping[str, str],
          report: Callable[[str], None]) -> BuiltImage:  # fmt: skip
    layout = root / "images" / recipe.key
    # Size and mtime of each binary packed: a rebuilt binary (``--force``) repacks the image.
    inputs = {key: [(st := binaries[key].stat()).st_size, st.st_mtime_ns]
              for key in sorted({f"{c}/{b}" for c, b in recipe.files.values()})}  # fmt: skip
    inputs["layout"] = [IMAGE_LAYOUT_VERSION]  # a change to how images are laid out repacks them
    ready = _image_ready(layout, inputs)
    if ready is not None:
        return ready
    reference = parse_reference(recipe.reference)
    source_version = versions[next(iter(recipe.files.values()))[0]]
    started = time.monotonic()

    def pack(staging: Path) -> BuiltImage:
        rootfs = assemble_rootfs(recipe, root / "rootfs" / recipe.key, binaries)
        try:
            image = build_layout(rootfs, staging, tag=reference.tag, spec=recipe.spec(source_version))
        finally:
            shutil.rmtree(rootfs, ignore_errors=True)
        stamp = {"reference": recipe.reference, "tag": image.tag, "manifest_digest": image.manifest_digest,
                 "config_digest": image.config_digest, "layer_digest": image.layer_digest,
                 "layer_size": image.layer_size, "content_bytes": image.content_bytes, "inputs": inputs}  # fmt: skip
        (staging / _IMAGE_STAMP).write_text(json.dumps(stamp, indent=1))
        return image

    image = gobuild.install_staged(layout, pack)
    report(f"  image {recipe.reference}: {image.layer_size / 1e6:.1f} MB compressed "
           f"({image.content_bytes / 1e6:.1f} MB of files) in {gobuild.elapsed(time.monotonic() - started)}")  # fmt: skip
    return BuiltImage(layout, image.tag, image.manifest_digest, image.config_digest, image.layer_digest,
                      image.layer_size, image.content_bytes)  # fmt: skip


def ensure_built(
    report: Callable[[str], None] = lambda _line: None,
    *,
    env: Mapping[str, str] | None = None,
    go: str | None = None,
    cc: str = "gcc",
    force: bool = False,
    only: Iterable[str] | None = None,
    tick: float = 15.0,
) -> KubernetesArtifacts:
    """Build what is missing (every component, or ``only`` those named) and pack every image whose
    binaries are built; a complete cache runs no command. Raises :class:`KubeBuildError`."""
    root = artifacts_root(env)
    wanted = [c for c in COMPONENTS if only is None or c.name in set(only)]
    unknown = set(only or ()) - {c.name for c in COMPONENTS}
    if unknown:
        raise KubeBuildError(f"no component named {', '.join(sorted(unknown))}",
                             hint=f"--only takes {', '.join(c.name for c in COMPONENTS)}")  # fmt: skip
    done: dict[str, tuple[Path, str]] = {}
    for component in COMPONENTS:
        found = None if force and component in wanted else _built(root, component)
        if found is not None:
            done[component.name] = found
    missing = [c for c in wanted if c.name not in done]
    if missing:
        with gobuild.locked(root / ".lock", report, "Kubernetes"):
            _build_missing(root, missing, done, report=report, go=go, cc=cc, tick=tick, force=force)
    binaries = {f"{name}/{b.name}": bin_dir / b.name
                for c in COMPONENTS if (name := c.name) in done for bin_dir in [done[name][0]] for b in c.binaries}  # fmt: skip
    versions = {name: version for name, (_, version) in done.items()}
    images = {}
    for recipe in IMAGES:
        if all(f"{c}/{b}" in binaries for c, b in recipe.files.values()):
            images[recipe.reference] = _pack(root, recipe, binaries, versions, report)
    if not missing:
        report(f"everything wanted is already built in {root}")
    kube = done["kubernetes"][0] if "kubernetes" in done else None
    cni = done["cni-plugins"][0] if "cni-plugins" in done else None
    return KubernetesArtifacts(kube, kube / "kubectl" if kube else None, cni, images, versions)


def ensure_kubernetes(
    version: str,
    report: Callable[[str], None] = lambda _line: None,
    *,
    env: Mapping[str, str] | None = None,
    go: str | None = None,
    force: bool = False,
    tick: float = 15.0,
) -> KubernetesArtifacts:
    """Another Kubernetes ``version`` (``1.30.2``), built only when asked for: the binaries and images
    an upgrade needs (:data:`~ichor.kubebuild._components.UPGRADE_BINARIES`), cached beside the
    cluster's version as ``kubernetes-v1.30.2`` and ``images/<name>-v1.30.2``. The cluster's own
    version is :func:`ensure_built`'s. Raises :class:`KubeBuildError`."""
    tag = kubernetes_version_tag(version)
    if tag == KUBERNETES_VERSION:
        return ensure_built(report, env=env, go=go, force=force, only=["kubernetes"], tick=tick)
    component = kubernetes_component(tag)
    root = artifacts_root(env)
    found = None if force else _built(root, component)
    done: dict[str, tuple[Path, str]] = {}
    if found is None:
        with gobuild.locked(root / ".lock", report, f"Kubernetes {tag}"):
            _build_missing(root, [component], done, report=report, go=go, cc="gcc", tick=tick, force=force)
    else:
        done[component.name] = found
        report(f"Kubernetes {tag} is already built in {root}")
    bin_dir = done[component.name][0]
    binaries = {f"kubernetes/{b.name}": bin_dir / b.name for b in component.binaries}
    images = {recipe.reference: _pack(root, recipe, binaries, {"kubernetes": tag}, report)
              for recipe in kubernetes_images(tag)}  # fmt: skip
    return KubernetesArtifacts(bin_dir, None, None, images, {"kubernetes": tag})


def _build_missing(root: Path, missing: list[Component], done: dict[str, tuple[Path, str]], *,
                   report: Callable[[str], None], go: str | None, cc: str, tick: float, force: bool) -> None:  # fmt: skip
    # Another process may have built some while this one waited for the lock.
    still = missing if force else [c for c in missing if _built(root, c) is None]
    for component in missing:
        if component not in still:
            done[component.name] = _built(root, component)  # type: ignore[assignment]
    if not still:
        return
    go_path, values = gobuild.find_go(
        go, minimum=_MIN_GO, what="Kubernetes", error=KubeBuildError, fallback=_FALLBACK
    )
    runner = gobuild.GoRunner(go=go_path, values=values, log=root / "build.log", report=report, tick=tick,
                              error=KubeBuildError, fallback=_FALLBACK)  # fmt: skip
    runner.log.write_text("")
    builder = _Builder(root, runner, cc, report)
    report(f"building {', '.join(c.name for c in still)} from the Go modules with {runner.go_version} into {root} "
           "(first run only: 10-25 min on 2 cores for everything, most of it Kubernetes; progress every "
           f"{tick:g} s, the whole output in {runner.log})")  # fmt: skip
    for component in still:
        started = time.monotonic()
        report(f"{component.name} ({component.module}@{component.module_version or component.version}) ...")
        target = root / f"{component.name}-{component.version}"
        version = gobuild.install_staged(target, functools.partial(builder.build, component))
        done[component.name] = (target / "bin", version)
        size = sum(p.stat().st_size for p in (target / "bin").iterdir())
        report(f"{component.name} {version}: {size / 1e6:.0f} MB of binaries, built and verified in "
               f"{gobuild.elapsed(time.monotonic() - started)}")  # fmt: skip


def push_images(
    artifacts: KubernetesArtifacts, registry: str, report: Callable[[str], None] = lambda _l: None
) -> None:
    """Push every image to ``registry`` (``host:port``, plain http) under its repository and tag."""
    for reference, image in artifacts.images.items():
        started = time.monotonic()
        push(image, registry, parse_reference(reference))
        report(f"pushed {reference} to {registry} in {gobuild.elapsed(time.monotonic() - started)}")
