"""controllers/k8s: Kubernetes PKI and files on a control plane, the control-plane static pods,
``machine.pods``, and the PodList server the kubelet polls."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from controller_helpers import ADDRESS, apply, run, running
from cryptography import x509
from ruamel.yaml import YAML

from ichor.machined.controllers import config as config_area
from ichor.machined.controllers import k8s
from ichor.machined.controllers.k8s.static_pods import ArgsError, merge_args
from ichor.machined.controllers.secrets import etcd_root_controller
from ichor.machined.cosi import WAIT_STATUSES, State, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    CERT_SANS,
    HOSTNAME_STATUSES,
    NODE_ADDRESSES,
    SERVICES,
    HostnameStatusSpec,
    NodeAddressSpec,
    ServiceSpec,
)
from ichor.machined.resources._k8s import (
    K8S_DYNAMIC_CERTS,
    SECRETS_STATUSES,
    STATIC_POD_SERVER_STATUSES,
    STATIC_PODS,
)
from ichor.machinery.generate import GenOptions, OutputType, generate
from ichor.machinery.secrets import SecretsBundle

ENDPOINT = "https://cp.example.org:6443"


@cache
def _controlplane() -> str:
    out = generate(
        SecretsBundle.generate(), GenOptions(cluster_name="demo", endpoint=ENDPOINT),
        output_types=[OutputType.CONTROLPLANE],
    )  # fmt: skip
    return out.outputs[OutputType.CONTROLPLANE]


def _edited(edit: Any) -> str:
    yaml = YAML()
    raw = yaml.load(_controlplane())
    edit(raw)
    import io

    buf = io.StringIO()
    yaml.dump(raw, buf)
    return buf.getvalue()


def _seed_node(state: State) -> None:
    state.create(HOSTNAME_STATUSES.new("hostname", HostnameStatusSpec("cp-1", "lab")))
    state.create(
        NODE_ADDRESSES.new("accumulative-no-k8s", NodeAddressSpec((ipaddress.ip_interface(f"{ADDRESS}/8"),)))
    )


def _set_etcd(state: State, healthy: bool) -> None:
    _set_service(state, "etcd", ServiceSpec(running=True, healthy=healthy))
    if state.spec_of(SERVICES, "kubelet") is None:
        _set_service(state, "kubelet", ServiceSpec(running=True, healthy=True))


def _set_service(state: State, id: str, spec: ServiceSpec) -> None:
    existing = [r for r in state.list("runtime", SERVICES) if r.id == id]
    if existing:
        state.update(existing[0].with_spec(spec))
    else:
        state.create(SERVICES.new(id, spec))


class _APIServer:
    """The local kube-apiserver as the static pod controller probes it: ``/readyz``'s answer."""

    def __init__(self, ready: bool = True) -> None:
        self.ready = ready
        self.probes = 0

    def client(self, kubeconfig: bytes) -> Any:
        assert b"server: https://localhost:" in kubeconfig
        return self

    async def readyz(self) -> str | None:
        self.probes += 1
        return None if self.ready else "GET /readyz: 500 ([-]poststarthook/rbac/bootstrap-roles failed)"


def _controllers(layout: Layout, api: _APIServer | None = None) -> list[Any]:
    client = (api or _APIServer()).client
    return [config_area.machine_type_controller(), etcd_root_controller(),
            *k8s.k8s_controllers(layout, api_client=client)]  # fmt: skip


def _command(state: State, id: str) -> list[str]:
    pod = state.get("k8s", STATIC_PODS, id).spec.pod
    return list(pod["spec"]["containers"][0]["command"])


def test_control_plane_gets_pki_files_and_static_pods_once_etcd_is_healthy(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address=ADDRESS)

    async def main() -> None:
        async with running(*_controllers(layout)) as state:
            _seed_node(state)
            apply(state, _controlplane())
            await assert_resource(state, SECRETS_STATUSES, "static-pods", lambda r: r.spec.ready)
            sans = state.get("secrets", CERT_SANS, "k8s").spec
            assert {"cp.example.org", "kubernetes.default.svc.cluster.local", "localhost", "cp-1"} <= set(
                sans.dns_names
            )
            assert {"10.96.0.1", "127.0.0.1", ADDRESS} <= {str(ip) for ip in sans.ips}
            crt = x509.load_pem_x509_certificate(
                state.get("secrets", K8S_DYNAMIC_CERTS, "k8s-dynamic-certs").spec.api_server.crt
            )
            names = crt.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            assert "kubernetes.default" in names.get_values_for_type(x509.DNSName)
            apiserver_dir = tmp_path / "system/secrets/kubernetes/kube-apiserver"
            for name in (
                "ca.crt",
                "apiserver.crt",
                "apiserver.key",
                "front-proxy-client.crt",
                "etcd-client.key",
                "service-account.pub",
                "encryptionconfig.yaml",
                "apiserver-kubelet-client.crt",
            ):
                assert (apiserver_dir / name).stat().st_size > 0, name
            assert (tmp_path / "system/secrets/kubernetes/kube-controller-manager/kubeconfig").read_text().count(
                "server: https://localhost:6443") == 1  # fmt: skip
            assert "secretbox" in (apiserver_dir / "encryptionconfig.yaml").read_text()
            scheduler_cfg = (
                tmp_path / "system/config/kubernetes/kube-scheduler/scheduler-config.yaml"
            ).read_text()
            assert "kubescheduler.config.k8s.io/v1\n" in scheduler_cfg
            assert (
                "PodSecurity"
                in (
                    tmp_path / "system/config/kubernetes/kube-apiserver/admission-control-config.yaml"
                ).read_text()
            )

            await asyncio.sleep(0.2)
            assert state.list("k8s", STATIC_PODS) == []  # etcd is not running yet
            _set_etcd(state, healthy=False)
            await asyncio.sleep(0.2)
            assert state.list("k8s", STATIC_PODS) == []
            _set_etcd(state, healthy=True)
            await assert_resource(state, STATIC_PODS, "kube-scheduler", lambda r: True)
            ids = sorted(r.id for r in state.list("k8s", STATIC_PODS))
            assert ids == ["kube-apiserver", "kube-controller-manager", "kube-scheduler"]
            pod = state.get("k8s", STATIC_PODS, "kube-apiserver").spec.pod
            assert pod["metadata"]["labels"] == {"k8s-app": "kube-apiserver", "tier": "control-plane"}
            assert pod["metadata"]["namespace"] == "kube-system" and pod["spec"]["hostNetwork"] is True
            assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
            assert set(pod["metadata"]["annotations"]) >= {
                "talos.dev/secrets-version",
                "talos.dev/config-version",
            }
            args = _command(state, "kube-apiserver")
            assert args[0] == "/usr/local/bin/kube-apiserver"
            assert "--etcd-servers=https://localhost:2379" in args and "--secure-port=6443" in args
            assert "--authorization-mode=Node,RBAC" in args and "--anonymous-auth=false" in args
            assert (
                f"--service-account-issuer={ENDPOINT}" in args
                and "--enable-bootstrap-token-auth=true" in args
            )
            scheduler = state.get("k8s", STATIC_PODS, "kube-scheduler").spec.pod["spec"]["containers"][0]
            assert scheduler["livenessProbe"]["httpGet"]["path"] == "/healthz"
            assert scheduler["readinessProbe"]["httpGet"] == {"path": "/healthz", "host": "localhost", "port": 10259,
                                                               "scheme": "HTTPS"}  # fmt: skip

            state.destroy("runtime", SERVICES, "etcd")  # etcd's service gone: the pods go too
            await assert_no_resource(state, STATIC_PODS, "kube-apiserver")

    run(main, timeout=60)


def test_controller_manager_and_scheduler_wait_for_the_api_server_to_be_ready_once(tmp_path: Path) -> None:
    """Budget 3 s: one READY_POLL between two probes."""
    api = _APIServer(ready=False)

    async def main() -> None:
        async with running(*_controllers(Layout(root=tmp_path, address=ADDRESS), api)) as state:
            _seed_node(state)
            _set_service(state, "kubelet", ServiceSpec(running=False))
            _set_etcd(state, healthy=True)
            apply(state, _controlplane())
            await assert_resource(state, STATIC_PODS, "kube-apiserver", lambda r: True)
            # No kubelet (a process node's is skipped): nothing runs the API server, so no probe.
            await assert_resource(state, WAIT_STATUSES, "k8s.ControlPlaneStaticPodController",
                                  lambda r: r.spec.reason.endswith("the kubelet, which runs kube-apiserver, is not running"))  # fmt: skip
            await asyncio.sleep(0.2)
            assert api.probes == 0
            _set_service(state, "kubelet", ServiceSpec(running=True))
            readyz = "GET /readyz: 500 ([-]poststarthook/rbac/bootstrap-roles failed)"
            wait = await assert_resource(state, WAIT_STATUSES, "k8s.ControlPlaneStaticPodController",
                                         lambda r: r.spec.reason.endswith(readyz))  # fmt: skip
            assert wait.spec.waiting_for == "kube-apiserver ready"
            assert wait.spec.reason.startswith(
                "kube-controller-manager and kube-scheduler start once the local kube-apiserver answers /readyz"
            )
            probes = api.probes
            for _ in range(40):  # probed again on its own, every READY_POLL (1 s)
                await asyncio.sleep(0.05)
                if api.probes > probes:
                    break
            assert api.probes > probes
            assert sorted(r.id for r in state.list("k8s", STATIC_PODS)) == ["kube-apiserver"]
            api.ready = True
            await assert_resource(state, STATIC_PODS, "kube-scheduler", lambda r: True)
            await assert_no_resource(state, WAIT_STATUSES, "k8s.ControlPlaneStaticPodController")
            ids = sorted(r.id for r in state.list("k8s", STATIC_PODS))
            assert ids == ["kube-apiserver", "kube-controller-manager", "kube-scheduler"]
            # Once per boot: an API server that goes away later (an upgrade restarting it) is not
            # a reason to take the other two down, nor to probe again.
            api.ready = False
            probes = api.probes
            apply(state, _edited(lambda raw: raw["cluster"]["apiServer"].update(extraArgs={"v": "2"})))
            await assert_resource(
                state, STATIC_PODS, "kube-apiserver", lambda r: "--v=2" in _command(state, r.id)
            )
            assert sorted(r.id for r in state.list("k8s", STATIC_PODS)) == ids
            assert api.probes == probes

    run(main, timeout=30)


def test_extra_args_merge_and_a_forbidden_one_is_a_wait_naming_the_key(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address=ADDRESS)

    def extra(args: dict[str, str]) -> Any:
        def edit(raw: Any) -> None:
            raw["cluster"]["apiServer"]["extraArgs"] = args
            raw["cluster"]["scheduler"] = {"image": "registry.k8s.io/kube-scheduler:v1.20.2"}

        return edit

    async def main() -> None:
        async with running(*_controllers(layout)) as state:
            _seed_node(state)
            _set_etcd(state, healthy=True)
            apply(state, _edited(extra({"enable-admission-plugins": "AlwaysPullImages", "audit-log-maxage": "7",
                                        "service-account-issuer": "https://other"})))  # fmt: skip
            await assert_resource(state, STATIC_PODS, "kube-apiserver", lambda r: True)
            args = _command(state, "kube-apiserver")
            assert "--enable-admission-plugins=NodeRestriction,AlwaysPullImages" in args
            assert "--audit-log-maxage=7" in args and "--audit-log-maxage=30" not in args
            assert [a for a in args if a.startswith("--service-account-issuer=")] == [
                f"--service-account-issuer={ENDPOINT}", "--service-account-issuer=https://other"]  # fmt: skip
            # A 1.20 scheduler answers /healthz only, and reads the v1beta1 config.
            scheduler = state.get("k8s", STATIC_PODS, "kube-scheduler").spec.pod["spec"]["containers"][0]
            assert scheduler["livenessProbe"]["httpGet"]["path"] == "/healthz"
            cfg = (tmp_path / "system/config/kubernetes/kube-scheduler/scheduler-config.yaml").read_text()
            assert "kubescheduler.config.k8s.io/v1beta1" in cfg

            apply(state, _edited(extra({"etcd-servers": "https://evil:2379"})))
            await assert_resource(
                state, WAIT_STATUSES, "k8s.ControlPlaneStaticPodController",
                lambda r: "cluster.apiServer.extraArgs.etcd-servers" in r.spec.reason,
            )  # fmt: skip
            # The pod already rendered stays as it was.
            assert "--etcd-servers=https://localhost:2379" in _command(state, "kube-apiserver")

    run(main, timeout=60)


def test_an_image_without_a_version_tag_is_a_wait_naming_the_key(tmp_path: Path) -> None:
    def edit(raw: Any) -> None:
        raw["cluster"]["apiServer"]["image"] = "registry.k8s.io/kube-apiserver:latest"

    async def main() -> None:
        async with running(*_controllers(Layout(root=tmp_path, address=ADDRESS))) as state:
            apply(state, _edited(edit))
            await assert_resource(
                state, WAIT_STATUSES, "k8s.ControlPlaneAPIServerController",
                lambda r: "cluster.apiServer.image" in r.spec.reason and "latest" in r.spec.reason,
            )  # fmt: skip

    run(main)


def test_a_worker_gets_no_control_plane_secrets_or_pods(tmp_path: Path) -> None:
    out = generate(SecretsBundle.generate(), GenOptions(cluster_name="demo", endpoint=ENDPOINT),
                   output_types=[OutputType.WORKER])  # fmt: skip

    async def main() -> None:
        async with running(*_controllers(Layout(root=tmp_path, address=ADDRESS))) as state:
            _seed_node(state)
            _set_etcd(state, healthy=True)
            apply(state, out.outputs[OutputType.WORKER])
            await assert_resource(
                state, STATIC_POD_SERVER_STATUSES, "static-pod-server-status", lambda r: True
            )
            await asyncio.sleep(0.3)
            assert state.list("secrets", K8S_DYNAMIC_CERTS) == [] and state.list("k8s", STATIC_PODS) == []
            assert not (tmp_path / "system/secrets/kubernetes").exists()

    run(main)


def test_merge_args_policies() -> None:
    base = {"a": "1", "list": "x,y"}
    policies = {"list": "additive", "locked": "denied"}
    assert merge_args(base, {"a": "2", "list": "y,z", "new": "n"}, policies, "k") == [
        "--a=2",
        "--list=x,y,z",
        "--new=n",
    ]
    with pytest.raises(ArgsError) as err:
        merge_args(base, {"locked": "v"}, policies, "cluster.scheduler.extraArgs")
    assert err.value.key == "cluster.scheduler.extraArgs.locked"


async def _http(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data


def _body(response: bytes) -> Any:
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK"), head
    return json.loads(body)


def test_static_pod_server_serves_machine_pods_and_rejects_garbage(tmp_path: Path) -> None:
    def edit(raw: Any) -> None:
        raw["machine"]["pods"] = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nginx"},
                                   "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}]  # fmt: skip

    said: list[str] = []
    layout = Layout(root=tmp_path, address=ADDRESS)
    controllers = [config_area.machine_type_controller(), k8s.static_pods.static_pod_config_controller(),
                   k8s.static_pod_server.StaticPodServerController(layout, say=said.append)]  # fmt: skip

    async def main() -> None:
        async with running(*controllers) as state:
            status = await assert_resource(
                state, STATIC_POD_SERVER_STATUSES, "static-pod-server-status", lambda r: True
            )
            url = status.spec.url
            assert url.startswith(f"http://{ADDRESS}:")
            get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
            assert _body(await _http(url, get)) == {
                "apiVersion": "v1",
                "kind": "PodList",
                "metadata": {},
                "items": [],
            }

            apply(state, _edited(edit))
            await assert_resource(state, STATIC_PODS, "default-nginx", lambda r: True)
            for _ in range(50):
                items = _body(await _http(url, get))["items"]
                if items:
                    break
                await asyncio.sleep(0.05)
            assert [p["metadata"]["name"] for p in items] == ["nginx"]
            assert any("rendered new static pod" in line and '"id": "default-nginx"' in line for line in said)

            assert (await _http(url, b"garbage\r\n\r\n")).startswith(b"HTTP/1.1 400 ")
            assert (await _http(url, b"POST / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405 ")
            huge = b"GET / HTTP/1.1\r\nX: " + b"a" * 100_000 + b"\r\n\r\n"
            assert (await _http(url, huge)).startswith(b"HTTP/1.1 431 ")
            assert _body(await _http(url, get))["items"][0]["metadata"]["name"] == "nginx"  # still serving

            apply(state, _controlplane())  # machine.pods gone: the list follows
            await assert_no_resource(state, STATIC_PODS, "default-nginx")
            for _ in range(50):
                if not _body(await _http(url, get))["items"]:
                    break
                await asyncio.sleep(0.05)
            assert _body(await _http(url, get))["items"] == []

    run(main)


def test_a_pod_without_a_name_is_a_wait(tmp_path: Path) -> None:
    def edit(raw: Any) -> None:
        raw["machine"]["pods"] = [{"apiVersion": "v1", "kind": "Pod", "metadata": {}}]

    async def main() -> None:
        async with running(k8s.static_pods.static_pod_config_controller()) as state:
            apply(state, _edited(edit))
            await assert_resource(
                state, WAIT_STATUSES, "k8s.StaticPodConfigController",
                lambda r: "machine.pods[0] has no metadata.name" in r.spec.reason,
            )  # fmt: skip

    run(main)
