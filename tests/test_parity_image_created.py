"""``talosctl image ls``'s CREATED column, as Talos 1.7.6 prints it: containerd's ``created_at`` of
each image (read from containerd's Images API, which ``ctr images ls`` does not print), sent as
``ImageListResponse.created_at`` and printed as Go's ``time.RFC3339`` in UTC."""

from __future__ import annotations

import asyncio
import stat
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from grpclib.client import Channel
from grpclib.server import Server, Stream
from test_cli_etcd_harness import FakeNode

from ichor.api.gen.containerd import images_grpc, images_pb2
from ichor.api.gen.machine import machine_grpc, machine_pb2
from ichor.cli._image import rfc3339
from ichor.machined import authz, cri
from ichor.machined.cri import ContainerdUnavailableError
from ichor.machined.platform import Layout
from ichor.machined.server import _containers
from ichor.machined.server._machine import MachineService

KUBELET = "ghcr.io/siderolabs/kubelet:v1.30.3"
PAUSE = "registry.k8s.io/pause:3.9"
CREATED = datetime(2024, 7, 18, 9, 30, 15, 123456, tzinfo=UTC)


class FakeImages(images_grpc.ImagesBase):
    """containerd's Images service: ``KUBELET`` with a creation time, in whichever namespace."""

    def __init__(self) -> None:
        self.namespaces: list[str | None] = []

    async def List(self, stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        self.namespaces.append(dict(stream.metadata or {}).get("containerd-namespace"))
        image = images_pb2.Image(name=KUBELET)
        image.created_at.FromDatetime(CREATED)
        image.target.digest = "sha256:" + "a" * 64
        await stream.send_message(images_pb2.ListImagesResponse(images=[image]))


@asynccontextmanager
async def containerd(images: FakeImages) -> AsyncIterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        server = Server([images])
        path = Path(tmp) / "containerd.sock"
        await server.start(path=str(path))
        try:
            yield path
        finally:
            server.close()
            await server.wait_closed()


def _fake_ctr(tmp_path: Path) -> str:
    """A ``ctr`` that prints what containerd 1.6's ``ctr images ls`` prints for two images."""
    script = tmp_path / "ctr"
    script.write_text(
        "#!/bin/sh\ncat <<'EOF'\n"
        "REF TYPE DIGEST SIZE PLATFORMS LABELS\n"
        f"{KUBELET} application/vnd.oci.image.index.v1+json sha256:{'a' * 64} 31.0 MiB linux/amd64 -\n"
        f"{PAUSE} application/vnd.oci.image.index.v1+json sha256:{'b' * 64} 311.0 KiB linux/amd64 -\n"
        "EOF\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_each_image_gets_containerds_creation_time(tmp_path: Path) -> None:
    fake = FakeImages()

    async def go() -> list[cri.Image]:
        async with containerd(fake) as socket:
            return await cri.Ctr(socket, binary=_fake_ctr(tmp_path)).images("system")

    kubelet, pause = asyncio.run(go())
    assert (kubelet.name, kubelet.created) == (KUBELET, CREATED)
    assert (pause.name, pause.created) == (PAUSE, None)  # not in the API's answer: not guessed
    assert fake.namespaces == ["system"]


def test_a_containerd_that_does_not_answer_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ContainerdUnavailableError, match="does not answer"):
        asyncio.run(cri.Ctr(tmp_path / "none.sock", binary=_fake_ctr(tmp_path)).image_times("k8s.io"))


class _FakeCtr:
    def __init__(self, address: Path, *, binary: str | None = None) -> None:
        pass

    async def images(self, namespace: str) -> list[cri.Image]:
        return [
            cri.Image(name=KUBELET, digest="sha256:" + "a" * 64, size=31_000_000, created=CREATED),
            cri.Image(name=PAUSE, digest="sha256:" + "b" * 64, size=311_000),
        ]


def test_image_list_sends_created_at(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(cri, "Ctr", _FakeCtr)
    monkeypatch.setattr(_containers, "skip_reason", lambda layout: "")
    node = SimpleNamespace(layout=Layout(root=tmp_path, address="127.5.0.2"))

    async def go() -> list[Any]:
        with tempfile.TemporaryDirectory() as tmp:
            server = Server([MachineService(node, roles_of=lambda s: authz.roles_from_metadata(s.metadata))])
            path = str(Path(tmp) / "machine.sock")
            await server.start(path=path)
            channel = Channel(path=path)
            try:
                stub = machine_grpc.MachineServiceStub(channel)
                request = machine_pb2.ImageListRequest(namespace=1)
                return list(await stub.ImageList(request, metadata=[("talos-role", "os:reader")]))
            finally:
                channel.close()
                server.close()
                await server.wait_closed()

    kubelet, pause = asyncio.run(go())
    assert kubelet.HasField("created_at") and kubelet.created_at.ToDatetime(tzinfo=UTC) == CREATED
    assert not pause.HasField("created_at")


def test_created_prints_as_go_rfc3339_in_utc() -> None:
    reply = machine_pb2.ImageListResponse()
    reply.created_at.FromDatetime(CREATED)
    assert rfc3339(reply.created_at) == "2024-07-18T09:30:15Z"
    assert rfc3339(machine_pb2.ImageListResponse().created_at) == "1970-01-01T00:00:00Z"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    async def image_list(stream: Any) -> None:
        await stream.recv_message()
        for name, created in ((KUBELET, CREATED), (PAUSE, None)):
            reply = machine_pb2.ImageListResponse(name=name, digest="sha256:" + "c" * 64, size=31_000_000)
            if created is not None:
                reply.created_at.FromDatetime(created)
            await stream.send_message(reply)

    fake = FakeNode(tmp_path, "127.77.9.6")
    fake.handlers["ImageList"] = image_list
    with fake.serving():
        yield fake


def test_image_ls_has_talos_columns(node: FakeNode, talosctl: Any) -> None:
    for args in (("image", "ls"), ("image", "l"), ("images", "list", "--namespace", "system")):
        r = talosctl(*node.args(), *args)
        assert r.exit_code == 0, r.stderr
        rows = [line.split() for line in r.stdout.splitlines()]
        assert rows[0] == ["NODE", "IMAGE", "DIGEST", "SIZE", "CREATED"]
        assert rows[1][1] == KUBELET and rows[1][3:] == ["31", "MB", "2024-07-18T09:30:15Z"]
        assert rows[2][1] == PAUSE and rows[2][-1] == "1970-01-01T00:00:00Z"
