"""``PacketCapture`` of ``machine.MachineService``: a pcap stream of one of the node's links.

Only a node with a network namespace of its own captures (its links are its own); a process node's
links are the host's, which no client of a node may read, so it refuses with FailedPrecondition.
"""

from __future__ import annotations

from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ichor.api.gen.common import common_pb2
from ichor.machined import pcap

__all__ = ["PROCESS_NODE", "packet_capture"]

PROCESS_NODE = (
    "packet capture needs a node with a network namespace of its own: this is a process node, whose links "
    "are the host's (create the cluster with --provisioner container)"
)


async def packet_capture(node: Any, request: Any, stream: Stream[Any, Any]) -> None:
    """Stream the pcap of ``request.interface`` until the client goes; ``node.layout.own_netns`` or refuse."""
    if not node.layout.own_netns:
        raise GRPCError(Status.FAILED_PRECONDITION, PROCESS_NODE)
    packets = pcap.capture(request.interface, promiscuous=request.promiscuous, snaplen=request.snap_len,
                           bpf_filter=len(request.bpf_filter))  # fmt: skip
    try:
        async for chunk in packets:
            await stream.send_message(common_pb2.Data(bytes=chunk))
    except pcap.CaptureError as err:
        raise GRPCError(Status.INVALID_ARGUMENT, str(err)) from err
    except OSError as err:
        raise GRPCError(Status.INTERNAL, f"capturing on {request.interface}: {err}") from err
    finally:
        await packets.aclose()
