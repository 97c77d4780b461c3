"""``machine.kernel.modules``: Talos's KernelModuleSpecs, loading with modprobe on a node whose
kernel is its own, a failure named with modprobe's and the kernel's reason, and the rule that a node
sharing the host's kernel never loads anything into it.

Nothing here loads a module: the controller tests hand the controller a recording loader, and the
loader tests run a fake ``modprobe`` (a shell script) against a fake ``/dev/kmsg`` (a file).
"""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest
from controller_helpers import apply, config, run, running

from ichor.machined.controllers import kernel_module
from ichor.machined.cosi import WAIT_STATUSES, Registry, assert_no_resource, assert_resource, spec_to_plain
from ichor.machined.kernelmodules import (
    InvalidModuleError,
    KernelModuleError,
    check_module,
    kernel_lines,
    load_module,
)
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import KERNEL_MODULE_SPECS, KernelModuleSpecSpec, register_node_types
from ichor.machined.resources._protoenc import decode_spec, encode_spec

MODULES = """  kernel:
    modules:
      - name: hello
        parameters: [greeting=x, count=2]
      - name: br_netfilter
"""
WAIT_ID = "runtime.KernelModuleSpecController"


class Loader:
    """Records every load; modules in ``failing`` raise with their reason (once each if ``once``)."""

    def __init__(self, failing: dict[str, str] | None = None, *, once: bool = False) -> None:
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.failing = dict(failing or {})
        self.once = once

    async def __call__(self, name: str, parameters: Sequence[str]) -> None:
        self.calls.append((name, tuple(parameters)))
        reason = self.failing.pop(name, None) if self.once else self.failing.get(name)
        if reason is not None:
            raise KernelModuleError(name, reason)


def _layout(root: Path, platform: Platform) -> Layout:
    return Layout(root, "10.5.0.2", platform=platform, own_netns=platform.owns_kernel)


def test_definition_and_wire_form_are_talos_ones() -> None:
    registry = Registry()
    register_node_types(registry)
    spec = registry.get("KernelModuleSpecs.runtime.talos.dev").spec
    assert (spec.default_namespace, spec.declared_aliases, spec.print_columns) == (
        "runtime",
        ("modules",),
        (),
    )
    module = KernelModuleSpecSpec(name="hello", parameters=("greeting=x",))
    assert spec_to_plain(module) == {"string": "hello", "parameters": ["greeting=x"]}  # Talos's yaml tag
    data = encode_spec("KernelModuleSpecs.runtime.talos.dev", module)
    assert decode_spec("KernelModuleSpecs.runtime.talos.dev", data or b"") == {  # proto field 1 is name
        "name": "hello", "parameters": ["greeting=x"]}  # fmt: skip


def test_only_a_node_with_its_own_kernel_may_load_modules(tmp_path: Path) -> None:
    assert _layout(tmp_path, Platform.METAL).kernel_module_refusal() is None
    container = _layout(tmp_path, Platform.CONTAINER).kernel_module_refusal() or ""
    process = _layout(tmp_path, Platform.PROCESS).kernel_module_refusal() or ""
    assert container.startswith("not loaded: a container node shares the host's kernel"), container
    assert process.startswith("not loaded: a process node shares the host's kernel"), process


def test_metal_node_loads_each_module_once_with_its_parameters(tmp_path: Path) -> None:
    loader, console = Loader(), []

    async def main() -> None:
        layout = _layout(tmp_path, Platform.METAL)
        async with running(
            *kernel_module.kernel_module_controllers(layout, loader, say=console.append)
        ) as state:
            apply(state, config(extra_machine=MODULES))
            await assert_resource(
                state, KERNEL_MODULE_SPECS, "hello", lambda r: r.spec.parameters == ("greeting=x", "count=2")
            )
            await assert_resource(
                state, KERNEL_MODULE_SPECS, "br_netfilter", lambda r: r.spec.parameters == ()
            )
            while len(loader.calls) < 2:
                await asyncio.sleep(0.01)
            assert sorted(loader.calls) == [("br_netfilter", ()), ("hello", ("greeting=x", "count=2"))]
            # New parameters for a loaded module wait for the next boot (Talos: "changes applied
            # after reboot"); a module dropped from the config is not unloaded.
            apply(state, config(extra_machine=MODULES.replace("count=2", "count=3")))
            await assert_resource(
                state, KERNEL_MODULE_SPECS, "hello", lambda r: "count=3" in r.spec.parameters
            )
            apply(state, config())
            await assert_no_resource(state, KERNEL_MODULE_SPECS, "hello")
            await asyncio.sleep(0.05)
            assert len(loader.calls) == 2, loader.calls
            assert state.spec_of(WAIT_STATUSES, WAIT_ID) is None

    run(main)
    assert "kernel module hello loaded with greeting=x count=2" in console, console


def test_a_module_that_fails_is_named_with_its_reason_and_tried_again(tmp_path: Path) -> None:
    reason = "modprobe: ERROR: could not insert 'hello': Invalid argument (kernel: hello: Unknown parameter `bogus')"
    loader, console = Loader({"hello": reason}, once=True), []

    async def main() -> None:
        layout = _layout(tmp_path, Platform.METAL)
        controllers = [
            kernel_module.kernel_module_config_controller(),
            kernel_module.KernelModuleSpecController(layout, loader, say=console.append, retry_after=0.2),
        ]
        async with running(*controllers) as state:
            apply(state, config(extra_machine=MODULES))
            wait = await assert_resource(state, WAIT_STATUSES, WAIT_ID)
            assert wait.spec.waiting_for == "kernel modules loaded"
            assert wait.spec.reason == f'error loading module "hello": {reason}'
            assert ("br_netfilter", ()) in loader.calls  # one failure does not stop the others
            await assert_no_resource(state, WAIT_STATUSES, WAIT_ID, timeout=5)  # loaded on the retry
            assert loader.calls.count(("hello", ("greeting=x", "count=2"))) == 2

    run(main)
    assert f"kernel module hello failed to load: {reason}" in console, console
    assert "kernel module hello loaded with greeting=x count=2" in console, console


@pytest.mark.parametrize("platform", [Platform.CONTAINER, Platform.PROCESS])
def test_a_node_sharing_the_hosts_kernel_publishes_specs_and_loads_nothing(
    tmp_path: Path, platform: Platform
) -> None:
    loader, console = Loader(), []

    async def main() -> None:
        layout = _layout(tmp_path, platform)
        async with running(
            *kernel_module.kernel_module_controllers(layout, loader, say=console.append)
        ) as state:
            apply(state, config(extra_machine=MODULES))
            await assert_resource(state, KERNEL_MODULE_SPECS, "hello")
            wait = await assert_resource(state, WAIT_STATUSES, WAIT_ID, lambda r: "hello" in r.spec.reason)
            assert wait.spec.reason.startswith(
                f"br_netfilter, hello not loaded: a {platform.value} node shares the host's kernel"
            ), wait.spec.reason
            apply(state, config())
            await assert_no_resource(state, WAIT_STATUSES, WAIT_ID)

    run(main)
    assert loader.calls == []
    assert [line for line in console if "not loaded" in line] == [
        f"kernel modules br_netfilter, hello {Platform(platform).kernel_module_refusal()}"
    ]


def test_a_name_modprobe_would_take_for_an_option_never_reaches_it(tmp_path: Path) -> None:
    loader, console = Loader(), []

    async def main() -> None:
        layout = _layout(tmp_path, Platform.METAL)
        async with running(
            *kernel_module.kernel_module_controllers(layout, loader, say=console.append)
        ) as state:
            apply(
                state,
                config(
                    extra_machine="  kernel:\n    modules:\n      - name: --remove\n      - name: dummy\n"
                ),
            )
            wait = await assert_resource(state, WAIT_STATUSES, WAIT_ID)
            assert wait.spec.reason.startswith('error loading module "--remove": not a kernel module name')
            while not loader.calls:
                await asyncio.sleep(0.01)

    run(main)
    assert loader.calls == [("dummy", ())]
    assert any(
        line.startswith("kernel module --remove failed to load: not a kernel module name") for line in console
    )


def test_a_module_without_a_name_names_the_config_key(tmp_path: Path) -> None:
    async def main() -> None:
        async with running(kernel_module.kernel_module_config_controller()) as state:
            apply(state, config(extra_machine="  kernel:\n    modules:\n      - parameters: [a=1]\n"))
            wait = await assert_resource(state, WAIT_STATUSES, "runtime.KernelModuleConfigController")
            assert wait.spec.reason == "module 0 has no name (fix machine.kernel.modules)"

    run(main)


@pytest.mark.parametrize(
    ("name", "parameters"),
    [("-r", []), ("--remove", []), ("a/b", []), ("", []), ("hello", ["-v"]), ("hello", ["a=1\nb"])],
)
def test_what_modprobe_would_read_as_an_option_is_refused(name: str, parameters: list[str]) -> None:
    with pytest.raises(InvalidModuleError, match=r"fix machine\.kernel\.modules"):
        check_module(name, parameters)


def test_kernel_lines_are_the_ones_about_the_module() -> None:
    records = (
        b"6,901,5000,-;hello: loading out-of-tree module taints kernel.\n"
        b" SUBSYSTEM=module\n"
        b"3,902,5001,-;my_mod: Unknown parameter `bogus'\n"
        b"6,903,5002,-;virtio_net virtio0 eth0: renamed\n"
    )
    assert kernel_lines(records, "hello") == ["hello: loading out-of-tree module taints kernel."]
    assert kernel_lines(records, "my-mod") == ["my_mod: Unknown parameter `bogus'"]


def _fake_modprobe(where: Path, kmsg: Path, *, fail: bool) -> Path:
    script = where / "modprobe"
    body = f'printf "%s\\n" "$@" > {where}/argv\n'
    if fail:
        body += (
            f"printf '3,77,1000,-;hello: Unknown parameter `bogus'\"'\"'\\n' >> {kmsg}\n"
            "echo \"modprobe: ERROR: could not insert 'hello': Invalid argument\" >&2\nexit 1\n"
        )
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_load_runs_modprobe_with_the_parameters_after_the_name(tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_bytes(b"6,1,1,-;hello: from an earlier boot\n")
    load_module(
        "hello", ["greeting=x", "count=2"], modprobe=_fake_modprobe(tmp_path, kmsg, fail=False), kmsg=kmsg
    )
    assert (tmp_path / "argv").read_text().split("\n") == ["--", "hello", "greeting=x", "count=2", ""]


def test_a_failed_load_says_what_modprobe_and_the_kernel_said(tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_bytes(b"6,1,1,-;hello: from before this load\n")
    with pytest.raises(KernelModuleError) as caught:
        load_module("hello", ["bogus=1"], modprobe=_fake_modprobe(tmp_path, kmsg, fail=True), kmsg=kmsg)
    assert caught.value.reason == (
        "modprobe: ERROR: could not insert 'hello': Invalid argument (kernel: hello: Unknown parameter `bogus')"
    )
    assert str(caught.value).startswith('error loading module "hello": ')


def test_a_missing_modprobe_is_a_reason_too(tmp_path: Path) -> None:
    with pytest.raises(KernelModuleError, match=r"cannot start .*no-modprobe"):
        load_module("hello", [], modprobe=tmp_path / "no-modprobe", kmsg=None)


def test_ci_installs_the_headers_of_the_images_kernel() -> None:
    """The module in the VM test is built against the pinned kernel's headers: when the pin moves,
    scripts/os-packages.txt must name the new headers package, or CI builds for a kernel it lacks."""
    repo = Path(__file__).resolve().parent.parent
    pins = (repo / "src/ichor/imager/pins/debs.lock").read_text().splitlines()
    image = next(line.split()[0] for line in pins if line.startswith("linux-image-"))
    headers = "linux-headers-" + image.removeprefix("linux-image-")
    packages = [line.split() for line in (repo / "scripts/os-packages.txt").read_text().splitlines()]
    assert [headers, f"/usr/src/{headers}/Makefile"] in packages, headers
