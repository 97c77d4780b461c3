"""The CRI containerd's containers named by pod as Talos 1.7 names them (``talosctl containers -k``,
``logs -k``): the names, their parsing, statuses from the CRI status file, which container a
name finds."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ichor.machined import cri
from ichor.machined.cri import Container, CRIError

POD = "kube-system/kube-apiserver-cp-1"
SANDBOX_ID = "69c3a12a315c4f3e8b0b80cef327d91b0c6d1e86f1918e8e9344141b6a3de6aa"
OLD_ID = "497266b87302b0bc914dc1d2ca7cf39d6b6375cb6aa3680ccf46a9b89b35c53e"
NEW_ID = "4a628fbd031a278df56081fae166fa66767fdc3a83052f9066fcb9572787bc30"


def _labels(name: str = "", pod: str = "kube-apiserver-cp-1") -> dict[str, str]:
    labels = {"io.kubernetes.pod.namespace": "kube-system", "io.kubernetes.pod.name": pod}
    return labels | ({"io.kubernetes.container.name": name} if name else {})


def _info(labels: dict[str, str], log_path: str = "") -> dict[str, Any]:
    meta = base64.b64encode(
        json.dumps({"Version": "v1", "Metadata": {"LogPath": log_path}}).encode()
    ).decode()
    extensions = (
        {"io.cri-containerd.container.metadata": {"type_url": "x", "value": meta}} if log_path else {}
    )
    return {"Labels": labels, "Extensions": extensions}


class FakeCtr:
    def __init__(self, containers: list[Container], infos: dict[str, dict[str, Any]]) -> None:
        self._containers, self._infos = containers, infos

    async def containers(self, namespace: str) -> list[Container]:
        assert namespace == "k8s.io"
        return self._containers

    async def info(self, namespace: str, container_id: str) -> dict[str, Any]:
        if container_id not in self._infos:
            raise CRIError(f"ctr containers info {container_id}: container not found")
        return self._infos[container_id]


def test_display_names_are_talos_ones_and_parse_back() -> None:
    assert cri.display_id(POD, "", SANDBOX_ID) == POD
    shown = cri.display_id(POD, "kube-apiserver", NEW_ID)
    assert shown == f"{POD}:kube-apiserver:4a628fbd031a"
    assert cri.parse_display(shown) == (
        "kube-system",
        "kube-apiserver-cp-1",
        "kube-apiserver",
        "4a628fbd031a",
    )
    assert cri.parse_display(f"{POD}:kube-apiserver") == (
        "kube-system",
        "kube-apiserver-cp-1",
        "kube-apiserver",
        "",
    )
    assert cri.parse_display(POD) == ("kube-system", "kube-apiserver-cp-1", "", "")
    for not_a_pod_name in (NEW_ID, "/pod", "ns/", ""):
        assert cri.parse_display(not_a_pod_name) is None


def _status_files(tmp_path: Path) -> Path:
    for cid, status in {
        OLD_ID: {"CreatedAt": 100, "StartedAt": 110, "FinishedAt": 120, "ExitCode": 1},
        NEW_ID: {"CreatedAt": 200, "StartedAt": 210, "FinishedAt": 0, "ExitCode": 0, "Pid": 442},
    }.items():
        (tmp_path / cid).mkdir()
        (tmp_path / cid / "status").write_text(json.dumps({"Version": "v1", **status}))
    return tmp_path


def _listing(tmp_path: Path, *, sandbox_status: str = "RUNNING") -> list[cri.PodContainer]:
    log = "/var/log/pods/kube-system_kube-apiserver-cp-1_uid/kube-apiserver/{}.log"
    ctr = FakeCtr(
        [
            Container(NEW_ID, "registry.k8s.io/kube-apiserver:v1.30.3", 442, "RUNNING"),
            Container(OLD_ID, "registry.k8s.io/kube-apiserver:v1.30.3", 0, "CREATED"),  # task deleted on exit
            Container(SANDBOX_ID, "registry.k8s.io/pause:3.8", 302, sandbox_status),
            Container("busybox", "docker.io/library/busybox:1.36", 77, "RUNNING"),  # ctr run by hand
            Container("gone", "x", 0, "CREATED"),  # removed between the list and its info
        ],
        {
            NEW_ID: _info(_labels("kube-apiserver"), log.format(1)),
            OLD_ID: _info(_labels("kube-apiserver"), log.format(0)),
            SANDBOX_ID: _info(_labels()),
            "busybox": _info({}),
        },
    )
    return asyncio.run(cri.pod_containers(ctr, "k8s.io", _status_files(tmp_path)))  # type: ignore[arg-type]


def test_pods_list_sandbox_first_then_attempts_with_cri_statuses(tmp_path: Path) -> None:
    listed = _listing(tmp_path)
    shown = [(c.display, c.pod_id, c.pid, c.status) for c in listed]
    assert shown == [
        ("busybox", "busybox", 77, "RUNNING"),
        (POD, POD, 302, "SANDBOX_READY"),
        (f"{POD}:kube-apiserver:497266b87302", POD, 0, "CONTAINER_EXITED"),
        (f"{POD}:kube-apiserver:4a628fbd031a", POD, 442, "CONTAINER_RUNNING"),
    ]
    assert listed[2].exit_code == 1
    assert listed[3].log_path.endswith("/kube-apiserver/1.log")


def test_a_pod_whose_sandbox_is_not_ready_is_not_listed(tmp_path: Path) -> None:
    assert [c.display for c in _listing(tmp_path, sandbox_status="STOPPED")] == ["busybox"]


@pytest.mark.parametrize(
    ("wanted", "found"),
    [
        (f"{POD}:kube-apiserver", NEW_ID),  # no id: the newest attempt
        (f"{POD}:kube-apiserver:497266b87302", OLD_ID),
        (f"{POD}:kube-apiserver:4a6", NEW_ID),
        (POD, SANDBOX_ID),
        ("busybox", "busybox"),
        (f"{POD}:kube-apiserver:ffff", None),
        (f"{POD}:etcd", None),
        ("kube-system/kube-apiserver-cp-2:kube-apiserver", None),
        (NEW_ID, None),  # a pod's container goes by its pod name, as in Talos
    ],
)
def test_a_name_finds_its_container(tmp_path: Path, wanted: str, found: str | None) -> None:
    match = cri.find_pod_container(_listing(tmp_path), wanted)
    assert (match.id if match else None) == found


def test_unreadable_cri_metadata_leaves_no_log_path() -> None:
    info = {"Labels": _labels("kube-apiserver"),
            "Extensions": {"io.cri-containerd.container.metadata": {"value": "not base64!"}}}  # fmt: skip
    named = cri.pod_container(Container(NEW_ID, "img", 0, "CREATED"), info, {})
    assert (named.log_path, named.status) == ("", "CONTAINER_CREATED")
