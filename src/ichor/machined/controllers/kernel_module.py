"""Kernel modules, as Talos's two ``runtime`` controllers load them:

* ``runtime.KernelModuleConfigController``: ``machine.kernel.modules`` -> KernelModuleSpecs (id =
  the module's name, with its ``parameters``);
* ``runtime.KernelModuleSpecController``: KernelModuleSpecs -> the kernel, each module loaded once
  with kmod's ``modprobe`` (dependencies and soft dependencies too; :mod:`ichor.machined.kernelmodules`).
  Nothing is ever unloaded, as in Talos: a module dropped from the config, or given new parameters,
  changes at the next boot. A module that does not load is named on the console (once per reason),
  in the controller-runtime log and in ``talosctl get waits`` (``kernel modules loaded``) with
  modprobe's and the kernel's reason, and is tried again every :data:`RETRY_AFTER` seconds.

Whether the node may load a module at all is the platform's answer
(``Layout.kernel_module_refusal``), asked before every pass: a container or process node shares the
host's kernel, so its specs are published (``talosctl get kernelmodulespecs``) and the refusal is
said plainly (console and ``get waits``), but this controller must never load anything there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.cosi import Controller, ControllerContext, Input, Phase, TransformController, WaitingFor
from ichor.machined.kernelmodules import KernelModuleError, check_module, load_module
from ichor.machined.platform import Layout
from ichor.machined.resources import KERNEL_MODULE_SPECS, KernelModuleSpecSpec

__all__ = [
    "RETRY_AFTER",
    "WAITING_FOR",
    "KernelModuleSpecController",
    "LoadModule",
    "kernel_module_config_controller",
    "kernel_module_controllers",
    "modprobe_in_thread",
]

RETRY_AFTER = 60.0
"""Seconds between attempts at a module that did not load."""
WAITING_FOR = "kernel modules loaded"
"""What ``get waits`` says the controller waits for while a module is not loaded."""

LoadModule = Callable[[str, Sequence[str]], Awaitable[None]]
"""Load one module with its parameters, or raise :class:`KernelModuleError` saying why not."""


async def modprobe_in_thread(name: str, parameters: Sequence[str]) -> None:
    """:func:`~ichor.machined.kernelmodules.load_module` off the event loop."""
    await asyncio.to_thread(load_module, name, parameters)


def kernel_module_config_controller() -> TransformController[KernelModuleSpecSpec]:
    def derive(ctx: ControllerContext) -> dict[str, KernelModuleSpecSpec]:
        machine = active_config(ctx).machine
        kernel = machine.kernel if machine is not None else None
        specs: dict[str, KernelModuleSpecSpec] = {}
        for i, module in enumerate((kernel.modules if kernel is not None else None) or ()):
            name = str(module.name or "")
            if not name:
                raise WaitingFor(
                    "machine.kernel.modules", f"module {i} has no name (fix machine.kernel.modules)"
                )
            specs[name] = KernelModuleSpecSpec(
                name=name, parameters=tuple(str(p) for p in module.parameters or ())
            )
        return specs

    return TransformController(
        "runtime.KernelModuleConfigController",
        inputs=[ACTIVE_CONFIG],
        output=KERNEL_MODULE_SPECS,
        map_inputs=derive,
    )


class KernelModuleSpecController(Controller):
    name = "runtime.KernelModuleSpecController"
    inputs = (Input(KERNEL_MODULE_SPECS),)
    writes = "(the kernel: modules loaded with modprobe, on a node whose kernel is its own)"

    def __init__(
        self,
        layout: Layout,
        load: LoadModule = modprobe_in_thread,
        *,
        say: Callable[[str], None] | None = None,
        retry_after: float = RETRY_AFTER,
    ) -> None:
        self._layout = layout
        self._load = load
        self._say = say or (lambda _line: None)
        self._retry_after = retry_after
        self._loaded: set[str] = set()
        self._said: dict[str, str] = {}
        """The last thing the console was told about each module (said again only when it changes)."""

    def _tell(self, name: str, line: str) -> None:
        if self._said.get(name) != line:
            self._said[name] = line
            self._say(line)

    async def run(self, ctx: ControllerContext) -> None:
        retry: float | None = None
        while True:
            await ctx.changed(timeout=retry)
            specs = sorted(
                (r.spec for r in ctx.list(KERNEL_MODULE_SPECS) if r.metadata.phase is Phase.RUNNING),
                key=lambda spec: spec.name,
            )
            refusal = self._layout.kernel_module_refusal()
            if refusal is not None:
                retry = None
                if not specs:
                    ctx.clear_waiting()
                    continue
                names = ", ".join(spec.name for spec in specs)
                ctx.waiting(WAITING_FOR, f"{names} {refusal}")
                self._tell("*", f"kernel modules {names} {refusal}")
                ctx.logger.info("kernel modules not loaded", modules=names, reason=refusal)
                continue
            problems = [problem for spec in specs if (problem := await self._ensure(ctx, spec))]
            retry = ctx.waiting_on(WAITING_FOR, problems, retry_after=self._retry_after)

    async def _ensure(self, ctx: ControllerContext, spec: KernelModuleSpecSpec) -> str | None:
        """Load ``spec``'s module unless this boot loaded it already; what went wrong, or None."""
        if spec.name in self._loaded:
            return None
        try:
            check_module(spec.name, spec.parameters)  # never handed to modprobe, never retried
            await self._load(spec.name, spec.parameters)
        except KernelModuleError as err:
            self._tell(spec.name, f"kernel module {spec.name} failed to load: {err.reason}")
            ctx.logger.warning("error loading module", module=spec.name, error=err.reason)
            return str(err)
        self._loaded.add(spec.name)
        with_parameters = f" with {' '.join(spec.parameters)}" if spec.parameters else ""
        self._tell(spec.name, f"kernel module {spec.name} loaded{with_parameters}")
        ctx.logger.info("loaded kernel module", module=spec.name, parameters=" ".join(spec.parameters))
        return None


def kernel_module_controllers(
    layout: Layout, load: LoadModule = modprobe_in_thread, *, say: Callable[[str], None] | None = None
) -> list[Controller]:
    """Config -> specs -> the kernel, in registration order."""
    return [kernel_module_config_controller(), KernelModuleSpecController(layout, load, say=say)]
