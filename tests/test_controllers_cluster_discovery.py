"""controllers/cluster/discovery.py: affiliates through a real discovery server, encrypted per cluster."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import ipaddress
import os
from pathlib import Path

from discovery_helpers import Node, config_text, discovery_server, run, running

from ichor.discovery import RemoteAffiliate
from ichor.machined.controllers.cluster import affiliate_from_pb, affiliate_to_pb
from ichor.machined.controllers.cluster.discovery import affiliate_endpoints
from ichor.machined.cosi import assert_no_resource, assert_resource
from ichor.machined.resources import (
    AFFILIATES,
    DISCOVERY_STATUSES,
    ENDPOINTS,
    IDENTITIES,
    MEMBERS,
    RAW_NAMESPACE,
    AffiliateSpec,
    KubeSpanAffiliateSpec,
)
from ichor.machinery import TALOS_VERSION


def test_affiliate_survives_the_wire_encoding() -> None:
    spec = AffiliateSpec(
        node_id="n1",
        addresses=(ipaddress.ip_address("10.5.0.2"), ipaddress.ip_address("fd00::2")),
        hostname="cp-1.lab",
        nodename="cp-1",
        operating_system=f"Ichor ({TALOS_VERSION})",
        machine_type="controlplane",
    )
    back = affiliate_from_pb(RemoteAffiliate("n1", affiliate_to_pb(spec)))
    assert back == spec
    # KubeSpan's part: address and advertised networks in the affiliate, endpoints sealed beside it.
    spanning = dataclasses.replace(spec, kubespan=KubeSpanAffiliateSpec(
        public_key="K" * 43 + "=", address="fd00::3", additional_addresses=("10.244.1.0/24",),
        endpoints=("10.5.0.2:51820", "[fd00::2]:51820"),
    ))  # fmt: skip
    wire = RemoteAffiliate("n1", affiliate_to_pb(spanning), tuple(affiliate_endpoints(spanning)))
    assert affiliate_from_pb(wire) == spanning
    odd = affiliate_to_pb(spec)
    odd.machine_type = "toaster"
    odd.addresses.append(b"\x01\x02")
    assert affiliate_from_pb(RemoteAffiliate("n1", odd)).machine_type == "unknown"
    assert affiliate_from_pb(RemoteAffiliate("n1", odd)).addresses == spec.addresses


def test_two_nodes_see_each_other_as_members_and_a_reset_removes_one(tmp_path: Path) -> None:
    async def main() -> None:
        async with discovery_server() as server:
            endpoint = f"http://{server.endpoint}/"
            cp = Node(tmp_path / "cp", "127.44.1.2")
            worker = Node(tmp_path / "w", "127.44.1.3")
            async with running(cp, worker):
                cp.apply(config_text(hostname="cp-1", endpoint=endpoint))
                worker.apply(config_text(type="worker", hostname="worker-1", endpoint=endpoint))
                for node in (cp, worker):
                    await assert_resource(node.state, MEMBERS, "worker-1", timeout=10)
                    await assert_resource(node.state, MEMBERS, "cp-1", timeout=10)
                assert cp.member_names() == worker.member_names() == ["cp-1", "worker-1"]
                seen = worker.state.get("cluster", MEMBERS, "cp-1")
                assert seen.spec.machine_type == "controlplane"
                assert seen.spec.addresses == (ipaddress.ip_address("127.44.1.2"),)
                assert seen.spec.operating_system == f"Ichor ({TALOS_VERSION})"
                # Control plane endpoints: only the control plane node's address, on both nodes.
                for node in (cp, worker):
                    await assert_resource(
                        node.state, ENDPOINTS, "discovery",
                        lambda r: r.spec.addresses == (ipaddress.ip_address("127.44.1.2"),),
                    )  # fmt: skip
                raw = cp.state.list(RAW_NAMESPACE, AFFILIATES)
                assert [r.id for r in raw] == [
                    f"service/{worker.state.list('cluster', IDENTITIES)[0].spec.node_id}"
                ]

                await assert_resource(worker.state, DISCOVERY_STATUSES, "local", lambda r: r.spec.published)
                worker.request_reset()
                await assert_resource(
                    worker.state, DISCOVERY_STATUSES, "local", lambda r: r.spec.left, timeout=10
                )
                await assert_no_resource(cp.state, MEMBERS, "worker-1", timeout=10)
                assert cp.member_names() == ["cp-1"]
                assert len(server.store.list("cluster-one")) == 1

    run(main)


def test_a_node_with_another_cluster_secret_sees_no_one(tmp_path: Path) -> None:
    async def main() -> None:
        async with discovery_server() as server:
            endpoint = f"http://{server.endpoint}/"
            a = Node(tmp_path / "a", "127.44.1.4")
            b = Node(tmp_path / "b", "127.44.1.5")
            async with running(a, b):
                a.apply(config_text(hostname="a", endpoint=endpoint))
                b.apply(
                    config_text(
                        hostname="b", endpoint=endpoint, secret=base64.b64encode(os.urandom(32)).decode()
                    )
                )
                await assert_resource(a.state, MEMBERS, "a")
                await assert_resource(b.state, MEMBERS, "b")
                # Both are on the server, neither can read the other.
                while len(server.store.list("cluster-one")) < 2:
                    await asyncio.sleep(0.02)
                await asyncio.sleep(0.2)
                assert a.member_names() == ["a"] and b.member_names() == ["b"]
                assert a.runtime.status(a.discovery.name).restarts == 0

    run(main)
