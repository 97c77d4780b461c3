"""KubeSpan's identity (issue 25): Talos's ULA prefix and EUI-64 address, WireGuard keys (RFC 7748's
X25519 vector), and ``kubespan.IdentityController``: keys generated once and kept in STATE (0600),
the address derived from ``cluster.id`` and the first MAC, nothing published while disabled."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
from pathlib import Path
from typing import Any

import pytest
from controller_helpers import running

from ichor.api.gen.resource.definitions.kubespan.kubespan_pb2 import IdentitySpec
from ichor.machined.controllers.kubespan import kubespan_identity_controller, load_or_new_private_key
from ichor.machined.cosi import Resource, State, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import KUBESPAN_IDENTITIES
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
    import asyncio

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
