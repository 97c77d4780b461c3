from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from ichor.machined.controllers import config as config_area
from ichor.machined.controllers import network, secrets
from ichor.machined.cosi import Registry, Runtime, State, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    HOSTNAME_STATUSES,
    MACHINE_CONFIGS,
    MACHINE_TYPES,
    MachineConfigSpec,
    register_node_types,
)

CONFIG = "version: v1alpha1\nmachine:\n  type: {type}\n  network: {network}\ncluster: {{}}\n"


def test_machine_type_and_hostname_follow_the_config(tmp_path: Path) -> None:
    async def go() -> None:
        state = State()
        registry = Registry()
        register_node_types(registry)
        runtime = Runtime(state, registry=registry)
        runtime.register(config_area.machine_type_controller())
        runtime.register(network.hostname_controller(Layout(root=tmp_path, address="127.5.0.9")))
        task = asyncio.create_task(runtime.run())
        try:
            state.create(
                MACHINE_CONFIGS.new("v1alpha1", MachineConfigSpec(CONFIG.format(type="init", network="{}")))
            )
            await assert_resource(state, MACHINE_TYPES, "machine-type", lambda r: r.spec == "controlplane")
            await assert_resource(
                state, HOSTNAME_STATUSES, "hostname", lambda r: r.spec.hostname == "talos-127-5-0-9"
            )
            current = state.get(MACHINE_CONFIGS.default_namespace, MACHINE_CONFIGS, "v1alpha1")
            text = CONFIG.format(type="worker", network="{hostname: node-7.lab.example}")
            state.update(current.with_spec(MachineConfigSpec(text)))
            await assert_resource(state, MACHINE_TYPES, "machine-type", lambda r: r.spec == "worker")
            await assert_resource(
                state, HOSTNAME_STATUSES, "hostname",
                lambda r: (r.spec.hostname, r.spec.domainname) == ("node-7", "lab.example"),
            )  # fmt: skip
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(go(), 10))


def test_secrets_and_addresses_follow_the_config(tmp_path: Path) -> None:
    import base64
    import ipaddress

    from ichor.machined.resources import CERT_SANS, NODE_ADDRESSES, OS_ROOT_SECRETS
    from ichor.machinery import pki

    ca = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    b64 = base64.b64encode
    config = (
        "version: v1alpha1\nmachine:\n  type: controlplane\n  token: abc.def\n"
        f"  ca: {{crt: {b64(ca.crt).decode()}, key: {b64(ca.key).decode()}}}\n"
        "  certSANs: [10.9.9.9, api.example.org]\n  network: {hostname: cp-1.lab}\ncluster: {}\n"
    )

    async def go() -> None:
        state = State()
        registry = Registry()
        register_node_types(registry)
        runtime = Runtime(state, registry=registry)
        layout = Layout(root=tmp_path, address="127.5.0.9")
        runtime.register(network.hostname_controller(layout))
        runtime.register(network.node_address_controller(layout))
        runtime.register(secrets.os_root_controller())
        runtime.register(secrets.cert_san_controller())
        task = asyncio.create_task(runtime.run())
        try:
            state.create(MACHINE_CONFIGS.new("v1alpha1", MachineConfigSpec(config)))
            await assert_resource(
                state, NODE_ADDRESSES, "current",
                lambda r: r.spec.addresses == (ipaddress.ip_interface("127.5.0.9/32"),),
            )  # fmt: skip
            await assert_resource(
                state, OS_ROOT_SECRETS, "os",
                lambda r: r.spec.token == "abc.def" and r.spec.issuing_ca.key == ca.key
                and r.spec.cert_san_dns_names == ("api.example.org",),
            )  # fmt: skip
            await assert_resource(
                state, CERT_SANS, "api",
                lambda r: [str(ip) for ip in r.spec.ips] == ["10.9.9.9", "127.5.0.9"]
                and r.spec.dns_names == ("api.example.org", "cp-1", "cp-1.lab") and r.spec.fqdn == "cp-1.lab",
            )  # fmt: skip
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(go(), 10))
