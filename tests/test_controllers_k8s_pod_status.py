"""``k8s.KubeletStaticPodController``: the kubelet's static pods -> ``StaticPodStatuses``, asked over
TLS as a control plane's API server asks a kubelet (a fake kubelet on loopback here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller_helpers import ADDRESS, run, running
from kube_helpers import DAY, PKI, KubePKI, Reply, fake_apiserver, json_reply

from ichor import kubeapi
from ichor.machined import cri
from ichor.machined.controllers.k8s import static_pod_status
from ichor.machined.controllers.k8s.static_pod_status import (
    SERVING_CERT,
    KubeletEndpoint,
    KubeletStaticPodController,
    static_pods,
    with_cri_states,
)
from ichor.machined.cosi import WAIT_STATUSES, State, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import SERVICES, ServiceSpec
from ichor.machined.resources._k8s import (
    K8S_DYNAMIC_CERTS,
    K8S_DYNAMIC_CERTS_ID,
    K8S_ROOT_ID,
    K8S_ROOT_SECRETS,
    STATIC_POD_STATUSES,
    KubernetesDynamicCertsSpec,
    KubernetesRootSpec,
)
from ichor.machined.resources._kubelet import NODENAME_ID, NODENAMES, NodenameSpec
from ichor.machined.resources._secrets import PEMCertificateAndKey
from ichor.machinery.jsonpath import render_jsonpath
from ichor.machinery.pki import new_keypair

APISERVER = "kube-system/kube-apiserver-cp-1"
READY = '{.conditions[?(@.type=="Ready")].status}'


def _pod(name: str, source: str | None, ready: str, **status: Any) -> dict[str, Any]:
    annotations = {"kubernetes.io/config.source": source} if source else {}
    conditions = [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": ready}]
    return {
        "metadata": {"name": name, "namespace": "kube-system", "annotations": annotations},
        "status": {"phase": "Running", "conditions": conditions, **status},
    }


CRASHING = {
    "containerStatuses": [{
        "name": "kube-apiserver", "ready": False, "restartCount": 2,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting failed container"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
    }]
}  # fmt: skip


def test_static_pods_are_the_kubelets_own() -> None:
    pods = [
        _pod("kube-apiserver-cp-1", "http", "True"),
        _pod("nginx-cp-1", "file", "True"),
        _pod("coredns-abc", "api", "True"),  # from the API server: not a static pod
        _pod("no-source", None, "True"),
        {"metadata": "not a map"},
    ]
    assert sorted(static_pods(pods)) == [APISERVER, "kube-system/nginx-cp-1"]


def _seed(state: State, client: KubePKI) -> None:
    pair = PEMCertificateAndKey(client.admin.crt, client.admin.key)
    state.create(
        K8S_DYNAMIC_CERTS.new(
            K8S_DYNAMIC_CERTS_ID, KubernetesDynamicCertsSpec(api_server_kubelet_client=pair)
        )
    )
    state.create(K8S_ROOT_SECRETS.new(K8S_ROOT_ID, KubernetesRootSpec(name="test")))
    state.create(NODENAMES.new(NODENAME_ID, NodenameSpec(nodename="cp-1")))
    state.create(SERVICES.new("kubelet", ServiceSpec(running=True)))


def _kubelet_pki() -> KubePKI:
    """A kubelet's serving certificate: for its node name only (not for 127.0.0.1)."""
    serving = new_keypair(PKI.ca, common_name="cp-1", ttl=DAY, server=True, client=False, dns_names=["cp-1"])
    return KubePKI(PKI.ca, serving, PKI.admin)


def test_statuses_follow_the_kubelets_pods_over_tls(tmp_path: Path) -> None:
    pods = [_pod("kube-apiserver-cp-1", "http", "True"), _pod("coredns-abc", "api", "True")]
    asked: list[str] = []

    async def kubelet(method: str, target: str, body: bytes) -> Reply:
        asked.append(f"{method} {target}")
        return json_reply(200, {"kind": "PodList", "items": pods})

    async def main() -> None:
        (tmp_path / SERVING_CERT.lstrip("/")).parent.mkdir(parents=True)
        (tmp_path / SERVING_CERT.lstrip("/")).write_bytes(PKI.ca.crt)
        async with fake_apiserver(kubelet, _kubelet_pki()) as url:
            real = static_pod_status._fetch_pods

            async def at_fake(endpoint: KubeletEndpoint) -> list[dict[str, Any]]:
                assert endpoint.url == "https://127.0.0.1:10250" and endpoint.server_name == "cp-1"
                return await real(KubeletEndpoint(url, endpoint.ca, "cp-1", endpoint.cert, endpoint.key))

            layout = Layout(root=tmp_path, address=ADDRESS)
            controller = KubeletStaticPodController(layout, fetch=at_fake, refresh=0.05)
            async with running(controller) as state:
                _seed(state, PKI)
                found = await assert_resource(state, STATIC_POD_STATUSES, APISERVER, timeout=5)
                assert found.metadata.namespace == "k8s"
                assert render_jsonpath(READY, dict(found.spec)) == "True"
                assert [r.id for r in state.list("k8s", STATIC_POD_STATUSES)] == [APISERVER]  # not coredns

                pods[0] = _pod("kube-apiserver-cp-1", "http", "False", **CRASHING)
                crashing = await assert_resource(
                    state, STATIC_POD_STATUSES, APISERVER,
                    lambda r: render_jsonpath(READY, dict(r.spec)) == "False", timeout=5,
                )  # fmt: skip
                waiting = crashing.spec["containerStatuses"][0]["state"]["waiting"]
                assert waiting["reason"] == "CrashLoopBackOff"

                pods.pop(0)  # the pod is gone from the kubelet: so is its status
                await assert_no_resource(state, STATIC_POD_STATUSES, APISERVER, timeout=5)
        assert asked and set(asked) == {"GET /pods/"}

    run(main, timeout=60)


RUNNING = {
    "containerStatuses": [{"name": "kube-apiserver", "ready": True, "restartCount": 0,
                           "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]
}  # fmt: skip


def _container(cid: str, status: str, created_at: int, exit_code: int = 0) -> cri.PodContainer:
    return cri.PodContainer(cid, APISERVER, "kube-apiserver", "registry.k8s.io/kube-apiserver:v1.30.3", 0,
                            status, created_at=created_at, exit_code=exit_code)  # fmt: skip


def test_a_kubelet_that_refuses_leaves_the_statuses_with_the_cri_container_states(tmp_path: Path) -> None:
    """The API server restarted with a flag it rejects: the kubelet, which authorizes through it,
    refuses; the status says Ready no more and why, from the CRI runtime."""
    answers: list[list[dict[str, Any]] | Exception] = [
        [_pod("kube-apiserver-cp-1", "http", "True", **RUNNING)]
    ]
    refusal = kubeapi.KubeStatusError(
        "Authorization error (user=apiserver-kubelet-client, verb=get, resource=nodes, subresource=proxy)",
        code=500, reason="InternalError",
    )  # fmt: skip
    in_cri: list[cri.PodContainer] | cri.CRIError = [_container("a" * 64, "CONTAINER_RUNNING", 1)]

    async def fetch(endpoint: KubeletEndpoint) -> list[dict[str, Any]]:
        assert endpoint.cert == PKI.admin.crt and endpoint.ca == b"kubelet's own CA"
        answer = answers[-1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def containers() -> list[cri.PodContainer]:
        if isinstance(in_cri, cri.CRIError):
            raise in_cri
        return in_cri

    async def main() -> None:
        nonlocal in_cri
        (tmp_path / SERVING_CERT.lstrip("/")).parent.mkdir(parents=True)
        layout = Layout(root=tmp_path, address=ADDRESS)
        controller = KubeletStaticPodController(layout, fetch=fetch, containers=containers, refresh=0.05)
        async with running(controller) as state:
            _seed(state, PKI)
            await assert_resource(
                state, WAIT_STATUSES, "k8s.KubeletStaticPodController",
                lambda r: "serving certificate" in r.spec.reason,
            )  # fmt: skip
            (tmp_path / SERVING_CERT.lstrip("/")).write_bytes(b"kubelet's own CA")
            await assert_resource(
                state, STATIC_POD_STATUSES, APISERVER, lambda r: render_jsonpath(READY, dict(r.spec)) == "True",
                timeout=5,
            )  # fmt: skip

            in_cri = cri.CRIError("containerd at /run/containerd/containerd.sock does not answer")
            answers.append(refusal)
            await assert_resource(
                state, WAIT_STATUSES, "k8s.KubeletStaticPodController",
                lambda r: "Authorization error" in r.spec.reason, timeout=5,
            )  # fmt: skip
            assert (
                render_jsonpath(READY, dict(state.get("k8s", STATIC_POD_STATUSES, APISERVER).spec)) == "True"
            )

            in_cri = [
                _container("a" * 64, "CONTAINER_EXITED", 1, 0),
                _container("b" * 64, "CONTAINER_EXITED", 2, 1),
            ]
            found = await assert_resource(
                state, STATIC_POD_STATUSES, APISERVER, lambda r: render_jsonpath(READY, dict(r.spec)) == "False",
                timeout=5,
            )  # fmt: skip
            entry = found.spec["containerStatuses"][0]
            assert entry["state"]["terminated"] == {
                "exitCode": 1,
                "reason": "Error",
                "containerID": "containerd://" + "b" * 64,
            }
            assert entry["ready"] is False and entry["restartCount"] == 0
            assert "Authorization error" in found.spec["message"]

            state.update(state.get("runtime", SERVICES, "kubelet").with_spec(ServiceSpec(running=False)))
            await assert_no_resource(state, STATIC_POD_STATUSES, APISERVER, timeout=5)

    run(main, timeout=60)


def test_cri_states_leave_a_pod_without_containers_there_as_it_was() -> None:
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}], **RUNNING}
    assert with_cri_states(APISERVER, status, [], "refused") == status
    other = cri.PodContainer("c" * 64, "kube-system/other", "x", "img", 0, "CONTAINER_EXITED", exit_code=2)
    assert with_cri_states(APISERVER, status, [other], "refused") == status


def test_a_worker_asks_nothing(tmp_path: Path) -> None:
    async def fetch(endpoint: KubeletEndpoint) -> list[dict[str, Any]]:
        raise AssertionError("a worker has no certificate the kubelet would accept")

    async def main() -> None:
        layout = Layout(root=tmp_path, address=ADDRESS)
        async with running(KubeletStaticPodController(layout, fetch=fetch, refresh=0.02)) as state:
            state.create(NODENAMES.new(NODENAME_ID, NodenameSpec(nodename="w-1")))
            state.create(SERVICES.new("kubelet", ServiceSpec(running=True)))
            await assert_no_resource(state, STATIC_POD_STATUSES, APISERVER, timeout=0.3)
            assert state.list("k8s", STATIC_POD_STATUSES) == []

    run(main, timeout=30)


def test_cri_states_fill_a_pending_pod_the_kubelet_listed_no_containers_of() -> None:
    """The kubelet accepted a changed pod (``Pending``, no statuses, no conditions) and then stopped
    answering: its containers' CRI states make it not Ready, with the exit that shows why."""
    pending = {"phase": "Pending", "containerStatuses": [], "conditions": []}
    exited = cri.PodContainer("d" * 64, APISERVER, "kube-apiserver", "registry.k8s.io/kube-apiserver:v1.30.3",
                              0, "CONTAINER_EXITED", created_at=2, exit_code=1)  # fmt: skip
    shown = with_cri_states(APISERVER, pending, [exited], "refused")
    assert shown["containerStatuses"] == [{
        "name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.30.3",
        "containerID": "containerd://" + "d" * 64, "ready": False, "restartCount": 0,
        "state": {"terminated": {"exitCode": 1, "reason": "Error", "containerID": "containerd://" + "d" * 64}},
    }]  # fmt: skip
    assert render_jsonpath(READY, shown) == "False"
    assert {c["type"]: c["status"] for c in shown["conditions"]} == {
        "ContainersReady": "False",
        "Ready": "False",
    }
    assert "refused" in shown["message"] and pending["conditions"] == []  # the input is not changed

    running = cri.PodContainer(
        "e" * 64, APISERVER, "kube-apiserver", "img", 7, "CONTAINER_RUNNING", created_at=3
    )
    assert (
        render_jsonpath(READY, with_cri_states(APISERVER, pending, [exited, running], "refused")) == "False"
    )
