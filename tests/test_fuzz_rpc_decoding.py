"""Fuzz: each RPC's request decoding, and the file RPCs' paths.

Random bytes decoded as every request type machined serves (the machine API, maintenance mode,
trustd) give a message or ``InvalidArgument`` -- the codec the servers use, so this is exactly
what a handler sees. Random paths (``..``, NUL, links out of the root and in loops) given to
``ls``/``read``/``cp`` give an answer or a gRPC status, and never a byte of a file outside the root.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fuzz_budget import budget
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from hypothesis import example, given
from hypothesis import strategies as st
from test_request_decoding import SERVERS

from ichor.api.gen.machine import machine_pb2
from ichor.machined.platform import Layout
from ichor.machined.server import _files
from ichor.machined.server._codec import RequestCodec

pytestmark = pytest.mark.fuzz

CODEC = RequestCodec()
REQUEST_TYPES = sorted(
    {
        handler_method.request_type
        for build in SERVERS.values()
        for handler in build(Layout(root=Path("/nonexistent"), address="127.5.0.2"))
        for handler_method in handler.__mapping__().values()
    },
    key=lambda t: t.DESCRIPTOR.full_name,
)


@budget(400)
@given(st.sampled_from(REQUEST_TYPES), st.binary(max_size=256))
def test_random_bytes_decode_to_a_message_or_invalid_argument(request_type: Any, data: bytes) -> None:
    try:
        message = CODEC.decode(data, request_type)
    except GRPCError as exc:
        assert exc.status is Status.INVALID_ARGUMENT
        assert "grpc: error unmarshalling request" in str(exc.message)
    else:
        assert isinstance(message, request_type)


SECRET = b"host secret 7f3a"
_parts = st.sampled_from(
    ["var", "log", "..", ".", "", "x", "loop", "abs", "rel", "up", "etc", "shadow", "\0", "a\0b"]
)
_paths = st.lists(_parts, max_size=6).map("/".join) | st.lists(_parts, max_size=6).map(
    lambda p: "/" + "/".join(p)
)


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    base = tmp_path_factory.mktemp("fuzzroot")
    (base / "shadow").write_bytes(SECRET)
    root = base / "node"
    (root / "var/log").mkdir(parents=True)
    (root / "var/log/machined.log").write_text("booted\n")
    (root / "var/log/x").symlink_to("/etc/shadow")
    (root / "var/log/abs").symlink_to(base / "shadow")
    (root / "var/log/rel").symlink_to("../" * 10 + "shadow")
    (root / "var/log/up").symlink_to(base)
    (root / "var/log/loop").symlink_to("loop")
    (root / "etc").symlink_to("/var/log/up")
    os.mkfifo(root / "var/log/fifo")
    return Layout(root=root, address="127.5.0.2")


def _collect(call: Any) -> bytes:
    try:
        return b"".join(x if isinstance(x, bytes) else x.SerializeToString() for x in call())
    except GRPCError as exc:
        assert exc.status in (Status.INVALID_ARGUMENT, Status.UNKNOWN), exc
        return b""


@budget(300)
@given(path=_paths, recurse=st.booleans())
@example(path="/var/log/abs", recurse=False)
@example(path="/var/log/rel", recurse=False)
@example(path="/etc/shadow", recurse=False)
@example(path="/var/log/up/shadow", recurse=True)
def test_file_rpcs_never_leave_the_root(layout: Layout, path: str, recurse: bool) -> None:
    import gzip

    read = _collect(lambda: _files.read_file(layout, path))
    listed = _collect(lambda: _files.list_files(layout, machine_pb2.ListRequest(root=path, recurse=recurse)))
    copied = _collect(lambda: _files.copy_tar_gz(layout, path))
    for output in (read, listed, gzip.decompress(copied) if copied else b""):
        assert SECRET not in output
