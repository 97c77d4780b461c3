"""Area ``cri``: ``machine.registries`` -> containerd's registry host files.

* ``cri.RegistriesConfigController``: MachineConfig -> RegistriesConfig ``registries``
  (``machine.registries.mirrors`` and ``.config`` as the config says them);
* ``files.CRIRegistryConfigController``: RegistriesConfig -> ``/etc/cri/conf.d/hosts/<host>/hosts.toml``
  (with the CA and client key pair files beside it) and ``/etc/cri/conf.d/01-registries.part``
  (credentials), then the merged ``/etc/cri/conf.d/cri.toml``. Host directories no longer in the
  config are removed. containerd reads the host files on every pull, so a config change applies
  to the next pull without a restart. An entry that cannot be rendered is a wait (``get waits``)
  naming the key; the files already written stay.
"""

from __future__ import annotations

import shutil
from typing import Any

from ichor.machined import cri
from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.cosi import Controller, ControllerContext, Input, Phase, TransformController
from ichor.machined.platform import Layout
from ichor.machined.resources import REGISTRIES_CONFIG_ID, REGISTRIES_CONFIGS, RegistriesConfigSpec
from ichor.machinery.config._models import RegistriesConfig
from ichor.machinery.files import write_atomic

__all__ = ["RegistryFilesController", "registries_config_controller"]

_RETRY_AFTER = 10.0


def registries_config_controller() -> TransformController[RegistriesConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, RegistriesConfigSpec]:
        config = active_config(ctx)
        machine = config.machine if config is not None else None
        registries = machine.registries if machine is not None else None
        if registries is None:
            return {REGISTRIES_CONFIG_ID: RegistriesConfigSpec()}
        dumped: dict[str, Any] = registries.model_dump(mode="json", by_alias=True, exclude_none=True)
        return {REGISTRIES_CONFIG_ID: RegistriesConfigSpec(
            mirrors=dumped.get("mirrors", {}), config=dumped.get("config", {}),
        )}  # fmt: skip

    return TransformController(
        "cri.RegistriesConfigController", inputs=[ACTIVE_CONFIG], output=REGISTRIES_CONFIGS, map_inputs=derive
    )


def _sync(layout: Layout, files: cri.HostFiles) -> list[str]:
    """Write ``files`` under the hosts directory, remove host directories not in it; returns what changed."""
    hosts = layout.path(cri.CRI_HOSTS_DIR)
    changed = []
    for relative, contents in sorted(files.files.items()):
        path = hosts / relative
        if not path.is_file() or path.read_text() != contents:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            write_atomic(path, contents, mode=0o600 if relative.endswith(".key") else 0o644)
            changed.append(f"{cri.CRI_HOSTS_DIR}/{relative}")
    wanted_dirs = {relative.split("/", 1)[0] for relative in files.files}
    if hosts.is_dir():
        for directory in hosts.iterdir():
            if directory.name not in wanted_dirs:
                shutil.rmtree(directory, ignore_errors=True)
                changed.append(f"removed {cri.CRI_HOSTS_DIR}/{directory.name}")
            else:
                wanted = {r.split("/", 1)[1] for r in files.files if r.startswith(directory.name + "/")}
                for stale in [p for p in directory.iterdir() if p.name not in wanted]:
                    stale.unlink(missing_ok=True)
    part = layout.path(cri.CRI_CONFD) / cri.CRI_REGISTRIES_PART
    if files.registries_part:
        if not part.is_file() or part.read_text() != files.registries_part:
            write_atomic(part, files.registries_part, mode=0o600)
            changed.append(f"{cri.CRI_CONFD}/{cri.CRI_REGISTRIES_PART}")
    elif part.exists():
        part.unlink()
        changed.append(f"removed {cri.CRI_CONFD}/{cri.CRI_REGISTRIES_PART}")
    if changed:
        merged = cri.merge_parts(layout.path(cri.CRI_CONFD))
        write_atomic(layout.path(cri.CRI_MERGED_CONFIG), merged, mode=0o644)
    return changed


class RegistryFilesController(Controller):
    """``files.CRIRegistryConfigController`` (see the module doc)."""

    name = "files.CRIRegistryConfigController"
    inputs = (Input(REGISTRIES_CONFIGS, id=REGISTRIES_CONFIG_ID),)
    writes = "(/etc/cri/conf.d/hosts, 01-registries.part and cri.toml in the node)"

    def __init__(self, layout: Layout) -> None:
        self._layout = layout

    async def run(self, ctx: ControllerContext) -> None:
        retry: float | None = None
        while True:
            await ctx.changed(timeout=retry)
            resource = ctx.get_or_none(REGISTRIES_CONFIGS, REGISTRIES_CONFIG_ID)
            if resource is None or resource.metadata.phase is not Phase.RUNNING:
                continue
            problems: list[str] = []
            try:
                registries = RegistriesConfig.model_validate(
                    {"mirrors": resource.spec.mirrors, "config": resource.spec.config}
                )
                for what in _sync(self._layout, cri.render_registries(registries, cri.CRI_HOSTS_DIR)):
                    ctx.logger.info("wrote registry configuration", path=what)
            except (cri.CRIError, OSError) as err:
                hint = getattr(err, "hint", None)
                problems.append(f"{err}" + (f" ({hint})" if hint else ""))
            retry = ctx.waiting_on("registry host files written", problems, retry_after=_RETRY_AFTER)
