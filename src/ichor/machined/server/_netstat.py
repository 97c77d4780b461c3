"""``Netstat`` and ``PacketCapture`` of ``machine.MachineService`` for a process node, as a mixin.

A process node shares the host's network namespace, so the kernel's socket tables
(``/proc/net/tcp`` ...) list every socket of the host, other nodes' included. What is the node's is
what its own processes hold: Netstat answers with the sockets whose inode is an open file of a
process in the node's process tree (machined and the services it started, etcd included), in
Talos's ``ConnectRecord`` form. A container node has its own network namespace, and its pods theirs:
``allnetns`` (``talosctl netstat --pods``) or ``netns`` names add the sockets of the named network
namespaces the CRI made (``/var/run/netns/cni-...``, every socket there is the pod's), each record
carrying the namespace's name, which ``containers -k`` gives each pod sandbox
(``network_namespace``), as Talos's go-netstat does; a process node has none.

``Stats`` is served with the containers (``_containers``).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from grpclib.server import Stream

from ichor.api.gen.machine import machine_pb2
from ichor.machined.server import _files, _pcap

POD_NETNS_DIR = "/var/run/netns"
"""Where the CRI binds the pods' network namespaces (containerd's ``netns_mounts_under``)."""

PROTOCOLS = ("tcp", "tcp6", "udp", "udp6", "udplite", "udplite6", "raw", "raw6")


@dataclass(frozen=True)
class Socket:
    """One line of ``/proc/net/<proto>``."""

    proto: str
    local: tuple[str, int]
    remote: tuple[str, int]
    state: int
    tx_queue: int
    rx_queue: int
    timer: int
    timer_when: int
    retransmits: int
    uid: int
    timeout: int
    inode: int
    ref: int
    pointer: int


def _address(text: str) -> tuple[str, int]:
    """``0100007F:1F90`` (little-endian 32-bit words, then the port in hex) as ``("127.0.0.1", 8080)``."""
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(packed)), int(port, 16)


def parse_socket_table(proto: str, text: str) -> list[Socket]:
    """The sockets of one ``/proc/net/<proto>`` file (the header line skipped, odd lines ignored)."""
    sockets = []
    for line in text.splitlines()[1:]:
        f = line.split()
        try:
            tx, rx = f[4].split(":")
            timer, when = f[5].split(":")
            sockets.append(
                Socket(
                    proto,
                    _address(f[1]),
                    _address(f[2]),
                    int(f[3], 16),
                    int(tx, 16),
                    int(rx, 16),
                    int(timer, 16),
                    int(when, 16),
                    int(f[6], 16),
                    int(f[7]),
                    int(f[8]),
                    int(f[9]),
                    int(f[10]),
                    int(f[11], 16),
                )
            )
        except (IndexError, ValueError):
            continue
    return sockets


def socket_owners(pids: Iterable[int], proc: Path = Path("/proc")) -> dict[int, tuple[int, str]]:
    """Socket inode -> (pid, command) for the open files of ``pids``."""
    owners: dict[int, tuple[int, str]] = {}
    for pid in pids:
        fd_dir = proc / str(pid) / "fd"
        try:
            command = (proc / str(pid) / "comm").read_text().strip()
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # exited, or not ours to look at
        for fd in fds:
            try:
                target = os.readlink(fd_dir / fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                owners.setdefault(int(target[8:-1]), (pid, command))
    return owners


def _wanted(request: Any) -> list[str]:
    chosen = [p for p in PROTOCOLS if getattr(request.l4proto, p)]
    return chosen or ["tcp", "tcp6", "udp", "udp6"]


def _matches(socket: Socket, filter_: int) -> bool:
    listening = ipaddress.ip_address(socket.remote[0]).is_unspecified and socket.remote[1] == 0
    if filter_ == machine_pb2.NetstatRequest.LISTENING:
        return listening
    if filter_ == machine_pb2.NetstatRequest.CONNECTED:
        return not listening
    return True


def named_netns(netns_dir: Path, pids: Iterable[int], proc: Path = Path("/proc")) -> dict[str, int]:
    """Each network namespace bound under ``netns_dir`` (the CRI's ``/var/run/netns``) -> a process
    in it, found by the namespace's inode; one no process is in is left out."""
    try:
        names = sorted(os.listdir(netns_dir))
    except OSError:
        return {}
    by_inode: dict[int, int] = {}
    for pid in pids:
        try:
            link = os.readlink(proc / str(pid) / "ns" / "net")  # net:[4026532281]
        except OSError:
            continue
        by_inode.setdefault(int(link[5:-1]), pid)
    found = {}
    for name in names:
        try:
            inode = os.stat(netns_dir / name).st_ino
        except OSError:
            continue
        if inode in by_inode:
            found[name] = by_inode[inode]
    return found


def netstat(
    request: Any, pids: list[int], proc: Path = Path("/proc"), pod_netns: dict[str, int] | None = None
) -> list[machine_pb2.ConnectRecord]:
    """The node's sockets as Talos's records, filtered as the request asks; ``pod_netns`` (name ->
    a process in it, :func:`named_netns`) adds the pods' namespaces the request names."""
    host = not request.HasField("netns") or request.netns.hostnetwork
    namespaces: list[tuple[str, int]] = [("", pids[0])] if host else []
    if request.HasField("netns") and pod_netns:
        chosen = set(pod_netns) if request.netns.allnetns else set(request.netns.netns)
        namespaces += [(name, pid) for name, pid in sorted(pod_netns.items()) if name in chosen]
    owners = socket_owners(pids, proc)
    records = []
    for netns, reader in namespaces:
        records += _records(request, proto_reader=reader, netns=netns, owners=owners, proc=proc)
    return records


def _records(
    request: Any, *, proto_reader: int, netns: str, owners: dict[int, tuple[int, str]], proc: Path
) -> list[machine_pb2.ConnectRecord]:
    """The sockets of the network namespace ``proto_reader`` is in: the node's own (``netns`` "")
    only those its processes hold (a process node shares the host's tables), a pod's all."""
    records = []
    for proto in _wanted(request):
        try:
            text = (proc / str(proto_reader) / "net" / proto).read_text()
        except OSError:
            continue  # the kernel has no such table (no udplite, no IPv6)
        for s in parse_socket_table(proto, text):
            if (not netns and s.inode not in owners) or not _matches(s, request.filter):
                continue
            record = machine_pb2.ConnectRecord(
                l4proto=proto, localip=s.local[0], localport=s.local[1], remoteip=s.remote[0],
                remoteport=s.remote[1], state=cast(Any, s.state), txqueue=s.tx_queue, rxqueue=s.rx_queue,
                tr=cast(Any, s.timer), timerwhen=s.timer_when, retrnsmt=s.retransmits, uid=s.uid, timeout=s.timeout, inode=s.inode,
                ref=s.ref, pointer=s.pointer,
            )  # fmt: skip
            record.netns = netns
            if request.feature.pid and s.inode in owners:
                pid, command = owners[s.inode]
                record.process.pid, record.process.name = pid, command
            records.append(record)
    return records


class NetstatMethods:
    """Mixed into MachineService: ``self._node.process_root()`` is the PID the node's processes descend from."""

    _node: Any

    async def _request(self, stream: Stream[Any, Any], name: str) -> Any:  # provided by MachineService
        raise NotImplementedError

    async def Netstat(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Netstat")
        pids = _files.process_tree(self._node.process_root())
        pod_netns = None
        if request.HasField("netns") and (request.netns.allnetns or request.netns.netns):
            pod_netns = named_netns(self._node.layout.path(POD_NETNS_DIR), pids)
        records = netstat(request, pids, pod_netns=pod_netns)
        await stream.send_message(
            machine_pb2.NetstatResponse(messages=[machine_pb2.Netstat(connectrecord=records)])
        )

    async def PacketCapture(self, stream: Stream[Any, Any]) -> None:
        await _pcap.packet_capture(self._node, await self._request(stream, "PacketCapture"), stream)
