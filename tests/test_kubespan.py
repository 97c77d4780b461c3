"""KubeSpan's identity and peers (issue 25): Talos's ULA prefix and EUI-64 address, WireGuard keys
(RFC 7748's X25519 vector), ``kubespan.IdentityController`` (keys generated once and kept in STATE,
0600; the address from ``cluster.id`` and the first MAC; nothing while disabled), the local
affiliate's KubeSpan address, key, endpoints and advertised networks, and
``kubespan.PeerSpecController`` (allowed IPs with Talos's overlap rule), two nodes learning each
other's keys through a real discovery service."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import ipaddress
from pathlib import Path
from typing import Any

import pytest
from controller_helpers import running

from ichor.api.gen.resource.definitions.kubespan.kubespan_pb2 import IdentitySpec
from ichor.machined.controllers.cluster.affiliates import local_affiliate_controller
from ichor.machined.controllers.kubespan import (
    allowed_ips,
    kubespan_identity_controller,
    kubespan_peer_spec_controller,
    load_or_new_private_key,
)
from ichor.machined.cosi import Resource, State, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    AFFILIATES,
    DISCOVERY_CONFIG_ID,
    DISCOVERY_CONFIGS,
    HOSTNAME_STATUSES,
    IDENTITIES,
    KUBESPAN_IDENTITIES,
    KUBESPAN_PEER_SPECS,
    LOCAL_IDENTITY_ID,
    MACHINE_TYPES,
    NODE_ADDRESS_FILTER_NO_K8S,
    NODE_ADDRESS_FILTER_ONLY_K8S,
    NODE_ADDRESSES,
    AffiliateSpec,
    DiscoveryConfigSpec,
    HostnameStatusSpec,
    KubeSpanAffiliateSpec,
    KubeSpanIdentitySpec,
    KubeSpanPeerSpecSpec,
    MachineTypeSpec,
    NodeAddressSpec,
    filtered_node_address_id,
)
from ichor.machined.resources import IdentitySpec as IdentitySpecCluster
from ichor.machined.resources._feature_configs import KUBESPAN_CONFIG_ID, KUBESPAN_CONFIGS, KubeSpanConfigSpec
from ichor.machined.resources._network_probes import (
    FIRST_HARDWARE_ADDR_ID,
    HARDWARE_ADDRESSES,
    HardwareAddrSpec,
)
from ichor.machined.resources._protoenc import encode_spec
from ichor.machinery.errors import KubeSpanError
from ichor.machinery.kubespan import ULA_KUBESPAN, eui64_address, new_private_key, public_key, ula_prefix

MAC = "34:56:78:9a:bc:de"


def test_the_ula_prefix_is_the_hash_of_the_cluster_id_with_fd_and_the_purpose() -> None:
    digest = hashlib.sha256(b"cluster-id").digest()[-16:]
    prefix = ula_prefix("cluster-id", ULA_KUBESPAN)
    raw = prefix.network_address.packed
    assert prefix.prefixlen == 64
    assert raw[0] == 0xFD and raw[1:7] == digest[1:7] and raw[7] == 0x02 and raw[8:] == bytes(8)
    assert ula_prefix("other", ULA_KUBESPAN) != prefix


def test_the_address_is_the_macs_modified_eui64_in_the_prefix() -> None:
    # RFC 4291 appendix A / RFC 7136's example: 34-56-78-9A-BC-DE -> 3656:78ff:fe9a:bcde.
    prefix = ipaddress.IPv6Network("fd00:1:2:302::/64")
    assert eui64_address(prefix, MAC) == ipaddress.IPv6Network("fd00:1:2:302:3656:78ff:fe9a:bcde/128")
    with pytest.raises(KubeSpanError, match="48-bit MAC"):
        eui64_address(prefix, "34:56:78")


def test_wireguard_keys_follow_x25519() -> None:
    # RFC 7748 6.1: Alice's private key and its public key.
    private = base64.b64encode(
        bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    ).decode()
    expected = bytes.fromhex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    assert base64.b64decode(public_key(private)) == expected
    key = base64.b64decode(new_private_key())
    assert len(key) == 32 and key[0] & 7 == 0 and key[31] & 0x80 == 0 and key[31] & 0x40
    with pytest.raises(KubeSpanError):
        public_key("bm90IGEga2V5")


def _put(state: State, resource: Resource[Any]) -> None:
    meta = resource.metadata
    if state.list(meta.namespace, meta.type) and any(
        r.metadata.id == meta.id for r in state.list(meta.namespace, meta.type)
    ):
        state.update(resource)
    else:
        state.create(resource)


def _publish(state: State, *, enabled: bool) -> None:
    _put(
        state, KUBESPAN_CONFIGS.new(KUBESPAN_CONFIG_ID, KubeSpanConfigSpec(enabled=enabled, cluster_id="cid"))
    )
    _put(
        state,
        HARDWARE_ADDRESSES.new(FIRST_HARDWARE_ADDR_ID, HardwareAddrSpec(name="eth0", hardware_addr=MAC)),
    )


def test_the_identity_is_kept_in_state_and_its_address_derived(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "root", "127.0.0.1")
    layout.ensure()
    subnet = ula_prefix("cid", ULA_KUBESPAN)

    async def main() -> str:
        async with running(kubespan_identity_controller(layout)) as state:
            _publish(state, enabled=False)
            await asyncio.sleep(0.2)
            await assert_no_resource(state, KUBESPAN_IDENTITIES, "local")
            assert not layout.kubespan_identity_file.exists()
            _publish(state, enabled=True)
            found = await assert_resource(
                state, KUBESPAN_IDENTITIES, "local",
                lambda r: r.spec.address == str(eui64_address(subnet, MAC)) and r.spec.subnet == str(subnet),
            )  # fmt: skip
            assert found.spec.public_key == public_key(found.spec.private_key)
            assert found.metadata.namespace == "kubespan"
            message = IdentitySpec.FromString(encode_spec(KUBESPAN_IDENTITIES.type, found.spec) or b"")
            assert (
                message.public_key,
                str(ipaddress.ip_address(message.address.ip)) + f"/{message.address.prefix_length}",
            ) == (
                found.spec.public_key,
                found.spec.address,
            )
            _publish(state, enabled=False)
            await assert_no_resource(state, KUBESPAN_IDENTITIES, "local")
            return found.spec.private_key

    key = asyncio.run(asyncio.wait_for(main(), 20))
    path = layout.kubespan_identity_file
    assert path.stat().st_mode & 0o777 == 0o600
    assert (
        f"privateKey: {key}\n" in path.read_text() and f"publicKey: {public_key(key)}\n" in path.read_text()
    )
    assert load_or_new_private_key(layout) == key  # kept across restarts and disable/enable
    path.write_text("privateKey: [not, a, key]\n")
    fresh = load_or_new_private_key(layout)
    assert fresh != key and public_key(fresh)


# --- peers ------------------------------------------------------------------------------------------


def _affiliate(
    node_id: str, name: str, address: str, key: str, ks_address: str, advertised: tuple[str, ...] = ()
) -> Any:
    return AFFILIATES.new(
        node_id,
        AffiliateSpec(
            node_id=node_id, addresses=(ipaddress.ip_address(address),), hostname=name, nodename=name,
            machine_type="worker",
            kubespan=KubeSpanAffiliateSpec(public_key=key, address=ks_address, additional_addresses=advertised,
                                           endpoints=(f"{address}:51820",)) if key else None,
        ),
    )  # fmt: skip


def test_allowed_ips_are_the_peers_addresses_less_what_an_earlier_peer_claimed() -> None:
    first = allowed_ips("fd00::1", ["10.5.0.2"], ["10.244.0.0/24"], [])
    assert [str(p) for p in first] == ["10.5.0.2/32", "10.244.0.0/24", "fd00::1/128"]
    second = allowed_ips("fd00::2", ["10.5.0.3"], ["10.244.0.0/23"], first)
    assert [str(p) for p in second] == ["10.5.0.3/32", "10.244.1.0/24", "fd00::2/128"]


def test_peer_specs_are_the_other_affiliates_with_kubespan_keys(tmp_path: Path) -> None:
    async def main() -> None:
        async with running(kubespan_peer_spec_controller()) as state:
            state.create(IDENTITIES.new(LOCAL_IDENTITY_ID, IdentitySpecCluster(node_id="me")))
            _put(
                state,
                KUBESPAN_CONFIGS.new(KUBESPAN_CONFIG_ID, KubeSpanConfigSpec(enabled=True, cluster_id="cid")),
            )
            state.create(_affiliate("me", "self", "10.5.0.2", "S" * 43 + "=", "fd00::1"))
            state.create(
                _affiliate("a", "worker-1", "10.5.0.3", "A" * 43 + "=", "fd00::2", ("10.244.0.0/24",))
            )
            state.create(
                _affiliate("b", "worker-2", "10.5.0.4", "B" * 43 + "=", "fd00::3", ("10.244.0.0/23",))
            )
            state.create(_affiliate("c", "no-kubespan", "10.5.0.5", "", ""))
            second = await assert_resource(state, KUBESPAN_PEER_SPECS, "B" * 43 + "=")
            assert second.spec == KubeSpanPeerSpecSpec(
                address="fd00::3", allowed_ips=("10.5.0.4/32", "10.244.1.0/24", "fd00::3/128"),
                endpoints=("10.5.0.4:51820",), label="worker-2",
            )  # fmt: skip
            first = state.get("kubespan", KUBESPAN_PEER_SPECS, "A" * 43 + "=")
            assert first.spec.allowed_ips == ("10.5.0.3/32", "10.244.0.0/24", "fd00::2/128")
            assert sorted(r.id for r in state.list("kubespan", KUBESPAN_PEER_SPECS)) == [
                "A" * 43 + "=",
                "B" * 43 + "=",
            ]
            _put(state, KUBESPAN_CONFIGS.new(KUBESPAN_CONFIG_ID, KubeSpanConfigSpec(enabled=False)))
            await assert_no_resource(state, KUBESPAN_PEER_SPECS, "A" * 43 + "=")

    asyncio.run(asyncio.wait_for(main(), 20))


def test_the_local_affiliate_carries_the_kubespan_address_key_and_endpoints(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "root", "10.5.0.2")
    layout.ensure()
    own = str(ipaddress.ip_address("fd00:0:0:2:3656:78ff:fe9a:bcde"))
    siderolink = "fdae:41e4:649b:9303::1"

    async def main() -> None:
        async with running(local_affiliate_controller(layout)) as state:
            state.create(
                DISCOVERY_CONFIGS.new(DISCOVERY_CONFIG_ID, DiscoveryConfigSpec(discovery_enabled=True))
            )
            state.create(IDENTITIES.new(LOCAL_IDENTITY_ID, IdentitySpecCluster(node_id="me")))
            state.create(HOSTNAME_STATUSES.new("hostname", HostnameStatusSpec(hostname="worker-1")))
            state.create(MACHINE_TYPES.new("machine-type", MachineTypeSpec.WORKER))
            addresses = tuple(
                ipaddress.ip_interface(a)
                for a in ("10.5.0.2/24", "192.168.9.2/24", f"{own}/128", f"{siderolink}/64")
            )
            for kind in ("routed", "current"):
                state.create(
                    NODE_ADDRESSES.new(
                        filtered_node_address_id(kind, NODE_ADDRESS_FILTER_NO_K8S), NodeAddressSpec(addresses)
                    )
                )
            state.create(NODE_ADDRESSES.new(filtered_node_address_id("current", NODE_ADDRESS_FILTER_ONLY_K8S),
                                            NodeAddressSpec((ipaddress.ip_interface("10.244.1.0/24"),))))  # fmt: skip
            state.create(
                KUBESPAN_IDENTITIES.new(
                    "local", KubeSpanIdentitySpec(address=f"{own}/128", public_key="K" * 43 + "=")
                )
            )
            state.create(KUBESPAN_CONFIGS.new(KUBESPAN_CONFIG_ID, KubeSpanConfigSpec(
                enabled=True, advertise_kubernetes_networks=True, endpoint_filters=("0.0.0.0/0", "!192.168.0.0/16", "::/0"))))  # fmt: skip
            found = await assert_resource(state, AFFILIATES, "me", lambda r: r.spec.kubespan is not None)
            assert found.spec.kubespan == KubeSpanAffiliateSpec(
                public_key="K" * 43 + "=", address=own, additional_addresses=("10.244.1.0/24",),
                endpoints=("10.5.0.2:51820",),
            )  # fmt: skip

    asyncio.run(asyncio.wait_for(main(), 20))


def test_two_nodes_learn_each_others_kubespan_keys_through_a_real_discovery_service(tmp_path: Path) -> None:
    from discovery_helpers import Node, config_text, discovery_server
    from discovery_helpers import running as nodes_running

    from ichor.machined.controllers.feature_configs import kubespan_config_controller

    def with_kubespan(text: str) -> str:
        return text.replace(
            "    network:\n", "    network:\n        kubespan:\n            enabled: true\n", 1
        )

    async def main() -> None:
        async with discovery_server() as server:
            endpoint = f"http://{server.endpoint}/"
            cp, worker = Node(tmp_path / "cp", "127.44.1.2"), Node(tmp_path / "w", "127.44.1.3")
            for node, mac in ((cp, "02:00:00:00:00:02"), (worker, "02:00:00:00:00:03")):
                for controller in (kubespan_config_controller(), kubespan_identity_controller(node.layout),
                                   kubespan_peer_spec_controller()):  # fmt: skip
                    node.runtime.register(controller)
                node.layout.ensure()
                node.state.create(
                    HARDWARE_ADDRESSES.new(FIRST_HARDWARE_ADDR_ID, HardwareAddrSpec("eth0", mac))
                )
            async with nodes_running(cp, worker):
                cp.apply(with_kubespan(config_text(hostname="cp-1", endpoint=endpoint)))
                worker.apply(
                    with_kubespan(config_text(type="worker", hostname="worker-1", endpoint=endpoint))
                )
                mine = await assert_resource(worker.state, KUBESPAN_IDENTITIES, "local", timeout=10)
                seen = await assert_resource(cp.state, KUBESPAN_PEER_SPECS, mine.spec.public_key, timeout=15)
                address = str(ipaddress.ip_interface(mine.spec.address).ip)
                assert seen.spec == KubeSpanPeerSpecSpec(
                    address=address,
                    allowed_ips=("127.44.1.3/32", mine.spec.address),
                    endpoints=(),
                    label="worker-1",
                )
                theirs = cp.state.get("kubespan", KUBESPAN_IDENTITIES, "local")
                await assert_resource(worker.state, KUBESPAN_PEER_SPECS, theirs.spec.public_key, timeout=15)
                assert len(cp.state.list("kubespan", KUBESPAN_PEER_SPECS)) == 1  # never itself

    asyncio.run(asyncio.wait_for(main(), 40))
