"""Kernel parameters, as Talos's three ``runtime`` controllers make them:

* ``runtime.KernelParamConfigController``: ``machine.sysctls`` and ``machine.sysfs`` ->
  KernelParamSpecs ``proc.sys.<key>`` / ``sys.<key>``;
* ``runtime.KernelParamDefaultsController``: Talos 1.7's defaults for the runtime mode (container
  mode: forwarding, TCP keepalive, ``kernel.panic``, ...; metal adds the bridge and KSPP keys) ->
  KernelParamDefaultSpecs;
* ``runtime.KernelParamSpecController``: specs over defaults -> the kernel's files, then
  KernelParamStatuses (``talosctl get sysctls``) with what the kernel has, what it had before, and,
  for a key not applied, ``unsupported`` and the reason. A key dropped from the config gets back
  the value it had before the node first wrote it.

Whether a key may be written is the platform's answer (``Layout.kernel_param_refusal``), asked
before every write: this controller must never change a setting of a kernel the node shares with
the host (a process node refuses every key, a container node every key outside its own network
namespace's ``/proc/sys/net``).
"""

from __future__ import annotations

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.cosi import ControllerContext, Input, TransformController
from ichor.machined.kernelparams import SYSCTL, SYSFS, KernelParamFiles, param_id, param_path
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    KERNEL_PARAM_DEFAULT_SPECS,
    KERNEL_PARAM_SPECS,
    KERNEL_PARAM_STATUSES,
    KernelParamSpecSpec,
    KernelParamStatusSpec,
)

__all__ = [
    "KSPP_PARAMS",
    "kernel_param_config_controller",
    "kernel_param_controllers",
    "kernel_param_defaults_controller",
    "kernel_param_spec_controller",
    "talos_defaults",
]

KSPP_PARAMS = {
    "proc.sys.kernel.kptr_restrict": "1",
    "proc.sys.kernel.dmesg_restrict": "1",
    "proc.sys.kernel.perf_event_paranoid": "3",
    "proc.sys.kernel.yama.ptrace_scope": "1",
    "proc.sys.user.max_user_namespaces": "0",
    "proc.sys.kernel.unprivileged_bpf_disabled": "1",
    "proc.sys.net.core.bpf_jit_harden": "2",
}
"""Talos 1.7's KSPP hardening keys, defaults outside container mode."""


def talos_defaults(mode: str, *, ipv6: bool) -> dict[str, str]:
    """Talos 1.7's default kernel parameters for a runtime mode (``container`` or ``metal``);
    ``ipv6``: the kernel has IPv6 (its ``net.ipv6.conf.default.accept_ra`` exists)."""
    container = mode == "container"
    params = {"proc.sys.net.ipv4.ip_forward": "1"}
    if not container:
        params["proc.sys.net.bridge.bridge-nf-call-iptables"] = "1"
        params["proc.sys.net.bridge.bridge-nf-call-ip6tables"] = "1"
    if ipv6:
        params["proc.sys.net.ipv6.conf.default.forwarding"] = "1"
        params["proc.sys.net.ipv6.conf.default.accept_ra"] = "2"
    params |= {
        "proc.sys.net.ipv4.tcp_keepalive_time": "600",
        "proc.sys.net.ipv4.tcp_keepalive_intvl": "60",
        "proc.sys.kernel.panic": "10",
        "proc.sys.kernel.pid_max": "262144",
        "proc.sys.vm.overcommit_memory": "1",
        "proc.sys.fs.inotify.max_user_instances": "8192",
        "proc.sys.fs.aio-max-nr": "1048576",
    }
    if not container:
        params |= KSPP_PARAMS
    return params


def kernel_param_config_controller() -> TransformController[KernelParamSpecSpec]:
    def derive(ctx: ControllerContext) -> dict[str, KernelParamSpecSpec]:
        machine = active_config(ctx).machine
        specs: dict[str, KernelParamSpecSpec] = {}
        for prefix, keys in (
            ((SYSCTL, machine.sysctls), (SYSFS, machine.sysfs)) if machine is not None else ()
        ):
            for key, value in (keys or {}).items():
                specs[param_id(prefix, key)] = KernelParamSpecSpec(value=str(value))
        return specs

    return TransformController(
        "runtime.KernelParamConfigController",
        inputs=[ACTIVE_CONFIG],
        output=KERNEL_PARAM_SPECS,
        map_inputs=derive,
    )


def kernel_param_defaults_controller(layout: Layout, files: KernelParamFiles) -> TransformController[KernelParamSpecSpec]:  # fmt: skip
    def derive(ctx: ControllerContext) -> dict[str, KernelParamSpecSpec]:
        ipv6 = files.exists("proc.sys.net.ipv6.conf.default.accept_ra")
        return {
            key: KernelParamSpecSpec(value=value)
            for key, value in talos_defaults(layout.platform.mode, ipv6=ipv6).items()
        }

    return TransformController(
        "runtime.KernelParamDefaultsController",
        inputs=[],
        output=KERNEL_PARAM_DEFAULT_SPECS,
        map_inputs=derive,
    )


def kernel_param_spec_controller(layout: Layout, files: KernelParamFiles) -> TransformController[KernelParamStatusSpec]:  # fmt: skip
    before: dict[str, str] = {}
    """The value each key had before this node first wrote it (what a dropped key gets back)."""
    written: set[str] = set()

    def apply(ctx: ControllerContext, key: str, spec: KernelParamSpecSpec) -> KernelParamStatusSpec:
        try:
            path = param_path(key)
        except ValueError as err:
            return KernelParamStatusSpec(unsupported=True, reason=str(err))
        try:
            current = files.read(key)
        except OSError:
            current = ""
        refusal = layout.kernel_param_refusal(path)
        if refusal is not None:
            return KernelParamStatusSpec(current=current, default=current, unsupported=True, reason=refusal)
        if not files.exists(key):
            reason = "" if spec.ignore_errors else f"no such kernel parameter: {path}"
            return KernelParamStatusSpec(unsupported=True, reason=reason)
        before.setdefault(key, current)
        try:
            files.write(key, spec.value)
        except OSError as err:
            ctx.logger.warning(f"setting {key}: {err.strerror or err}", key=key)
            return KernelParamStatusSpec(current=current, default=before[key], unsupported=True,
                                         reason=f"writing {path}: {err.strerror or err}")  # fmt: skip
        written.add(key)
        return KernelParamStatusSpec(current=spec.value, default=before[key])

    def reset(ctx: ControllerContext, key: str) -> None:
        written.discard(key)
        value = before.pop(key, None)
        if value is None:
            return
        try:
            files.write(key, value)
        except OSError as err:
            ctx.logger.warning(f"resetting {key} to {value!r}: {err.strerror or err}", key=key)

    def derive(ctx: ControllerContext) -> dict[str, KernelParamStatusSpec]:
        wanted = {r.id: r.spec for r in ctx.list(KERNEL_PARAM_DEFAULT_SPECS)}
        wanted |= {r.id: r.spec for r in ctx.list(KERNEL_PARAM_SPECS)}  # the config wins
        statuses = {key: apply(ctx, key, spec) for key, spec in sorted(wanted.items())}
        for key in sorted(written - wanted.keys()):
            reset(ctx, key)
        return statuses

    controller = TransformController(
        "runtime.KernelParamSpecController",
        inputs=[Input(KERNEL_PARAM_DEFAULT_SPECS), Input(KERNEL_PARAM_SPECS)],
        output=KERNEL_PARAM_STATUSES, map_inputs=derive,
    )  # fmt: skip
    controller.writes = "(/proc/sys, /sys: only what the platform owns)"
    return controller


def kernel_param_controllers(layout: Layout, files: KernelParamFiles | None = None) -> list[TransformController[KernelParamSpecSpec] | TransformController[KernelParamStatusSpec]]:  # fmt: skip
    """Config and defaults -> specs -> the kernel and statuses, in registration order."""
    files = files or KernelParamFiles()
    return [
        kernel_param_config_controller(),
        kernel_param_defaults_controller(layout, files),
        kernel_param_spec_controller(layout, files),
    ]
