"""controllers/k8s/manifests.py and extra_manifests.py: Talos 1.7's bootstrap manifests from the
config (ids, order, images, CIDRs, CNI choices) and extra/inline manifests fetched with retries."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from controller_helpers import apply, config, run, running

from ichor.machined.controllers import config as config_area
from ichor.machined.controllers.k8s import extra_manifests, manifests
from ichor.machined.cosi import WAIT_STATUSES, assert_no_resource, assert_resource
from ichor.machined.resources import MANIFESTS, BootstrapManifestsConfigSpec

BOOTSTRAP_IDS = [
    "00-kubelet-bootstrapping-token",
    "01-csr-approver-role-binding",
    "01-csr-node-bootstrap",
    "01-csr-renewal-role-binding",
    "05-flannel",
    "10-kube-proxy",
    "11-core-dns",
    "11-core-dns-svc",
    "11-kube-config-in-cluster",
]


def _cluster(extra: str, **kwargs: str) -> str:
    return config(**kwargs) + "  token: abc.def\n" + extra


def _controllers() -> list:  # type: ignore[type-arg]
    return [
        config_area.machine_type_controller(),
        manifests.bootstrap_manifests_config_controller(),
        manifests.extra_manifests_config_controller(),
        manifests.manifest_controller(),
    ]


def _objects(state, id: str) -> list[dict]:  # type: ignore[no-untyped-def, type-arg]
    return list(state.get("controlplane", MANIFESTS, id).spec.items)


def test_default_bootstrap_manifests_have_talos_ids_images_and_cidrs(tmp_path: Path) -> None:
    async def main() -> None:
        async with running(*_controllers()) as state:
            apply(
                state, _cluster("  network: {podSubnets: [10.244.0.0/16], serviceSubnets: [10.96.0.0/12]}\n")
            )
            await assert_resource(state, MANIFESTS, "11-kube-config-in-cluster", timeout=5)
            ids = sorted(r.id for r in state.list("controlplane", MANIFESTS))
            assert ids == BOOTSTRAP_IDS
            token = _objects(state, "00-kubelet-bootstrapping-token")[0]
            assert token["metadata"]["name"] == "bootstrap-token-abc"
            assert token["stringData"]["token-secret"] == "def"
            svc = _objects(state, "11-core-dns-svc")[0]
            assert svc["spec"]["clusterIP"] == "10.96.0.10"
            proxy = _objects(state, "10-kube-proxy")[0]["spec"]["template"]["spec"]["containers"][0]
            assert proxy["image"] == "registry.k8s.io/kube-proxy:v1.30.3"
            assert "--cluster-cidr=10.244.0.0/16" in proxy["command"]
            flannel = {o["kind"]: o for o in _objects(state, "05-flannel")}
            assert '"Network": "10.244.0.0/16"' in flannel["ConfigMap"]["data"]["net-conf.json"]
            pod = flannel["DaemonSet"]["spec"]["template"]["spec"]
            assert pod["initContainers"][0]["args"][-1] == "/etc/cni/net.d/10-flannel.conflist"
            assert pod["containers"][0]["image"].startswith("ghcr.io/siderolabs/flannel:")
            server = _objects(state, "11-kube-config-in-cluster")[0]["data"]["kubeconfig"]
            assert "server: https://10.0.0.1:6443" in server

    run(main)


def test_cni_none_proxy_disabled_and_kubeprism_change_the_set(tmp_path: Path) -> None:
    async def main() -> None:
        async with running(*_controllers()) as state:
            features = "  features: {kubePrism: {enabled: true, port: 7445}, kubernetesTalosAPIAccess: {enabled: true}}\n"
            apply(
                state,
                _cluster("", extra_machine=features)
                + "  network: {cni: {name: none}, podSubnets: [10.200.0.0/16]}\n"
                + "  proxy: {disabled: true}\n  coreDNS: {image: 'reg.local/coredns:v9'}\n",
            )
            await assert_resource(state, MANIFESTS, "13-talos-service-account-crd", timeout=5)
            ids = sorted(r.id for r in state.list("controlplane", MANIFESTS))
            assert "05-flannel" not in ids and "10-kube-proxy" not in ids
            assert "12-talos-api-service" in ids
            deployment = _objects(state, "11-core-dns")[-1]
            assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "reg.local/coredns:v9"
            assert (
                "https://127.0.0.1:7445"
                in _objects(state, "11-kube-config-in-cluster")[0]["data"]["kubeconfig"]
            )
            apply(state, config(type="worker"))
            await assert_no_resource(state, MANIFESTS, "11-core-dns", timeout=2)

    run(main)


def test_custom_cni_renders_no_flannel_and_a_bad_service_cidr_is_a_wait() -> None:
    spec = BootstrapManifestsConfigSpec(
        flannel_enabled=False, core_dns_enabled=True, dns_service_ip="10.0.0.10"
    )
    rendered = manifests.render_bootstrap_manifests(spec, "a.b")
    assert "05-flannel" not in rendered and list(rendered) == sorted(rendered)

    async def main() -> None:
        async with running(*_controllers()) as state:
            apply(state, _cluster("  network: {serviceSubnets: [not-a-cidr]}\n"))
            await assert_resource(
                state, WAIT_STATUSES, "k8s.BootstrapManifestsConfigController",
                lambda r: "cluster.network.serviceSubnets" in r.spec.reason,
            )  # fmt: skip

    run(main)


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, bytes]]] = {}
    seen_headers: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        self.seen_headers.append(dict(self.headers))
        code, body = self.routes.get(self.path, (404, b"not found"))
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Handler.routes, _Handler.seen_headers = {}, []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


CM = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, namespace: default}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: two}\n"


def test_extra_manifests_are_fetched_retried_with_the_reason_and_inline_ones_parsed(http_server: str) -> None:
    url = f"{http_server}/m.yaml"
    inline = '    inlineManifests: [{name: mine, contents: "apiVersion: v1\\nkind: Namespace\\nmetadata: {name: x}\\n"}]\n'

    async def main() -> None:
        controllers = [
            *_controllers(),
            extra_manifests.ExtraManifestController(first_retry=0.05, max_retry=0.2),
        ]
        async with running(*controllers) as state:
            apply(state, _cluster(f"  extraManifests: ['{url}']\n  extraManifestHeaders: {{X-Token: s3cret}}\n"
                                  + inline.replace("    ", "  ", 1)))  # fmt: skip
            await assert_resource(
                state, MANIFESTS, "99-mine", lambda r: r.spec.items[0]["metadata"]["name"] == "x", timeout=5
            )
            wait = await assert_resource(state, WAIT_STATUSES, "k8s.ExtraManifestController", timeout=5)
            assert f"99-{url}" in wait.spec.reason and "404" in wait.spec.reason
            _Handler.routes["/m.yaml"] = (200, CM)  # served now: the retry picks it up
            found = await assert_resource(state, MANIFESTS, f"99-{url}", timeout=5)
            assert [o["kind"] for o in found.spec.items] == ["ConfigMap", "Namespace"]
            assert any(h.get("X-Token") == "s3cret" for h in _Handler.seen_headers)
            await assert_no_resource(state, WAIT_STATUSES, "k8s.ExtraManifestController", timeout=2)

    run(main)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"x" * (extra_manifests.MAX_MANIFEST_BYTES + 10), "byte limit"),
        (b"apiVersion: v1\nkind: [unclosed\n", "invalid YAML"),
        (b"just: a map\n", "not a Kubernetes object"),
    ],
)
def test_a_huge_or_bad_manifest_is_refused_with_the_reason(
    http_server: str, body: bytes, reason: str
) -> None:
    _Handler.routes["/bad.yaml"] = (200, body)
    url = f"{http_server}/bad.yaml"

    async def main() -> None:
        controllers = [*_controllers(), extra_manifests.ExtraManifestController(first_retry=0.05)]
        async with running(*controllers) as state:
            apply(state, _cluster(f"  extraManifests: ['{url}']\n"))
            wait = await assert_resource(state, WAIT_STATUSES, "k8s.ExtraManifestController", timeout=5)
            assert reason in wait.spec.reason
            assert not [r for r in state.list("controlplane", MANIFESTS) if r.id.startswith("99-")]

    run(main)


def test_a_url_that_is_not_http_is_refused_naming_the_key() -> None:
    async def main() -> None:
        with pytest.raises(extra_manifests.ManifestFetchError, match=r"cluster\.extraManifests"):
            await extra_manifests.fetch_url("file:///etc/passwd", {})

    run(main)


def test_apply_waits_for_healthy_etcd_then_for_the_admin_kubeconfig(tmp_path: Path) -> None:
    from ichor.machined.controllers.k8s import manifest_apply
    from ichor.machined.platform import Layout
    from ichor.machined.resources import SERVICES, ManifestSpec, ServiceSpec

    async def main() -> None:
        controller = manifest_apply.ManifestApplyController(
            Layout(tmp_path, "127.0.0.1"), None, first_retry=0.05
        )
        async with running(controller) as state:
            state.create(
                MANIFESTS.new("00-x", ManifestSpec(items=({"apiVersion": "v1", "kind": "Namespace"},)))
            )
            name = "k8s.ManifestApplyController"
            await assert_resource(state, WAIT_STATUSES, name, lambda r: "etcd" in r.spec.reason, timeout=5)
            state.create(SERVICES.new("etcd", ServiceSpec(running=True, healthy=True)))
            await assert_resource(
                state,
                WAIT_STATUSES,
                name,
                lambda r: (
                    r.spec.waiting_for == "admin kubeconfig" and "localhost admin kubeconfig" in r.spec.reason
                ),
                timeout=5,
            )

    run(main)


def test_apply_polls_readyz_until_the_api_server_is_ready_then_applies_at_once(tmp_path: Path) -> None:
    """A kube-apiserver that is not ready yet is asked again every ready_poll seconds, never on the
    apply's exponential backoff (600 s here): the bootstrap token must be there within seconds."""
    import json

    from kube_helpers import PKI, Reply, fake_apiserver, json_reply, status_reply

    from ichor.machined.controllers.k8s import manifest_apply
    from ichor.machined.platform import Layout
    from ichor.machined.resources import MANIFEST_STATUSES, SERVICES, ManifestSpec, ServiceSpec
    from ichor.machined.resources._k8s import K8S_SECRETS, K8S_SECRETS_ID, KubernetesSecretsSpec

    asked: list[str] = []
    not_ready = b"[+]ping ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n"

    async def handler(method: str, target: str, body: bytes) -> Reply:
        asked.append(f"{method} {target}")
        if target == "/readyz":
            return (200, b"ok", {}) if asked.count("GET /readyz") > 3 else (500, not_ready, {})
        if target == "/api/v1":
            resources = [{"name": "namespaces", "kind": "Namespace", "namespaced": False}]
            return json_reply(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources})
        if method == "POST":
            return json_reply(201, json.loads(body))
        return status_reply(404, "NotFound", "not found")

    async def main() -> None:
        controller = manifest_apply.ManifestApplyController(
            Layout(tmp_path, "127.0.0.1"), None, first_retry=600.0, ready_poll=0.05
        )
        async with fake_apiserver(handler) as url, running(controller) as state:
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
            state.create(MANIFESTS.new("00-x", ManifestSpec(items=(namespace,))))
            state.create(SERVICES.new("etcd", ServiceSpec(running=True, healthy=True)))
            state.create(
                K8S_SECRETS.new(
                    K8S_SECRETS_ID, KubernetesSecretsSpec(localhost_admin_kubeconfig=PKI.kubeconfig(url))
                )
            )
            await assert_resource(
                state, WAIT_STATUSES, "k8s.ManifestApplyController",
                lambda r: r.spec.waiting_for == "kube-apiserver ready" and "bootstrap-roles" in r.spec.reason,
                timeout=30,
            )  # fmt: skip
            status = await assert_resource(state, MANIFEST_STATUSES, "manifests", timeout=30)
            assert list(status.spec.manifests_applied) == ["00-x"]
        # nothing but the probe until it said ready, then the apply: no object touched before
        assert asked[:4] == ["GET /readyz"] * 4
        assert asked[4:] == [
            "GET /api/v1",
            "GET /api/v1/namespaces/x",
            "POST /api/v1/namespaces?fieldManager=talos",
        ]

    run(main)
