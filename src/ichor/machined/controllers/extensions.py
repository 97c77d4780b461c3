"""Area ``runtime`` (extensions): installed system extensions and ExtensionServiceConfig documents.

* ``runtime.ExtensionStatusController``: ``/etc/extensions.yaml`` (the layers the node was built
  with: Talos's installer writes it into the image, Ichor's container provisioner into the node's
  root) -> ExtensionStatuses ``0``, ``1``, ... (``talosctl get extensions``);
* ``runtime.ExtensionServiceConfigController``: the machine config's ``ExtensionServiceConfig``
  documents -> ExtensionServiceConfigs (id = the document's name);
* ``runtime.ExtensionServiceConfigFilesController``: ExtensionServiceConfigs -> each config file
  written to ``/system/overlays/extensions/<name>/<mountPath flattened>`` (where the service's OCI
  spec binds it read-only at ``mountPath``), files of removed configs deleted ->
  ExtensionServiceConfigStatuses carrying the config's version. A new version is the signal that
  restarts ``ext-<name>``.

Talos skips writing the files in container mode; Ichor's container nodes run extension services,
so it writes them there too.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

from ichor.machined.controllers.config import ACTIVE_CONFIG
from ichor.machined.cosi import (
    Controller,
    ControllerContext,
    Input,
    Output,
    Phase,
    SkipReconcile,
    TransformController,
    WaitingFor,
)
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ACTIVE_CONFIG_ID,
    EXTENSION_SERVICE_CONFIG_STATUSES,
    EXTENSION_SERVICE_CONFIGS,
    EXTENSION_STATUSES,
    MACHINE_CONFIGS,
    ExtensionMetadataSpec,
    ExtensionServiceConfigFileSpec,
    ExtensionServiceConfigSpec,
    ExtensionServiceConfigStatusSpec,
    ExtensionStatusSpec,
)
from ichor.machined.resources._extensions import ExtensionCompatibility, ExtensionConstraint
from ichor.machinery import yamlio
from ichor.machinery.config._models import ExtensionServiceConfigV1Alpha1
from ichor.machinery.errors import YAMLError
from ichor.machinery.extensions import CONFIG_FILES_DIR
from ichor.machinery.limits import InputLimits

__all__ = [
    "EXTENSIONS_FILE",
    "ExtensionServiceConfigFilesController",
    "extension_service_config_controller",
    "extension_status_controller",
    "read_extension_layers",
]

EXTENSIONS_FILE = "/etc/extensions.yaml"
_LIMITS = InputLimits(max_bytes=1024 * 1024, max_nodes=50_000, max_aliases=100, max_depth=10)
_SERVICE_NAME = re.compile(r"^[-_a-z0-9]+$")
_RETRY_AFTER = 5.0


def _text(value: Any) -> str:
    return "" if value is None or isinstance(value, dict | list) else str(value)


def read_extension_layers(text: str | bytes, *, source: str = EXTENSIONS_FILE) -> list[ExtensionStatusSpec]:
    """``layers: [{image, metadata: {name, version, author, description, compatibility}}]``."""
    docs = yamlio.load_documents(text, source=source, limits=_LIMITS)
    raw = yamlio.to_plain(docs[0]) if docs else {}
    layers = raw.get("layers") if isinstance(raw, dict) else None
    if not isinstance(layers, list):
        raise YAMLError(f"{source}: expected `layers:` with a list of extensions")
    out: list[ExtensionStatusSpec] = []
    for i, layer in enumerate(layers):
        meta = layer.get("metadata") if isinstance(layer, dict) else None
        if not isinstance(meta, dict):
            raise YAMLError(f"{source}: layers[{i}]: expected `image` and `metadata`")
        compat = meta.get("compatibility")
        talos = compat.get("talos") if isinstance(compat, dict) else None
        constraint = _text(talos.get("version")) if isinstance(talos, dict) else ""
        out.append(
            ExtensionStatusSpec(
                image=_text(layer.get("image")),
                metadata=ExtensionMetadataSpec(
                    name=_text(meta.get("name")),
                    version=_text(meta.get("version")),
                    author=_text(meta.get("author")),
                    description=_text(meta.get("description")),
                    compatibility=ExtensionCompatibility(ExtensionConstraint(constraint)),
                ),
            )
        )
    return out


def extension_status_controller(layout: Layout) -> TransformController[ExtensionStatusSpec]:
    path = layout.path(EXTENSIONS_FILE)

    def derive(ctx: ControllerContext) -> dict[str, ExtensionStatusSpec]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return {}  # a node built without extensions
        except OSError as exc:
            raise WaitingFor("system extensions", f"cannot read {EXTENSIONS_FILE}: {exc.strerror}") from None
        try:
            layers = read_extension_layers(data)
        except YAMLError as exc:
            raise WaitingFor("system extensions", str(exc)) from None
        return {str(i): layer for i, layer in enumerate(layers)}

    controller = TransformController(
        "runtime.ExtensionStatusController", inputs=[], output=EXTENSION_STATUSES, map_inputs=derive
    )
    controller.reads = f"({EXTENSIONS_FILE})"
    return controller


def extension_service_config_controller() -> TransformController[ExtensionServiceConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, ExtensionServiceConfigSpec]:
        resource = ctx.get_or_none(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
        if resource is None:
            raise SkipReconcile
        out: dict[str, ExtensionServiceConfigSpec] = {}
        for doc in resource.spec.parsed:
            model = doc.model
            if not isinstance(model, ExtensionServiceConfigV1Alpha1) or not model.name:
                continue
            files = tuple(
                ExtensionServiceConfigFileSpec(content=f.content or "", mount_path=f.mount_path or "")
                for f in model.config_files or []
            )
            out[model.name] = ExtensionServiceConfigSpec(
                files=files, environment=tuple(model.environment or ())
            )
        return out

    return TransformController(
        "runtime.ExtensionServiceConfigController",
        inputs=[ACTIVE_CONFIG],
        output=EXTENSION_SERVICE_CONFIGS,
        map_inputs=derive,
    )


def _file_name(mount_path: str) -> str | None:
    name = mount_path.lstrip("/").replace("/", "-")
    return None if name in ("", ".", "..") else name


class ExtensionServiceConfigFilesController(Controller):
    """Writes each ExtensionServiceConfig's files where the extension service's OCI spec binds them."""

    name = "runtime.ExtensionServiceConfigFilesController"
    inputs = (Input(EXTENSION_SERVICE_CONFIGS),)
    outputs = (Output(EXTENSION_SERVICE_CONFIG_STATUSES),)
    writes = f"({CONFIG_FILES_DIR}/<name>/ in the node)"

    def __init__(self, layout: Layout) -> None:
        self._base = layout.path(CONFIG_FILES_DIR)

    async def run(self, ctx: ControllerContext) -> None:
        retry: float | None = None
        while True:
            await ctx.changed(timeout=retry)
            done: set[str] = set()
            problems: list[str] = []
            kept: set[str] = set()
            for resource in ctx.list(EXTENSION_SERVICE_CONFIGS):
                if resource.metadata.phase is not Phase.RUNNING:
                    continue
                try:
                    names = self._write(resource.id, resource.spec)
                except (OSError, ValueError) as exc:
                    problems.append(f"ExtensionServiceConfig {resource.id}: {exc}")
                    continue
                kept.add(resource.id)
                for name in names:
                    kept.add(f"{resource.id}/{name}")
                ctx.modify(
                    EXTENSION_SERVICE_CONFIG_STATUSES,
                    resource.id,
                    ExtensionServiceConfigStatusSpec(spec_version=str(resource.metadata.version)),
                )
                done.add(resource.id)
            self._remove_others(kept)
            ctx.clean_up_outputs(EXTENSION_SERVICE_CONFIG_STATUSES, done)
            retry = ctx.waiting_on("extension service config files", problems, retry_after=_RETRY_AFTER)

    def _write(self, service: str, spec: ExtensionServiceConfigSpec) -> list[str]:
        if not _SERVICE_NAME.match(service):
            raise ValueError(f"name {service!r} is not an extension service name ([-_a-z0-9]+)")
        directory = self._base / service
        directory.mkdir(parents=True, exist_ok=True, mode=0o755)
        names: list[str] = []
        for file in spec.files:
            name = _file_name(file.mount_path)
            if name is None:
                raise ValueError(f"mountPath {file.mount_path!r} names no file")
            path = directory / name
            if not path.exists() or path.read_text() != file.content:
                path.write_text(file.content)
                path.chmod(0o644)
            names.append(name)
        return names

    def _remove_others(self, kept: set[str]) -> None:
        if not self._base.is_dir():
            return
        for directory in self._base.iterdir():
            if directory.name not in kept or directory.is_symlink() or not directory.is_dir():
                shutil.rmtree(
                    directory
                ) if directory.is_dir() and not directory.is_symlink() else directory.unlink()
                continue
            for file in directory.iterdir():
                if f"{directory.name}/{file.name}" not in kept:
                    shutil.rmtree(file) if file.is_dir() and not file.is_symlink() else file.unlink()
