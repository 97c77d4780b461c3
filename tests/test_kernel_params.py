"""``machine.sysctls`` (002:692-704): Talos's key forms, its resources and controllers, and the rule
that a node sharing the host's kernel never changes a host-wide setting.

Every write goes to a fake ``/proc/sys`` under a temporary directory: these tests never touch the
machine's kernel parameters.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest
from controller_helpers import apply, config, run, running

from ichor.machined.controllers import kernel_param
from ichor.machined.cosi import Registry, assert_no_resource, assert_resource
from ichor.machined.kernelparams import KernelParamFiles, param_path
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import (
    KERNEL_PARAM_DEFAULT_SPECS,
    KERNEL_PARAM_SPECS,
    KERNEL_PARAM_STATUSES,
    KernelParamStatusSpec,
    register_node_types,
)
from ichor.machined.resources._protoenc import decode_spec, encode_spec

SYSCTLS = """  sysctls:
    net.ipv4.tcp_fin_timeout: "33"
    net/ipv6/conf/eth0.100/disable_ipv6: "1"
    vm.swappiness: "11"
"""


def _proc(root: Path) -> KernelParamFiles:
    """A fake /proc/sys with the keys the tests use and Talos's defaults touch."""
    for name, value in {
        "net/ipv4/tcp_fin_timeout": "60", "net/ipv6/conf/eth0.100/disable_ipv6": "0", "vm/swappiness": "60",
        "net/ipv4/ip_forward": "0", "net/ipv4/tcp_keepalive_time": "7200", "net/ipv4/tcp_keepalive_intvl": "75",
        "kernel/panic": "0", "kernel/pid_max": "4194304", "vm/overcommit_memory": "0",
        "fs/inotify/max_user_instances": "128", "fs/aio-max-nr": "65536",
    }.items():  # fmt: skip
        path = root / "proc/sys" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    return KernelParamFiles(root)


def _layout(root: Path, platform: Platform) -> Layout:
    return Layout(root / "node", "10.5.0.2", platform=platform, own_netns=platform.owns_kernel)


def _value(root: Path, name: str) -> str:
    return (root / "proc/sys" / name).read_text().strip()


@pytest.mark.parametrize(
    ("key", "path"),
    [
        ("proc.sys.net.ipv4.ip_forward", "/proc/sys/net/ipv4/ip_forward"),
        ("proc.sys.net/ipv6/conf/eth0.100/disable_ipv6", "/proc/sys/net/ipv6/conf/eth0.100/disable_ipv6"),
        ("proc.sys.net.ipv6.conf.eth0/100.disable_ipv6", "/proc/sys/net/ipv6/conf/eth0.100/disable_ipv6"),
        ("sys.kernel.mm.transparent_hugepage.enabled", "/sys/kernel/mm/transparent_hugepage/enabled"),
        ("sys.kernel/mm/transparent_hugepage/enabled", "/sys/kernel/mm/transparent_hugepage/enabled"),
    ],
)
def test_key_forms_follow_sysctl_conf_as_talos_does(key: str, path: str) -> None:
    assert param_path(key) == PurePosixPath(path)


def test_a_key_cannot_leave_its_tree() -> None:
    with pytest.raises(ValueError, match="leaves its tree"):
        param_path("proc.sys.net/../../etc/shadow")


def test_the_platform_decides_what_a_node_may_change() -> None:
    net, kernel = PurePosixPath("/proc/sys/net/ipv4/ip_forward"), PurePosixPath("/proc/sys/kernel/panic")
    assert Platform.METAL.kernel_param_refusal(kernel) is None
    assert Platform.CONTAINER.kernel_param_refusal(net) is None
    assert "host" in (Platform.CONTAINER.kernel_param_refusal(kernel) or "")
    assert "host" in (Platform.CONTAINER.kernel_param_refusal(PurePosixPath("/sys/kernel/mm/x")) or "")
    assert "process node" in (Platform.PROCESS.kernel_param_refusal(net) or "")
    # A container layout outside a network namespace of its own never writes the host's net.* keys.
    shared = Layout(Path("/n"), "10.5.0.2", platform=Platform.CONTAINER, own_netns=False)
    assert "host's network namespace" in (shared.kernel_param_refusal(net) or "")
    assert (
        Layout(Path("/n"), "10.5.0.2", platform=Platform.CONTAINER, own_netns=True).kernel_param_refusal(net)
        is None
    )


def test_definitions_are_talos_ones() -> None:
    registry = Registry()
    register_node_types(registry)
    status = registry.get("KernelParamStatuses.runtime.talos.dev").spec
    assert (status.default_namespace, list(status.aliases)) == (
        "runtime", ["sysctls", "kernelparameters", "kernelparams", "kernelparamstatus", "kps"])  # fmt: skip
    assert [(c.name, c.json_path) for c in status.print_columns] == [
        ("Current", "{.current}"), ("Default", "{.default}"), ("Unsupported", "{.unsupported}")]  # fmt: skip
    for name in ("KernelParamSpecs.runtime.talos.dev", "KernelParamDefaultSpecs.runtime.talos.dev"):
        spec = registry.get(name).spec
        assert (spec.default_namespace, spec.declared_aliases, spec.print_columns) == ("runtime", (), ())


def test_status_reaches_talos_clients_in_talos_fields() -> None:
    spec = KernelParamStatusSpec(current="60", default="60", unsupported=True, reason="refused: ...")
    decoded = decode_spec("KernelParamStatuses.runtime.talos.dev", encode_spec("KernelParamStatuses.runtime.talos.dev", spec) or b"")  # fmt: skip
    assert decoded == {"current": "60", "default": "60", "unsupported": True}


def test_container_mode_defaults_leave_out_bridge_and_kspp_keys() -> None:
    container = kernel_param.talos_defaults("container", ipv6=False)
    metal = kernel_param.talos_defaults("metal", ipv6=True)
    assert container["proc.sys.net.ipv4.ip_forward"] == "1" and container["proc.sys.kernel.panic"] == "10"
    assert "proc.sys.kernel.kptr_restrict" not in container and metal["proc.sys.kernel.kptr_restrict"] == "1"
    assert "proc.sys.net.bridge.bridge-nf-call-iptables" in metal
    assert metal["proc.sys.net.ipv6.conf.default.accept_ra"] == "2"


def test_container_node_applies_net_keys_and_refuses_host_ones(tmp_path: Path) -> None:
    files = _proc(tmp_path)

    async def main() -> None:
        async with running(
            *kernel_param.kernel_param_controllers(_layout(tmp_path, Platform.CONTAINER), files)
        ) as state:
            apply(state, config(extra_machine=SYSCTLS))
            await assert_resource(
                state, KERNEL_PARAM_SPECS, "proc.sys.vm.swappiness", lambda r: r.spec.value == "11"
            )
            await assert_resource(state, KERNEL_PARAM_DEFAULT_SPECS, "proc.sys.kernel.panic")
            await assert_resource(
                state, KERNEL_PARAM_STATUSES, "proc.sys.net.ipv4.tcp_fin_timeout",
                lambda r: (r.spec.current, r.spec.default, r.spec.unsupported) == ("33", "60", False),
            )  # fmt: skip
            await assert_resource(
                state, KERNEL_PARAM_STATUSES, "proc.sys.net/ipv6/conf/eth0.100/disable_ipv6",
                lambda r: r.spec.current == "1",
            )  # fmt: skip
            swappiness = await assert_resource(
                state, KERNEL_PARAM_STATUSES, "proc.sys.vm.swappiness", lambda r: r.spec.unsupported
            )
            assert swappiness.spec.current == "60" and "container node" in swappiness.spec.reason
            panic = await assert_resource(state, KERNEL_PARAM_STATUSES, "proc.sys.kernel.panic",
                                          lambda r: r.spec.unsupported)  # fmt: skip
            assert "host" in panic.spec.reason
            await assert_resource(state, KERNEL_PARAM_STATUSES, "proc.sys.net.ipv4.ip_forward",
                                  lambda r: r.spec.current == "1" and not r.spec.unsupported)  # fmt: skip
            assert _value(tmp_path, "net/ipv4/tcp_fin_timeout") == "33"
            assert _value(tmp_path, "net/ipv4/ip_forward") == "1"

            # Dropped from the config: the value from before the node wrote it is back.
            apply(state, config())
            await assert_no_resource(state, KERNEL_PARAM_STATUSES, "proc.sys.net.ipv4.tcp_fin_timeout")
            assert _value(tmp_path, "net/ipv4/tcp_fin_timeout") == "60"

    run(main)
    for name, value in {"vm/swappiness": "60", "kernel/panic": "0", "vm/overcommit_memory": "0",
                        "kernel/pid_max": "4194304", "fs/aio-max-nr": "65536"}.items():  # fmt: skip
        assert _value(tmp_path, name) == value, f"{name} changed on a shared kernel"


def test_process_node_changes_nothing(tmp_path: Path) -> None:
    files = _proc(tmp_path)
    before = {p: p.read_text() for p in (tmp_path / "proc/sys").rglob("*") if p.is_file()}

    async def main() -> None:
        async with running(
            *kernel_param.kernel_param_controllers(_layout(tmp_path, Platform.PROCESS), files)
        ) as state:
            apply(state, config(extra_machine=SYSCTLS))
            status = await assert_resource(state, KERNEL_PARAM_STATUSES, "proc.sys.net.ipv4.tcp_fin_timeout",
                                           lambda r: r.spec.unsupported)  # fmt: skip
            assert status.spec.current == "60" and "process node" in status.spec.reason
            await assert_resource(state, KERNEL_PARAM_STATUSES, "proc.sys.net.ipv4.ip_forward",
                                  lambda r: r.spec.unsupported)  # fmt: skip

    run(main)
    assert {p: p.read_text() for p in (tmp_path / "proc/sys").rglob("*") if p.is_file()} == before


def test_metal_node_applies_every_key_and_says_which_it_lacks(tmp_path: Path) -> None:
    files = _proc(tmp_path)

    async def main() -> None:
        async with running(
            *kernel_param.kernel_param_controllers(_layout(tmp_path, Platform.METAL), files)
        ) as state:
            apply(state, config(extra_machine=SYSCTLS + '    net.no.such_key: "1"\n'))
            await assert_resource(state, KERNEL_PARAM_STATUSES, "proc.sys.vm.swappiness",
                                  lambda r: (r.spec.current, r.spec.unsupported) == ("11", False))  # fmt: skip
            await assert_resource(state, KERNEL_PARAM_STATUSES, "proc.sys.kernel.panic",
                                  lambda r: r.spec.current == "10")  # fmt: skip
            missing = await assert_resource(state, KERNEL_PARAM_STATUSES, "proc.sys.net.no.such_key",
                                            lambda r: r.spec.unsupported)  # fmt: skip
            assert missing.spec.reason == "no such kernel parameter: /proc/sys/net/no/such_key"

    run(main)
    assert _value(tmp_path, "vm/swappiness") == "11" and _value(tmp_path, "kernel/panic") == "10"
