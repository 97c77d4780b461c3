"""The static pod list's UIDs and its "kubelet registered" annotation (what makes the kubelet create
the control plane's mirror pods at once instead of at its next 1-minute pod resync)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from controller_helpers import ADDRESS, run, running

from ichor.machined.controllers.k8s import static_pod_server
from ichor.machined.controllers.k8s.kubelet_render import CLIENT_CERTIFICATE
from ichor.machined.controllers.k8s.static_pod_server import (
    REGISTERED_ANNOTATION,
    StaticPodServerController,
    pod_list,
)
from ichor.machined.cosi import assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources._k8s import STATIC_POD_SERVER_STATUSES, STATIC_PODS, StaticPodSpec

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
       "spec": {"containers": [{"name": "web", "image": "nginx"}]}}  # fmt: skip


def _items(body: bytes) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(body)["items"]
    return items


def test_the_uid_stays_when_only_the_registered_annotation_comes() -> None:
    before = _items(pod_list([("default-web", POD)], salt="http://127.0.0.1:1"))[0]
    after = _items(pod_list([("default-web", POD)], salt="http://127.0.0.1:1", serial=3))[0]
    assert before["metadata"]["uid"] == after["metadata"]["uid"]
    assert len(before["metadata"]["uid"]) == 32
    assert "annotations" not in before["metadata"]
    assert after["metadata"]["annotations"] == {REGISTERED_ANNOTATION: "3"}
    assert POD["metadata"] == {"name": "web", "namespace": "default"}  # the resource is not changed


def test_a_changed_pod_or_server_gets_another_uid_and_a_given_uid_is_kept() -> None:
    def uid(pod: dict[str, Any], salt: str = "a") -> str:
        return str(_items(pod_list([("x", pod)], salt=salt))[0]["metadata"]["uid"])

    other = {**POD, "spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}
    assert uid(POD) != uid(other)
    assert uid(POD) != uid(POD, salt="b")
    assert uid({**POD, "metadata": {"name": "web", "uid": "fixed"}}) == "fixed"


def test_the_serial_goes_up_each_step_of_the_window_after_the_client_certificate(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Budget 2 s: the controller looks for the certificate every 0.05 s here."""
    monkeypatch.setattr(static_pod_server, "REGISTERED_POLL", 0.05)
    layout = Layout(root=tmp_path, address=ADDRESS)
    now = [1000.0]
    step = static_pod_server.SERIAL_STEP

    async def fetch(url: str) -> list[dict[str, Any]]:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET / HTTP/1.1\r\n\r\n")
        data = await reader.read()
        writer.close()
        return _items(data.partition(b"\r\n\r\n")[2])

    async def main() -> None:
        async with running(StaticPodServerController(layout, clock=lambda: now[0])) as state:
            state.create(STATIC_PODS.new("default-web", StaticPodSpec(POD)))
            status = await assert_resource(state, STATIC_POD_SERVER_STATUSES, "static-pod-server-status",
                                           lambda r: True)  # fmt: skip
            for _ in range(40):
                items = await fetch(status.spec.url)
                if items:
                    break
                await asyncio.sleep(0.05)
            assert "annotations" not in items[0]["metadata"]
            first_uid = items[0]["metadata"]["uid"]
            cert = layout.path(CLIENT_CERTIFICATE)
            cert.parent.mkdir(parents=True)
            cert.write_text("cert")
            for _ in range(40):
                items = await fetch(status.spec.url)
                if items[0]["metadata"].get("annotations"):
                    break
                await asyncio.sleep(0.05)
            assert items[0]["metadata"]["annotations"] == {REGISTERED_ANNOTATION: "1"}
            assert items[0]["metadata"]["uid"] == first_uid
            # Within a step every fetch gets the same bytes (the kubelet drops them unread).
            now[0] += step / 2
            assert (await fetch(status.spec.url))[0]["metadata"] == items[0]["metadata"]
            now[0] += step / 2
            again = (await fetch(status.spec.url))[0]["metadata"]
            assert again["annotations"] == {REGISTERED_ANNOTATION: "2"}
            assert again["uid"] == first_uid
            now[0] += static_pod_server.REGISTERED_WINDOW  # the window is over: the list stays
            last = (await fetch(status.spec.url))[0]["metadata"]
            assert last["annotations"] == {
                REGISTERED_ANNOTATION: str(1 + int(static_pod_server.REGISTERED_WINDOW // step))
            }
            now[0] += 1000
            assert (await fetch(status.spec.url))[0]["metadata"] == last

    run(main, timeout=5)
