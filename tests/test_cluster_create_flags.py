"""``talosctl cluster create`` as Talos 1.7's docs call it: its flags reach create as Talos means them,
Talos's flags Ichor does not take are refused naming why, and the configs the new flags shape say
so; in-process, no node started (create itself is replaced where it would start one)."""

from __future__ import annotations

import ipaddress
import platform
from pathlib import Path
from typing import Any

import pytest

from ichor.machinery.config import Mode, load_config, validate
from ichor.machinery.errors import MachineryError
from ichor.machinery.secrets import SecretsBundle
from ichor.machinery.yamlio import load_documents, to_plain
from ichor.provision import _cluster
from ichor.provision._configs import CONTAINER, PROCESS, Patches, node_configs
from ichor.provision._record import ClusterRecord, NodeRecord
from ichor.provision._wait import K8S_COMPONENTS, PRE_BOOT_SEQUENCE, narrow, wait_plan


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the CLI passes to the provisioner's create (which is not run)."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(_cluster, "create", lambda **kw: calls.append(kw))
    monkeypatch.setattr("os.geteuid", lambda: 0)
    return calls


def test_masters_is_the_deprecated_alias_of_controlplanes(
    talosctl: Any, captured: list[dict[str, Any]]
) -> None:
    r = talosctl("cluster", "create", "--masters", "3", "--workers", "2")
    assert r.exit_code == 0, r.stderr
    assert captured[0]["controlplanes"] == 3 and captured[0]["workers"] == 2
    assert "Flag --masters has been deprecated, use --controlplanes instead" in r.stderr
    r = talosctl("cluster", "create", "--controlplanes", "2")
    assert captured[1]["controlplanes"] == 2 and "deprecated" not in r.stderr


def test_provisioner_docker_is_served_by_the_container_provisioner(
    talosctl: Any, captured: list[dict[str, Any]]
) -> None:
    r = talosctl("cluster", "create", "--provisioner", "docker")
    assert r.exit_code == 0, r.stderr
    assert captured[0]["provisioner"] == "container"
    assert r.stderr.count("Ichor's container provisioner serves it") == 1


def test_talos_flags_reach_create_as_talos_means_them(
    talosctl: Any, captured: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kube.yaml"))
    r = talosctl(
        "cluster", "create", "--talos-version", "v1.7", "--endpoint", "10.5.0.2", "--use-vip",
        "--dns-domain", "example.local", "--kubeprism-port", "7446", "--custom-cni-url", "http://10.5.0.1/cni.yaml",
        "--cpus", "1.5", "--memory", "3072", "--cpus-workers", "0.5", "--memory-workers", "1024",
        "--wait=false", "--wait-timeout", "5m", "--skip-k8s-node-readiness-check",
        "--with-cluster-discovery=false", "--with-debug", "--install-image", "ghcr.io/siderolabs/installer:v1.7.6",
        "--registry-insecure-skip-verify", "10.5.0.1:5000", "--init-node-as-endpoint",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    (kw,) = captured
    assert kw["talos_version"] == "v1.7" and kw["endpoint"] == "10.5.0.2" and kw["use_vip"] is True
    assert kw["dns_domain"] == "example.local" and kw["kube_prism_port"] == 7446
    assert kw["custom_cni_url"] == "http://10.5.0.1/cni.yaml"
    assert kw["cpus"] == {"controlplane": "1.5", "worker": "0.5"}
    assert kw["memory_mb"] == {"controlplane": 3072, "worker": 1024}
    assert kw["wait"] is False and kw["wait_timeout"] == 300.0
    assert kw["skip_node_readiness"] is True and kw["skip_boot_phase_finished"] is False
    assert kw["discovery"] is False and kw["debug"] is True
    assert kw["install_image"] == "ghcr.io/siderolabs/installer:v1.7.6"
    assert kw["registry_insecure"] == ("10.5.0.1:5000",) and kw["init_node_as_endpoint"] is True
    assert kw["kubeconfig"] == tmp_path / "kube.yaml"


def test_defaults_are_talos_and_skip_kubeconfig_merges_nothing(
    talosctl: Any, captured: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert talosctl("cluster", "create").exit_code == 0
    assert (
        talosctl("cluster", "create", "--skip-kubeconfig", "--skip-boot-phase-finished-check").exit_code == 0
    )
    default, skipped = captured
    assert default["kubeconfig"] == Path.home() / ".kube" / "config"
    assert (default["dns_domain"], default["kube_prism_port"], default["discovery"]) == (
        "cluster.local",
        7445,
        True,
    )
    assert (default["wait"], default["wait_timeout"], default["cpus"], default["memory_mb"]) == (
        True,
        1200.0,
        {},
        {},
    )
    assert skipped["kubeconfig"] is None and skipped["skip_boot_phase_finished"] is True


@pytest.mark.parametrize(
    ("args", "flag", "why"),
    [
        (["--with-kubespan"], "--with-kubespan", "WireGuard"),
        (["--disk", "6144"], "--disk", "no disks"),
        (["-p", "8080:80/tcp"], "--exposed-ports", "maps no ports"),
        (["--image=ghcr.io/siderolabs/talos:v1.7.6"], "--image", "not a Talos container image"),
        (["--with-uefi=false"], "--with-uefi", "QEMU"),
        (["--with-bootloader=false"], "--with-bootloader", "no bootloader"),
        (["--ipv6"], "--ipv6", "IPv4"),
        (["--arch", "riscv64"], "--arch", "this machine's"),
        (["--with-init-node"], "--with-init-node", "deprecated"),
        (["--encrypt-state"], "--encrypt-state", "no partition to encrypt"),
    ],
)
def test_talos_flags_ichor_does_not_take_are_refused_naming_why(
    talosctl: Any, captured: list[dict[str, Any]], args: list[str], flag: str, why: str
) -> None:
    r = talosctl("cluster", "create", *args)
    assert r.exit_code == 1 and not captured
    assert f"error: {flag} is not supported by Ichor's cluster create: " in r.stderr and why in r.stderr


def test_talos_flags_whose_value_is_what_ichor_does_are_accepted(
    talosctl: Any, captured: list[dict[str, Any]]
) -> None:
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    r = talosctl("cluster", "create", "--ipv4", "--ipv6=false", "--arch", arch)
    assert r.exit_code == 0, r.stderr
    assert len(captured) == 1
    assert "--ipv4" in talosctl("cluster", "create", "--help").stdout  # named in the refused list


def test_input_dir_refuses_config_generation_flags_as_talos_does(
    talosctl: Any, captured: list[dict[str, Any]]
) -> None:
    r = talosctl("cluster", "create", "--input-dir", "/x", "--dns-domain", "a.local")
    assert r.exit_code == 2 and not captured
    assert "flag --dns-domain is not supported with generated configs (--input-dir)" in r.stderr
    assert talosctl("cluster", "create", "-i", "/x", "--workers", "2").exit_code == 0
    assert captured[0]["input_dir"] == "/x"


def test_not_root_says_kubernetes_needs_container_nodes(
    talosctl: Any, captured: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    r = talosctl("cluster", "create")
    assert r.exit_code == 0, r.stderr
    assert captured[0]["provisioner"] == "process"
    assert "Kubernetes runs only on container nodes, which need root" in r.stderr
    assert "no kubelet, so there is no Kubernetes for kubectl" in r.stderr


def test_container_nodes_asked_for_without_root_say_what_the_process_cluster_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(MachineryError) as failed:
        _create(tmp_path, provisioner=CONTAINER, cidr="10.5.0.0/24")
    assert "container nodes need root" in str(failed.value)
    assert "no Kubernetes" in (failed.value.hint or "")


# --- the provisioner's refusals (before anything starts) ---


def _create(tmp_path: Path, **kw: Any) -> ClusterRecord:
    args: dict[str, Any] = dict(name="c", cidr="127.71.9.0/24", controlplanes=1, workers=1,
                                state=tmp_path / "clusters", talosconfig=tmp_path / "talosconfig",
                                progress=lambda line: None)  # fmt: skip
    args.update(kw)
    return _cluster.create(**args)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"use_vip": True}, "--use-vip needs container nodes"),
        ({"cpus": {"controlplane": "1"}}, "--cpus needs container nodes"),
        ({"memory_mb": {"worker": 1024}}, "--memory needs container nodes"),
        ({"talos_version": "v1.6"}, "configs for Talos v1.6 have no machine.features.hostDNS"),
        ({"talos_version": "one"}, "--talos-version: error parsing version"),
        ({"kube_prism_port": 70000}, "--kubeprism-port 70000 is out of range"),
        ({"custom_cni_url": "ftp://x/cni.yaml"}, "is not an http(s) URL"),
    ],
)
def test_create_refuses_before_anything_starts(tmp_path: Path, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(MachineryError, match=None) as failed:
        _create(tmp_path, provisioner=PROCESS, **kw)
    assert message in str(failed.value)
    assert not (tmp_path / "clusters/c").exists()


def test_input_dir_configs_must_pass_container_mode(tmp_path: Path) -> None:
    from ichor.machinery.errors import ConfigValidationError
    from ichor.machinery.generate import GenOptions, OutputType, generate

    out = generate(SecretsBundle.generate(), GenOptions(cluster_name="c", endpoint="https://127.71.9.2:6443"))
    for kind in OutputType:
        (tmp_path / kind.file_name).write_text(out.outputs[kind])
    with pytest.raises(ConfigValidationError) as failed:
        _create(tmp_path, provisioner=PROCESS, input_dir=str(tmp_path))
    assert any("forwardKubeDNSToHost" in p for p in failed.value.problems)
    assert "--input-dir" in str(failed.value) and "forwardKubeDNSToHost" in (failed.value.hint or "")


# --- the configs the flags shape ---


def _record(provisioner: str = CONTAINER, **flags: Any) -> ClusterRecord:
    record = ClusterRecord(
        name="c", cidr="10.5.0.0/24", state_dir="/nonexistent", provisioner=provisioner, **flags
    )
    record.nodes = [
        NodeRecord("c-controlplane-1", "controlplane", "10.5.0.2", "/n/1", mac="02:00:00:00:00:02"),
        NodeRecord("c-worker-1", "worker", "10.5.0.3", "/n/2", mac="02:00:00:00:00:03"),
    ]
    return record


_BUNDLE = SecretsBundle.generate()


def _docs(record: ClusterRecord) -> tuple[dict[str, Any], dict[str, Any]]:
    configs = node_configs(record, _BUNDLE, [], Patches([], [], []))
    for name, text in configs.items():
        assert validate(load_config(text, source=name), Mode.CONTAINER).errors == [], name
    cp, worker = (to_plain(load_documents(configs[n.name], source=n.name)[0]) for n in record.nodes)
    return cp, worker


def test_kubernetes_flags_shape_both_configs() -> None:
    cp, worker = _docs(
        _record(dns_domain="example.local", kube_prism_port=7446, custom_cni_url="http://10.5.0.1/cni.yaml",
                discovery=False, debug=True, registry_insecure=["10.5.0.1:5000"])
    )  # fmt: skip
    for doc in (cp, worker):
        assert doc["cluster"]["network"]["dnsDomain"] == "example.local"
        assert doc["machine"]["features"]["kubePrism"] == {"enabled": True, "port": 7446}
        assert doc["cluster"]["network"]["cni"] == {"name": "custom", "urls": ["http://10.5.0.1/cni.yaml"]}
        assert doc["cluster"]["discovery"]["enabled"] is False
        assert doc["debug"] is True
        assert doc["machine"]["registries"]["config"]["10.5.0.1:5000"]["tls"]["insecureSkipVerify"] is True


def test_kubeprism_port_zero_turns_it_off() -> None:
    cp, worker = _docs(_record(kube_prism_port=0))
    assert "kubePrism" not in cp["machine"]["features"] and "kubePrism" not in worker["machine"]["features"]


def test_vip_is_the_endpoint_and_on_the_control_planes_eth0_only() -> None:
    cp, worker = _docs(_record(vip="10.5.0.50"))
    assert cp["cluster"]["controlPlane"]["endpoint"] == worker["cluster"]["controlPlane"]["endpoint"]
    assert cp["cluster"]["controlPlane"]["endpoint"] == "https://10.5.0.50:6443"
    (eth0,) = cp["machine"]["network"]["interfaces"]
    assert eth0["vip"] == {"ip": "10.5.0.50"} and eth0["dhcp"] is True
    assert "vip" not in worker["machine"]["network"]["interfaces"][0]


def test_forced_endpoint_is_a_certificate_san_and_the_only_talosconfig_endpoint() -> None:
    record = _record(endpoint="10.5.0.9:50000")
    cp, _ = _docs(record)
    assert "10.5.0.9" in cp["machine"]["certSANs"] and "10.5.0.9" in cp["cluster"]["apiServer"]["certSANs"]
    assert _cluster.talos_endpoints(record) == ["10.5.0.9:50000"]
    assert _cluster.talos_endpoints(_record(init_node_as_endpoint=True)) == ["10.5.0.2"]
    assert _cluster.talos_endpoints(_record(), ["1.2.3.4"]) == ["1.2.3.4"]
    assert _cluster.talos_endpoints(_record()) == ["10.5.0.2"]


def test_use_vip_takes_the_cidrs_fiftieth_address() -> None:
    vip = _cluster._check_node_flags("10.5.0.0/24", True, 2, True, {}, {})
    assert vip == "10.5.0.50" and ipaddress.ip_address(vip) in ipaddress.ip_network("10.5.0.0/24")
    with pytest.raises(MachineryError, match="address number 50"):
        _cluster._check_node_flags("10.5.0.0/27", True, 2, True, {}, {})
    with pytest.raises(MachineryError, match="--use-vip with workers is not supported yet") as failed:
        _cluster._check_node_flags("10.5.0.0/24", True, 2, True, {}, {}, workers=1)
    assert "--workers 0" in (failed.value.hint or "")


def test_input_dir_configs_get_only_the_nodes_plumbing(tmp_path: Path) -> None:
    from ichor.machinery.generate import GenOptions, OutputType, generate
    from ichor.provision._configs import load_input_dir

    opts = GenOptions(cluster_name="mine", endpoint="https://10.5.0.2:6443", dns_domain="mine.local",
                      host_dns_forward_kube_dns_to_host=True)  # fmt: skip
    out = generate(SecretsBundle.generate(), opts)
    for kind in OutputType:
        (tmp_path / kind.file_name).write_text(out.outputs[kind])
    inputs = load_input_dir(tmp_path)
    record = _record(registry_mirrors=["registry.k8s.io=http://10.5.0.1:5000"], input_dir=str(tmp_path))
    configs = node_configs(record, None, [], Patches([], [], []), inputs)
    cp = to_plain(load_documents(configs["c-controlplane-1"], source="cp")[0])
    assert cp["cluster"]["clusterName"] == "mine" and cp["cluster"]["network"]["dnsDomain"] == "mine.local"
    assert cp["machine"]["network"]["hostname"] == "c-controlplane-1"
    assert cp["machine"]["time"]["servers"] == ["10.5.0.1"]
    assert cp["machine"]["registries"]["mirrors"]["registry.k8s.io"]["endpoints"] == ["http://10.5.0.1:5000"]
    assert validate(load_config(configs["c-worker-1"], source="w"), Mode.CONTAINER).errors == []


# --- waits ---


def test_skip_flags_narrow_the_wait_as_talos_does() -> None:
    full = wait_plan(container=True, kubernetes_images="local")
    assert narrow(full) == full
    boot = narrow(full, skip_boot_phase_finished=True)
    assert boot.stages == PRE_BOOT_SEQUENCE
    ready = narrow(full, skip_node_readiness=True)
    assert ready.stages == (*PRE_BOOT_SEQUENCE, *K8S_COMPONENTS)
    assert (
        "all k8s nodes to report ready" in full.stages and "all k8s nodes to report ready" not in ready.stages
    )
    process = narrow(wait_plan(container=False, kubernetes_images="local"), skip_node_readiness=True)
    assert "kubelet to be healthy" not in process.stages and process.skipped


@pytest.mark.parametrize(("vip", "order"), [
    ("10.5.0.50", ["reachable 10.5.0.2", "bootstrap 10.5.0.2", "reachable 10.5.0.2,10.5.0.3"]),
    ("", ["reachable 10.5.0.2,10.5.0.3", "bootstrap 10.5.0.2"]),
])  # fmt: skip
def test_with_a_vip_the_workers_are_waited_for_after_bootstrap(
    monkeypatch: pytest.MonkeyPatch, vip: str, order: list[str]
) -> None:
    """A worker's certificate comes from trustd at the VIP, which exists only once etcd runs."""
    calls: list[str] = []

    async def wait_healthy(options: object, info: Any, plan: Any, timeout: float, progress: object) -> None:
        calls.append("reachable " + ",".join([*info.control_plane_nodes, *info.worker_nodes]))

    async def bootstrap(options: object, node: str, timeout: float, progress: object) -> None:
        calls.append(f"bootstrap {node}")

    monkeypatch.setattr(_cluster, "wait_healthy", wait_healthy)
    monkeypatch.setattr(_cluster, "_bootstrap", bootstrap)
    record = _record(vip=vip)
    assert (
        _cluster._reach_and_bootstrap(record, None, "10.5.0.2", 60.0, True, 0.0, lambda _: None) is not None
    )  # type: ignore[arg-type]
    assert calls == order
