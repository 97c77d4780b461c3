"""Controllers of the etcd, secrets (API certificates) and runtime areas, each in a real runtime:
inputs seeded into a State, outputs awaited with ``assert_resource``."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from ichor.api.gen.machine import machine_pb2
from ichor.machined.controllers import config as config_area
from ichor.machined.controllers import etcd as etcd_area
from ichor.machined.controllers import network, runtime, secrets
from ichor.machined.cosi import (
    WAIT_STATUSES,
    Controller,
    Registry,
    Runtime,
    Source,
    State,
    assert_no_resource,
    assert_resource,
)
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ACQUIRE_CONFIG_STATUSES,
    API_CERTIFICATES,
    ETCD_CONFIGS,
    ETCD_ROOT_SECRETS,
    ETCD_SPECS,
    MACHINE_CONFIGS,
    MACHINE_STATUSES,
    SERVICES,
    TIME_STATUSES,
    MachineConfigSpec,
    MachineStage,
    register_node_types,
)
from ichor.machined.services import ServiceInfo
from ichor.machinery import pki

ADDRESS = "127.5.0.9"


def _config(*, type: str = "controlplane", ca: pki.CertKey | None = None, etcd: str = "{}") -> str:
    b64 = base64.b64encode
    ca_yaml = (
        f"{{crt: {b64(ca.crt).decode()}, key: {b64(ca.key).decode() if ca.has_key else ''}}}" if ca else "{}"
    )
    return (
        f"version: v1alpha1\nmachine:\n  type: {type}\n  token: abc.def\n  ca: {ca_yaml}\n"
        f"  network: {{hostname: cp-1.lab}}\ncluster:\n  controlPlane: {{endpoint: 'https://10.0.0.1:6443'}}\n"
        f"  etcd: {etcd}\n"
    )


@asynccontextmanager
async def _running(tmp_path: Path, *controllers: Controller) -> AsyncIterator[State]:
    state = State()
    registry = Registry()
    register_node_types(registry)
    rt = Runtime(state, registry=registry)
    for controller in controllers:
        rt.register(controller)
    task = asyncio.create_task(rt.run())
    try:
        yield state
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _apply(state: State, text: str) -> None:
    existing = state.list("config", MACHINE_CONFIGS)
    if existing:
        state.update(existing[0].with_spec(MachineConfigSpec(text)))
    else:
        state.create(MACHINE_CONFIGS.new("v1alpha1", MachineConfigSpec(text)))


def _run(main: Callable[[], Any]) -> None:
    asyncio.run(asyncio.wait_for(main(), 20))


def _config_and_network(layout: Layout) -> list[Controller]:
    return [
        config_area.machine_type_controller(),
        network.hostname_controller(layout),
        network.node_address_controller(layout),
    ]


def test_etcd_spec_follows_the_config_on_control_planes_only(tmp_path: Path) -> None:
    layout = Layout(tmp_path, ADDRESS)

    async def main() -> None:
        controllers = [
            *_config_and_network(layout),
            etcd_area.etcd_config_controller(),
            etcd_area.etcd_spec_controller(),
        ]
        async with _running(tmp_path, *controllers) as state:
            _apply(
                state,
                _config(
                    etcd="{extraArgs: {election-timeout: '5000'}, advertisedSubnets: ['127.0.0.0/8', '!10.0.0.0/8']}"
                ),
            )
            await assert_resource(
                state, ETCD_CONFIGS, "etcd",
                lambda r: r.spec.advertise_valid_subnets == ("127.0.0.0/8",)
                and r.spec.advertise_exclude_subnets == ("10.0.0.0/8",),
            )  # fmt: skip
            spec = await assert_resource(state, ETCD_SPECS, "etcd", lambda r: r.spec.name == "cp-1")
            assert spec.spec.advertised_addresses == (ADDRESS,)
            assert spec.spec.listen_client_addresses == (ADDRESS,)
            assert spec.spec.extra_args == {"election-timeout": "5000"}
            # A subnet no address of the node is in: no spec change, a wait naming the key.
            _apply(state, _config(etcd="{advertisedSubnets: ['10.9.0.0/16']}"))
            await assert_resource(
                state, WAIT_STATUSES, "etcd.SpecController",
                lambda r: "cluster.etcd.advertisedSubnets" in r.spec.reason,
            )  # fmt: skip
            assert state.get("etcd", ETCD_SPECS, "etcd").spec.advertised_addresses == (ADDRESS,)
            # A worker runs no etcd: both resources go away.
            _apply(state, _config(type="worker"))
            await assert_no_resource(state, ETCD_SPECS, "etcd", timeout=2)
            await assert_no_resource(state, ETCD_CONFIGS, "etcd", timeout=2)

    _run(main)


def test_etcd_root_holds_the_etcd_ca(tmp_path: Path) -> None:
    etcd_ca = pki.new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))
    b64 = base64.b64encode

    async def main() -> None:
        async with _running(tmp_path, secrets.etcd_root_controller()) as state:
            _apply(
                state,
                _config(
                    etcd=f"{{ca: {{crt: {b64(etcd_ca.crt).decode()}, key: {b64(etcd_ca.key).decode()}}}}}"
                ),
            )
            await assert_resource(
                state, ETCD_ROOT_SECRETS, "etcd",
                lambda r: r.spec.etcd_ca is not None and r.spec.etcd_ca.crt == etcd_ca.crt
                and r.spec.etcd_ca.key == etcd_ca.key,
            )  # fmt: skip

    _run(main)


def _api_controllers(layout: Layout, request: Any = None) -> list[Controller]:
    return [
        *_config_and_network(layout),
        secrets.os_root_controller(),
        secrets.cert_san_controller(),
        secrets.api_certificates_controller(layout, request),
    ]


def test_a_control_plane_signs_its_own_api_certificates(tmp_path: Path) -> None:
    ca = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    layout = Layout(tmp_path, ADDRESS)

    async def main() -> None:
        async with _running(tmp_path, *_api_controllers(layout)) as state:
            _apply(state, _config(ca=ca))
            certs = await assert_resource(state, API_CERTIFICATES, "api", timeout=10)
            assert certs.spec.server is not None and certs.spec.client is not None
            server = x509.load_pem_x509_certificate(certs.spec.server.crt)
            sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            assert ADDRESS in [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
            assert {"cp-1", "cp-1.lab"} <= set(sans.get_values_for_type(x509.DNSName))
            client = x509.load_pem_x509_certificate(certs.spec.client.crt)
            assert (
                client.subject.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)[0].value
                == "os:impersonator"
            )
            assert [c.crt for c in certs.spec.accepted_cas] == [ca.crt]

    _run(main)


def test_a_worker_asks_trustd_and_says_why_it_waits(tmp_path: Path) -> None:
    ca = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    layout = Layout(tmp_path, ADDRESS)
    answer: dict[str, Any] = {"up": False}
    asked: list[tuple[list[str], str]] = []

    async def request(
        endpoints: list[str], *, os_ca_crt: bytes, token: str, hostname: str, address: str
    ) -> Any:
        asked.append((endpoints, token))
        if not answer["up"]:
            raise ConnectionError("10.0.0.1:50001: connection refused")
        key = pki.new_ed25519_key()
        crt = pki.issue_certificate(ca, key, common_name=hostname, organizations=[], ttl=timedelta(hours=1),
                                    server=True, client=False, ip_addresses=[address])  # fmt: skip
        return pki.CertKey(crt, key), ca.crt

    async def main() -> None:
        async with _running(tmp_path, *_api_controllers(layout, request)) as state:
            _apply(state, _config(type="worker", ca=pki.CertKey(ca.crt, b"")))
            await assert_resource(
                state, WAIT_STATUSES, "secrets.APIController",
                lambda r: r.spec.waiting_for == "a server certificate from trustd"
                and "connection refused" in r.spec.reason,
                timeout=5,
            )  # fmt: skip
            assert asked[0] == (["10.0.0.1"], "abc.def")
            answer["up"] = True
            certs = await assert_resource(state, API_CERTIFICATES, "api", timeout=10)
            assert certs.spec.client is None and [c.crt for c in certs.spec.accepted_cas] == [ca.crt]
            await assert_no_resource(state, WAIT_STATUSES, "secrets.APIController", timeout=2)

    _run(main)


def test_machine_status_follows_the_sequencer_stage_and_is_an_event(tmp_path: Path) -> None:
    stage: Source[MachineStage] = Source("stage", MachineStage.BOOTING)
    events = EventBus()

    async def main() -> None:
        async with _running(tmp_path, runtime.MachineStatusController(stage, events)) as state:
            await assert_resource(
                state, MACHINE_STATUSES, "machine", lambda r: r.spec.stage is MachineStage.BOOTING
            )
            stage.set(MachineStage.RUNNING)
            status = await assert_resource(
                state, MACHINE_STATUSES, "machine", lambda r: r.spec.stage is MachineStage.RUNNING
            )
            assert status.spec.status.ready
            published = [e.payload for e in events._backlog(10, "", 0)]
            stages = [p.stage for p in published if isinstance(p, machine_pb2.MachineStatusEvent)]
            assert stages == [machine_pb2.MachineStatusEvent.BOOTING, machine_pb2.MachineStatusEvent.RUNNING]

    _run(main)


def _info(
    service_id: str, *, running: bool, healthy: bool | None, waiting_for: str | None = None
) -> ServiceInfo:
    from ichor.machined.services import HealthStatus, ServiceState

    return ServiceInfo(
        id=service_id, description=service_id, state=ServiceState.RUNNING if running else ServiceState.WAITING,
        health=HealthStatus(healthy=healthy), events=(), running=running, up=running and bool(healthy),
        waiting_for=waiting_for, waiting_since=None, has_health_check=True,
    )  # fmt: skip


def test_services_and_their_waits_follow_the_supervisor(tmp_path: Path) -> None:
    services: Source[Mapping[str, ServiceInfo]] = Source("services", {})

    async def main() -> None:
        async with _running(tmp_path, runtime.ServiceController(services)) as state:
            services.set({"etcd": _info("etcd", running=False, healthy=None, waiting_for="time sync")})
            await assert_resource(state, SERVICES, "etcd", lambda r: not r.spec.running)
            await assert_resource(
                state, WAIT_STATUSES, "service-etcd",
                lambda r: r.spec.waiting_for == "service etcd: time sync",
            )  # fmt: skip
            services.set({"etcd": _info("etcd", running=True, healthy=True)})
            await assert_resource(state, SERVICES, "etcd", lambda r: r.spec.running and r.spec.healthy)
            await assert_no_resource(state, WAIT_STATUSES, "service-etcd", timeout=2)
            services.set({})
            await assert_no_resource(state, SERVICES, "etcd", timeout=2)

    _run(main)


def test_time_is_synced_and_a_config_is_acquired(tmp_path: Path) -> None:
    async def main() -> None:
        async with _running(
            tmp_path, runtime.time_status_controller(), config_area.acquire_status_controller()
        ) as state:
            status = await assert_resource(state, TIME_STATUSES, "node")
            assert status.spec.synced and status.spec.sync_disabled
            await assert_no_resource(state, ACQUIRE_CONFIG_STATUSES, "machine-config", timeout=0.2)
            _apply(state, _config())
            await assert_resource(state, ACQUIRE_CONFIG_STATUSES, "machine-config")

    _run(main)


@pytest.mark.parametrize("kind", ["controlplane", "init"])
def test_init_is_a_control_plane(tmp_path: Path, kind: str) -> None:
    spec = MachineConfigSpec(_config(type=kind)).v1alpha1
    assert spec is not None
    assert config_area.machine_type_of(spec) == "controlplane"
