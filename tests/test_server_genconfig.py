"""GenerateConfiguration as Talos's ``configuration.Generate``: a config from the request, with the
node's own secrets; Talos's refusals and texts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.machinery.clientconfig import TalosConfig
from ichor.machinery.config import Mode, load_config, validate
from ichor.machinery.generate import GenOptions, OutputType, generate
from ichor.machinery.secrets import SecretsBundle
from ichor.machinery.yamlio import load_documents

M = machine_pb2.MachineConfig


def _request(
    machine_type: int = M.TYPE_WORKER, **machine: object
) -> machine_pb2.GenerateConfigurationRequest:
    return machine_pb2.GenerateConfigurationRequest(
        config_version="v1alpha1",
        cluster_config=machine_pb2.ClusterConfig(
            name="lab", control_plane=machine_pb2.ControlPlaneConfig(endpoint="https://10.5.0.2:6443")
        ),
        machine_config=machine_pb2.MachineConfig(type=machine_type, **machine),  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def node() -> tuple[SecretsBundle, str]:
    bundle = SecretsBundle.load(
        Path(__file__).parent / "data/talos/secrets.yaml"
    )  # generating one takes ~1 s
    text = generate(bundle, GenOptions(cluster_name="lab", endpoint="https://10.5.0.2:6443"),
                    output_types=(OutputType.CONTROLPLANE,)).outputs[OutputType.CONTROLPLANE]  # fmt: skip
    return bundle, text


def _gen(
    request: machine_pb2.GenerateConfigurationRequest, node_type: str, node_config: str | None
) -> machine_pb2.GenerateConfiguration:
    from ichor.machined.server._genconfig import generate_configuration

    return generate_configuration(request, node_type=node_type, node_config=node_config,
                                  now=datetime(2026, 1, 2, tzinfo=UTC))  # fmt: skip


def test_a_worker_config_joins_this_cluster(node: tuple[SecretsBundle, str]) -> None:
    bundle, text = node
    request = _request(
        kubernetes_version="v1.30.1",
        install_config=machine_pb2.InstallConfig(install_disk="/dev/vdb"),
        network_config=machine_pb2.NetworkConfig(
            hostname="w1",
            interfaces=[
                machine_pb2.NetworkDeviceConfig(
                    interface="eth0",
                    cidr="10.5.0.9/24",
                    mtu=1400,
                    routes=[machine_pb2.RouteConfig(network="0.0.0.0/0", gateway="10.5.0.1")],
                )
            ],
        ),
    )
    request.cluster_config.cluster_network.dns_domain = "lab.local"
    reply = _gen(request, "controlplane", text)
    (data,) = reply.data
    (doc,) = load_documents(data)
    assert doc["machine"]["type"] == "worker"
    assert (
        doc["machine"]["token"] == bundle.trustd_token and doc["cluster"]["token"] == bundle.bootstrap_token
    )
    assert doc["machine"]["kubelet"]["image"].endswith(":v1.30.1")
    assert doc["machine"]["install"]["disk"] == "/dev/vdb"
    assert doc["machine"]["network"] == {
        "hostname": "w1",
        "interfaces": [{"interface": "eth0", "cidr": "10.5.0.9/24", "mtu": 1400, "dhcp": False, "ignore": False,
                        "routes": [{"network": "0.0.0.0/0", "gateway": "10.5.0.1"}]}],
    }  # fmt: skip
    assert doc["cluster"]["network"]["dnsDomain"] == "lab.local"
    assert b"# " in data  # documented, as Talos's encoder writes by default
    assert not validate(load_config(data), Mode.METAL).errors
    talosconfig = TalosConfig.from_yaml(reply.talosconfig.decode())
    assert talosconfig.context == "lab" and talosconfig.contexts["lab"].endpoints == ["10.5.0.2"]
    assert talosconfig.contexts["lab"].ca == bundle.os.crt_b64()


def test_init_and_control_plane_options(node: tuple[SecretsBundle, str]) -> None:
    _, text = node
    request = _request(M.TYPE_INIT)
    request.cluster_config.allow_scheduling_on_control_planes = True
    request.cluster_config.cluster_network.cni_config.name = "none"
    (doc,) = load_documents(_gen(request, "init", text).data[0])
    assert doc["machine"]["type"] == "init" and doc["cluster"]["allowSchedulingOnControlPlanes"] is True
    assert doc["cluster"]["network"]["cni"] == {"name": "none"}


def test_without_a_node_config_the_secrets_are_new() -> None:
    (doc,) = load_documents(_gen(_request(M.TYPE_CONTROL_PLANE), "", None).data[0])
    assert doc["machine"]["type"] == "controlplane" and doc["machine"]["ca"]["key"]


@pytest.mark.parametrize(
    ("change", "node_type", "text"),
    [
        (lambda r: None, "worker", "config can't be generated on worker nodes"),
        (lambda r: r.ClearField("machine_config"), "controlplane", "invalid generate request"),
        (lambda r: r.cluster_config.ClearField("control_plane"), "controlplane", "invalid generate request"),
        (lambda r: setattr(r, "config_version", "v2"), "controlplane", "unsupported config version v2"),
        (lambda r: setattr(r.machine_config, "type", M.TYPE_UNKNOWN), "controlplane",
         "failed to determine config type to generate"),
    ],
)  # fmt: skip
def test_talos_refusals(node: tuple[SecretsBundle, str], change: object, node_type: str, text: str) -> None:
    request = _request()
    change(request)  # type: ignore[operator]
    with pytest.raises(GRPCError) as refused:
        _gen(request, node_type, node[1])
    assert refused.value.status is Status.UNKNOWN and refused.value.message == text
