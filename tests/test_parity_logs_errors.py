"""``talosctl logs <unknown>`` as Talos 1.7.6 prints it: a node's in-band error (``-n``: apid's
``metadata.error``, Go's ``err.Error()``) is ``ERROR: <node>: <error>`` on stderr (Talos prints no
node; its own check is ``ERROR:.+ log "x" was not registered``) and the exit status 1,
the other nodes' lines still printed; a call that fails outright (no ``-n``: no apid proxying) is
the gRPC error itself, exit status 1."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from test_cli_etcd_harness import FakeNode

from ichor.api.gen.common import common_pb2

NOT_REGISTERED = 'rpc error: code = Unknown desc = log "servicenotfound" was not registered'


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    async def logs(stream: Any) -> None:
        request = await stream.recv_message()
        if request.id == "outright":
            raise GRPCError(Status.UNKNOWN, 'log "outright" was not registered')
        good = common_pb2.Data(bytes=b"hello\n")
        good.metadata.hostname = "10.5.0.3"
        await stream.send_message(good)
        failed = common_pb2.Data()
        failed.metadata.hostname = "10.5.0.2"
        failed.metadata.error = NOT_REGISTERED
        failed.metadata.status.code = 2
        failed.metadata.status.message = 'log "servicenotfound" was not registered'
        await stream.send_message(failed)

    fake = FakeNode(tmp_path, "127.77.9.7")
    fake.handlers["Logs"] = logs
    with fake.serving():
        yield fake


def test_a_nodes_unknown_log_is_talos_error_line(node: FakeNode, talosctl: Any) -> None:
    r = talosctl(*node.args("10.5.0.2", "10.5.0.3"), "logs", "servicenotfound")
    assert r.exit_code == 1
    assert r.stdout == "10.5.0.3: hello\n"
    assert r.stderr == f"ERROR: 10.5.0.2: {NOT_REGISTERED}\n"
    assert re.fullmatch(r'ERROR:.+ log "servicenotfound" was not registered\n', r.stderr)


def test_a_call_that_fails_outright_is_the_grpc_error(node: FakeNode, talosctl: Any) -> None:
    r = talosctl(*node.args(), "logs", "outright")
    assert r.exit_code == 1 and r.stdout == ""
    assert 'rpc error: code = Unknown desc = log "outright" was not registered' in r.stderr
