"""The node side of ``talosctl netstat``: /proc/net socket tables parsed as Talos's records, and only
the sockets the node's own processes hold (a process node shares the host's network namespace)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from ichor.api.gen.machine import machine_pb2
from ichor.machined.server._netstat import netstat, parse_socket_table, socket_owners

TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000002 00:00000000 00000000  1000        0 4242 1 ffff9a0c 100 0 0 10 0
   1: 0100007F:A1B2 0200007F:0050 01 00000010:00000000 02:000000C8 00000003     0        0 4343 2 ffff9a0d 20 4 30 10 -1
   garbage line
"""
TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1 ffff 100 0 0 10 0
"""


def test_socket_tables_parse_like_the_kernel_writes_them() -> None:
    listen, connected = parse_socket_table("tcp", TCP)
    assert listen.local == ("127.0.0.1", 8080) and listen.remote == ("0.0.0.0", 0)
    assert (listen.state, listen.rx_queue, listen.uid, listen.inode) == (10, 2, 1000, 4242)
    assert connected.remote == ("127.0.0.2", 80) and connected.state == 1
    assert (connected.tx_queue, connected.timer, connected.timer_when, connected.retransmits) == (
        16,
        2,
        200,
        3,
    )
    (v6,) = parse_socket_table("tcp6", TCP6)
    assert v6.local == ("::1", 8081)


def _fake_proc(tmp_path: Path) -> Path:
    proc = tmp_path / "proc"
    (proc / "10" / "fd").mkdir(parents=True)
    (proc / "10" / "net").mkdir()
    (proc / "10" / "comm").write_text("etcd\n")
    (proc / "10" / "net" / "tcp").write_text(TCP)
    (proc / "10" / "net" / "tcp6").write_text(TCP6)
    os.symlink("socket:[4242]", proc / "10" / "fd" / "3")
    os.symlink("/dev/null", proc / "10" / "fd" / "0")
    return proc


def test_only_the_nodes_sockets_filtered_as_asked(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path)
    assert socket_owners([10, 99], proc) == {4242: (10, "etcd")}
    request = machine_pb2.NetstatRequest(filter=machine_pb2.NetstatRequest.LISTENING)
    request.l4proto.tcp = request.l4proto.tcp6 = True
    request.feature.pid = True
    (record,) = netstat(request, [10], proc)  # 4343 and 77 belong to other processes of the host
    assert (record.l4proto, record.localip, record.localport, record.state) == ("tcp", "127.0.0.1", 8080, 10)
    assert (record.process.pid, record.process.name, record.inode) == (10, "etcd", 4242)
    connected = machine_pb2.NetstatRequest(filter=machine_pb2.NetstatRequest.CONNECTED)
    assert netstat(connected, [10], proc) == []
    pods_only = machine_pb2.NetstatRequest(filter=machine_pb2.NetstatRequest.ALL)
    pods_only.netns.netns.append("cni-1234")
    assert netstat(pods_only, [10], proc) == []  # a process node has no pod network namespaces


def test_a_real_listening_socket_of_this_process_is_found() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        request = machine_pb2.NetstatRequest(filter=machine_pb2.NetstatRequest.LISTENING)
        request.l4proto.tcp = True
        request.feature.pid = True
        records = netstat(request, [os.getpid()])
    mine = [r for r in records if r.localport == port]
    assert len(mine) == 1 and mine[0].process.pid == os.getpid()
    assert all(r.process.pid == os.getpid() for r in records)
