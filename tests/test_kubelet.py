"""The kubelet: KubeletConfig/NodeIP/Nodename/KubeletSpec controllers, the files written into the node,
the args and kubelet.yaml rendering, and the ``kubelet`` service's runtime spec."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from controller_helpers import apply, run, running

from ichor.machined.controllers.k8s import kubelet as area
from ichor.machined.controllers.k8s import kubelet_render as render
from ichor.machined.cosi import WAIT_STATUSES, State, assert_resource
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import (
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    NODE_ADDRESS_ROUTED_ID,
    NODE_ADDRESSES,
    HostnameStatusSpec,
    NodeAddressSpec,
)
from ichor.machined.resources._kubelet import (
    KUBELET_CONFIGS,
    KUBELET_SPECS,
    NODE_IP_CONFIGS,
    NODE_IPS,
    NODENAMES,
    KubeletConfigSpec,
    KubeletMount,
    KubeletSpecSpec,
)
from ichor.machined.services import kubelet as service
from ichor.machinery import pki, yamlio
from ichor.machinery.errors import ConfigError

CA = pki.new_ed25519_ca(organization="kubernetes", ttl=timedelta(days=1))


def _ca_b64() -> str:
    return base64.b64encode(CA.crt).decode()


def _config(
    *, type: str = "controlplane", kubelet: str = "{}", features: str = "{}", network: str = "{}"
) -> str:
    return (
        f"version: v1alpha1\nmachine:\n  type: {type}\n  token: abc.def\n  kubelet: {kubelet}\n"
        f"  features: {features}\n  network: {{hostname: Cp-1.lab}}\n"
        f"cluster:\n  controlPlane: {{endpoint: 'https://10.0.0.1:6443'}}\n  token: 'abcdef.0123456789abcdef'\n"
        f"  ca: {{crt: {_ca_b64()}, key: ''}}\n  network: {network}\n"
    )


def _seed_network(state: State, *addresses: str) -> None:
    state.create(HOSTNAME_STATUSES.new(HOSTNAME_STATUS_ID, HostnameStatusSpec("cp-1", "lab")))
    spec = NodeAddressSpec(tuple(ipaddress.ip_interface(a) for a in addresses))
    state.create(NODE_ADDRESSES.new(f"{NODE_ADDRESS_ROUTED_ID}-no-k8s", spec))


# --- rendering ---------------------------------------------------------------------------------


def test_cluster_dns_is_the_tenth_address_of_each_service_subnet() -> None:
    assert render.cluster_dns(["10.96.0.0/12", "fd00:10:96::/112"]) == ("10.96.0.10", "fd00:10:96::a")
    with pytest.raises(ConfigError, match="failed to parse service CIDR") as caught:
        render.cluster_dns(["10.96.0.0/33"])
    assert caught.value.hint is not None and "cluster.network.serviceSubnets" in caught.value.hint


def test_args_are_talos_flags_sorted_with_extra_args_merged() -> None:
    spec = KubeletConfigSpec(extra_args={"rotate-server-certificates": "true", "hostname-override": "x"})
    args = render.kubelet_args(spec, nodename="cp-1", node_ips=["10.5.0.2", "fd00::2"])
    assert args == (
        "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubeconfig",
        "--cert-dir=/var/lib/kubelet/pki",
        "--config=/etc/kubernetes/kubelet.yaml",
        "--hostname-override=x",
        "--kubeconfig=/etc/kubernetes/kubeconfig-kubelet",
        "--node-ip=10.5.0.2,fd00::2",
        "--rotate-server-certificates=true",
    )
    standalone = KubeletConfigSpec(skip_node_registration=True, cloud_provider_external=True)
    args = render.kubelet_args(standalone, nodename="w", node_ips=[])
    assert "--cloud-provider=external" in args
    assert not any(a.startswith(("--kubeconfig", "--bootstrap-kubeconfig", "--node-ip")) for a in args)


@pytest.mark.parametrize("flag", render.DENIED_ARGS)
def test_extra_args_may_not_override_the_flags_talos_owns(flag: str) -> None:
    with pytest.raises(ConfigError, match=f'extra arg "{flag}" is not allowed') as caught:
        render.kubelet_args(KubeletConfigSpec(extra_args={flag: "/x"}), nodename="n", node_ips=[])
    assert caught.value.hint is not None and "machine.kubelet.extraArgs" in caught.value.hint


def test_kubelet_configuration_has_talos_fields_and_extra_config_last() -> None:
    spec = KubeletConfigSpec(
        cluster_dns=("10.96.0.10",), cluster_domain="cluster.local", default_runtime_seccomp_profile_enabled=True,
        static_pod_list_url="http://127.0.0.1:43210/abc",
        extra_config={"maxPods": 50, "systemReserved": {"memory": "256Mi"}, "shutdownGracePeriod": "0s"},
    )  # fmt: skip
    out = render.kubelet_configuration(spec)
    assert out["apiVersion"] == "kubelet.config.k8s.io/v1beta1" and out["kind"] == "KubeletConfiguration"
    assert out["rotateCertificates"] is True and out["protectKernelDefaults"] is True
    assert out["seccompDefault"] is True and out["failSwapOn"] is False
    assert out["systemReserved"] == {
        "cpu": "50m",
        "memory": "256Mi",
        "pid": "100",
        "ephemeral-storage": "256Mi",
    }
    assert out["shutdownGracePeriod"] == "0s" and out["shutdownGracePeriodCriticalPods"] == "10s"
    assert out["resolvConf"] == "/system/resolved/resolv.conf"
    assert out["clusterDNS"] == ["10.96.0.10"] and out["clusterDomain"] == "cluster.local"
    assert out["authentication"]["webhook"] == {"enabled": True}
    assert out["authentication"]["x509"] == {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}
    assert out["authorization"] == {"mode": "Webhook"}
    assert out["staticPodURL"] == "http://127.0.0.1:43210/abc"
    assert out["staticPodPath"] == "/etc/kubernetes/manifests"
    assert out["cgroupDriver"] == "cgroupfs" and out["maxPods"] == 50
    assert "featureGates" not in out
    assert (
        render.kubelet_configuration(KubeletConfigSpec(disable_manifests_directory=True))["staticPodPath"]
        == ""
    )
    standalone = render.kubelet_configuration(KubeletConfigSpec(skip_node_registration=True))
    assert standalone["authorization"] == {"mode": "AlwaysAllow"} and standalone["registerNode"] is False


def test_the_kubelet_fetches_the_static_pod_list_every_second_unless_extra_config_says() -> None:
    url = "http://127.0.0.1:1"
    assert (
        render.kubelet_configuration(KubeletConfigSpec(static_pod_list_url=url))["httpCheckFrequency"] == "1s"
    )
    assert "httpCheckFrequency" not in render.kubelet_configuration(KubeletConfigSpec())
    back = KubeletConfigSpec(static_pod_list_url=url, extra_config={"httpCheckFrequency": "20s"})
    assert render.kubelet_configuration(back)["httpCheckFrequency"] == "20s"


def test_container_platform_keeps_kubelet_off_host_global_settings() -> None:
    out = render.kubelet_configuration(KubeletConfigSpec(), container_platform=True)
    assert out["protectKernelDefaults"] is False
    assert out["featureGates"] == {"KubeletInUserNamespace": True}
    assert out["localStorageCapacityIsolation"] is False and out["cgroupRoot"] == "/"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"maxPods": "many"}, "machine.kubelet.extraConfig.maxPods: expected an integer"),
        ({"failSwapOn": "no"}, "machine.kubelet.extraConfig.failSwapOn: expected a boolean"),
        ({"systemReserved": "1Gi"}, "expected a mapping"),
        ({"maxPods": True}, "expected an integer"),
        ({"authentication": {}}, "'authentication' cannot be overridden"),
        ({"port": 1}, "'port' cannot be overridden"),
    ],
)
def test_wrong_extra_config_is_refused_naming_the_key(extra: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words) as caught:
        render.kubelet_configuration(KubeletConfigSpec(extra_config=extra))
    assert caught.value.hint is not None and "machine.kubelet.extraConfig" in caught.value.hint


def test_bootstrap_kubeconfig_carries_server_ca_and_token() -> None:
    text = render.bootstrap_kubeconfig(server="https://127.0.0.1:7445", ca_pem=b"PEM", token="abc.def")
    doc = yamlio.to_plain(yamlio.load_documents(text)[0])
    assert doc["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:7445", "certificate-authority-data": base64.b64encode(b"PEM").decode()
    }  # fmt: skip
    assert doc["users"][0]["user"] == {"token": "abc.def"}


# --- controllers -------------------------------------------------------------------------------


def test_kubelet_spec_follows_config_node_ip_and_nodename(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "10.5.0.2", platform=Platform.CONTAINER)
    changes: list[int] = []

    async def changed() -> None:
        changes.append(1)

    async def main() -> None:
        async with running(*area.kubelet_controllers(layout, on_change=changed)) as state:
            _seed_network(state, "10.244.0.1/24", "10.5.0.2/24", "fd00::2/64")
            apply(
                state,
                _config(kubelet="{extraArgs: {v: '2'}, registerWithFQDN: true, clusterDNS: [10.0.0.53]}"),
            )
            config = await assert_resource(
                state, KUBELET_CONFIGS, "kubelet", lambda r: r.spec.cluster_dns == ("10.0.0.53",)
            )
            assert config.spec.image == "ghcr.io/siderolabs/kubelet:v1.30.3"
            assert config.spec.cluster_domain == "cluster.local"
            ipconfig = await assert_resource(
                state, NODE_IP_CONFIGS, "kubelet", lambda r: bool(r.spec.valid_subnets)
            )
            assert ipconfig.spec.valid_subnets == ("0.0.0.0/0",)
            assert "10.244.0.0/16" in ipconfig.spec.exclude_subnets
            # the pod-subnet address is excluded, IPv6 is not a family of the cluster
            await assert_resource(state, NODE_IPS, "kubelet", lambda r: r.spec.addresses == ("10.5.0.2",))
            await assert_resource(state, NODENAMES, "nodename", lambda r: r.spec.nodename == "cp-1.lab")
            spec = await assert_resource(
                state, KUBELET_SPECS, "kubelet", lambda r: "--node-ip=10.5.0.2" in r.spec.args
            )
            assert "--hostname-override=cp-1.lab" in spec.spec.args and "--v=2" in spec.spec.args
            assert spec.spec.expected_nodename == "cp-1.lab"
            assert spec.spec.config["protectKernelDefaults"] is False  # container platform
            # files in the node
            kubelet_yaml = layout.path(render.CONFIG_FILE)
            await _until(lambda: kubelet_yaml.is_file() and changes != [])
            written = yamlio.to_plain(yamlio.load_documents(kubelet_yaml.read_text())[0])
            assert written["clusterDNS"] == ["10.0.0.53"]
            boot = yamlio.to_plain(
                yamlio.load_documents(layout.path(render.BOOTSTRAP_KUBECONFIG).read_text())[0]
            )
            assert boot["clusters"][0]["cluster"]["server"] == "https://localhost:6443"
            assert boot["users"][0]["user"]["token"] == "abcdef.0123456789abcdef"
            assert layout.path(render.CA_FILE).read_bytes() == base64.b64decode(_ca_b64())
            # a forbidden flag: a wait naming the key, the previous spec stays
            apply(state, _config(kubelet="{extraArgs: {cert-dir: /tmp}}"))
            await assert_resource(
                state, WAIT_STATUSES, "k8s.KubeletSpecController",
                lambda r: "machine.kubelet.extraArgs" in r.spec.reason and "cert-dir" in r.spec.reason,
            )  # fmt: skip
            assert "--v=2" in state.get("k8s", KUBELET_SPECS, "kubelet").spec.args
            # KubePrism: kubelet bootstraps through it; the files change and the change is signalled
            before = len(changes)
            apply(state, _config(features="{kubePrism: {enabled: true, port: 7445}}"))
            await _until(lambda: "127.0.0.1:7445" in layout.path(render.BOOTSTRAP_KUBECONFIG).read_text())
            await _until(lambda: len(changes) > before)

    run(main)


def test_valid_subnets_pick_the_node_ip_or_wait_naming_the_key(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "10.5.0.2")

    async def main() -> None:
        async with running(*area.kubelet_controllers(layout)) as state:
            _seed_network(state, "10.5.0.2/24", "192.168.7.9/24", "fd00::2/64")
            apply(state, _config(kubelet="{nodeIP: {validSubnets: ['192.168.0.0/16', 'fd00::/8']}}"))
            await assert_resource(
                state, NODE_IPS, "kubelet", lambda r: r.spec.addresses == ("192.168.7.9", "fd00::2")
            )
            apply(state, _config(kubelet="{nodeIP: {validSubnets: ['0.0.0.0/0', '!10.5.0.0/16']}}"))
            await assert_resource(state, NODE_IPS, "kubelet", lambda r: r.spec.addresses == ("192.168.7.9",))
            apply(state, _config(kubelet="{nodeIP: {validSubnets: ['172.16.0.0/12']}}"))
            await assert_resource(
                state, WAIT_STATUSES, "k8s.NodeIPController",
                lambda r: "machine.kubelet.nodeIP.validSubnets" in r.spec.reason,
            )  # fmt: skip
            assert state.get("k8s", NODE_IPS, "kubelet").spec.addresses == ("192.168.7.9",)

    run(main)


async def _until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


# --- the service -------------------------------------------------------------------------------


def test_runtime_spec_runs_kubelet_with_talos_mounts_and_host_namespaces(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "10.5.0.2", platform=Platform.CONTAINER)
    spec = KubeletSpecSpec(
        image="ghcr.io/siderolabs/kubelet:v1.30.3", args=("--config=/etc/kubernetes/kubelet.yaml",),
        extra_mounts=(KubeletMount("/var/mnt", "bind", "/var/mnt", ("rbind", "rshared", "rw")),),
    )  # fmt: skip
    oci = service.runtime_spec(spec, layout, environment=["HTTP_PROXY=x"])
    assert oci["process"]["args"] == ["/usr/local/bin/kubelet", "--config=/etc/kubernetes/kubelet.yaml"]
    assert "HTTP_PROXY=x" in oci["process"]["env"]
    namespaces = {n["type"] for n in oci["linux"]["namespaces"]}
    assert "network" not in namespaces and "pid" not in namespaces and "mount" in namespaces
    assert oci["linux"]["rootfsPropagation"] == "shared"
    assert oci["linux"]["cgroupsPath"] == "/podruntime/kubelet"
    mounts = {m["destination"]: m for m in oci["mounts"]}
    for destination in ("/dev", "/sys/fs/cgroup", "/etc/kubernetes", "/etc/cni", "/var/lib/kubelet",
                        "/var/log/pods", "/var/log/containers", "/var/run", "/opt",
                        "/usr/libexec/kubernetes", "/lib/modules", "/system/resolved/resolv.conf", "/var/mnt"):  # fmt: skip
        assert destination in mounts, destination
    assert mounts["/var/lib/kubelet"]["options"] == ["rbind", "rshared", "rw"]
    assert mounts["/var/run"]["source"] == str(layout.path("/run"))
    assert mounts["/var/mnt"]["source"] == str(layout.path("/var/mnt"))
    assert oci["root"]["path"] == str(layout.path(service.ROOTFS))


def test_mounts_whose_source_the_node_lacks_are_dropped(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "10.5.0.2", platform=Platform.CONTAINER)
    spec = KubeletSpecSpec(image="ghcr.io/siderolabs/kubelet:v1.30.3", args=())
    layout.path("/dev").mkdir(parents=True)
    kept = service.without_missing_sources(service.runtime_spec(spec, layout))
    destinations = [m["destination"] for m in kept["mounts"]]
    assert "/dev" in destinations and "/proc" not in destinations and "/lib/modules" not in destinations
    layout.path(service.PROC_VIEW).mkdir(parents=True)
    assert "/proc" in [
        m["destination"]
        for m in service.without_missing_sources(service.runtime_spec(spec, layout))["mounts"]
    ]


def test_process_node_shows_kubelet_skipped_with_the_reason(tmp_path: Path) -> None:
    svc = service.kubelet_service(Layout(tmp_path, "127.0.0.1"), State())
    assert svc.id == "kubelet" and "process node" in svc.skip_reason


def test_healthz_needs_http_200() -> None:
    async def main() -> None:
        answers = iter([b"HTTP/1.1 200 OK\r\n\r\nok", b"HTTP/1.1 500 Internal Server Error\r\n\r\n"])

        async def handle(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            w.write(next(answers))
            await w.drain()
            w.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            await service.healthz("127.0.0.1", port)
            with pytest.raises(RuntimeError, match="expected HTTP status OK, got 500 Internal Server Error"):
                await service.healthz("127.0.0.1", port)

    run(main)
