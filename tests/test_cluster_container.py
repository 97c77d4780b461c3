"""The container provisioner's names, patches and refusals, without starting a node.

Refusals happen before anything is created: each bad input leaves no state directory. The one test
that touches the host's routing adds a blackhole route for a random 10.2xx.y.0/24 and removes it in
a ``finally``.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from ichor.machined.platform import Layout, Platform
from ichor.machinery import proc
from ichor.machinery.errors import MachineryError
from ichor.machinery.yamlio import load_documents, to_plain
from ichor.provision import _cluster, _container
from ichor.provision import _network as net
from ichor.provision._record import ClusterRecord, NodeRecord

ROOT_AND_TOOLS = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("dnsmasq") is None,
    reason="needs root, iproute2 and dnsmasq",
)


def test_bridge_is_named_as_talos_names_its_cluster_bridges() -> None:
    # Talos's QEMU provisioner: "talos" + the first 8 hex digits of sha256(network name).
    assert net.bridge_name("talos-default") == "talos" + hashlib.sha256(b"talos-default").hexdigest()[:8]
    assert len(net.bridge_name("x" * 200)) <= 15


def test_node_macs_are_unicast_locally_administered_and_stable() -> None:
    macs = {net.node_mac("c", f"c-worker-{i}") for i in range(50)}
    assert len(macs) == 50
    for mac in macs:
        first = int(mac.split(":")[0], 16)
        assert first & 0x02 and not first & 0x01
    assert net.node_mac("c", "n") == net.node_mac("c", "n") != net.node_mac("d", "n")
    assert len(net.veth_name("c" * 100, "n" * 100)) <= 15


def test_addresses_start_after_the_gateway() -> None:
    assert net.gateway("10.5.0.0/24") == "10.5.0.1"
    assert net.node_addresses("10.5.0.0/24", 3) == ["10.5.0.2", "10.5.0.3", "10.5.0.4"]
    with pytest.raises(MachineryError, match="room for 1 nodes, 2 asked"):
        net.node_addresses("10.5.0.0/30", 2)


@pytest.mark.parametrize(
    ("cidr", "message", "hint"),
    [
        ("127.5.0.0/24", "not a range a bridge can serve", "--provisioner process"),
        ("fd00::/64", "is IPv6", "IPv4 --cidr"),
        ("10.5.0.0/33", "invalid CIDR", "--cidr like 10.5.0.0/24"),
        ("169.254.0.0/24", "not a range a bridge can serve", "private range"),
    ],
)
def test_a_cidr_a_bridge_cannot_serve_is_refused(cidr: str, message: str, hint: str) -> None:
    with pytest.raises(MachineryError, match=message) as caught:
        net.node_addresses(cidr, 1)
    assert hint in (caught.value.hint or "")


def test_the_static_address_patch_gives_eth0_its_address_and_the_default_route() -> None:
    record = ClusterRecord("c", "10.9.8.0/24", "/x", mtu=1400, nameservers=["10.9.8.1"])
    text = _container.static_address_patch(record, NodeRecord("c-worker-1", "worker", "10.9.8.3", "/x"))
    patch = to_plain(load_documents(text)[0])
    network = patch["machine"]["network"]
    assert network["interfaces"] == [{
        "interface": "eth0", "addresses": ["10.9.8.3/24"], "mtu": 1400,
        "routes": [{"network": "0.0.0.0/0", "gateway": "10.9.8.1"}],
    }]  # fmt: skip
    assert network["nameservers"] == ["10.9.8.1"]


def test_an_extra_network_gives_every_node_eth1_without_a_route() -> None:
    record = ClusterRecord("c", "10.9.8.0/24", "/x", mtu=1400, extra_cidr="10.9.9.0/24")
    node = NodeRecord("c-worker-1", "worker", "10.9.8.3", "/x", extra_address="10.9.9.3")
    static = to_plain(load_documents(_container.static_address_patch(record, node))[0])
    assert static["machine"]["network"]["interfaces"][1] == {
        "interface": "eth1", "addresses": ["10.9.9.3/24"], "mtu": 1400,
    }  # fmt: skip
    dhcp = to_plain(load_documents(_container.dhcp_patch(record, node))[0])
    assert [i["interface"] for i in dhcp["machine"]["network"]["interfaces"]] == ["eth0", "eth1"]
    assert dhcp["machine"]["network"]["interfaces"][1] == {"interface": "eth1", "dhcp": True, "mtu": 1400}
    # Its bridge and veths: the first network's names with a suffix, within the kernel's 15 characters.
    assert net.extra_bridge_name("x" * 200) == net.bridge_name("x" * 200) + "-2"
    assert len(net.extra_bridge_name("x" * 200)) <= 15
    assert net.veth_name("c", "n", network=2) == net.veth_name("c", "n") + "-2"
    assert len(net.veth_name("c" * 100, "n" * 100, network=2)) <= 15
    without = ClusterRecord("c", "10.9.8.0/24", "/x")
    assert "eth1" not in _container.dhcp_patch(without, node) + _container.static_address_patch(without, node)


def test_process_nodes_say_process_and_run_in_container_mode() -> None:
    assert Layout(root=Path("/x"), address="127.0.0.2").platform is Platform.PROCESS
    assert (Platform.PROCESS.mode, Platform.CONTAINER.mode, Platform.METAL.mode) == (
        "container",
        "container",
        "metal",
    )


def _create(tmp_path: Path, **kw: Any) -> ClusterRecord:
    args: dict[str, Any] = dict(name="c", cidr="10.222.1.0/24", controlplanes=1, workers=0, state=tmp_path / "s",
                                talosconfig=tmp_path / "talosconfig", provisioner="container", progress=lambda _: None)  # fmt: skip
    args.update(kw)
    return _cluster.create(**args)


@pytest.mark.parametrize(
    ("kw", "message", "hint"),
    [
        ({"mtu": 20}, "--mtu 20 is out of range", "between 68 and 65535"),
        ({"registry_mirrors": ["docker.io"]}, "is not <registry>=<endpoint>", "--registry-mirror docker.io="),
        ({"nameservers": ["dns.example"]}, "is not an IP address", "--nameservers 10.222.1.1"),
        (
            {"nameservers": ["10.222.1.1", "8.8.8.8"]},
            "8.8.8.8 is outside the cluster's --cidr",
            "leave --nameservers out",
        ),
        (
            {"nameservers": ["2606:4700:4700::1111"]},
            "outside the cluster's --cidr 10.222.1.0/24",
            "--nameservers",
        ),
        ({"cidr": "127.0.0.0/24"}, "not a range a bridge can serve", "--provisioner process"),
        ({"config_patches": ["[{not yaml"]}, "--config-patch", ""),
        (
            {"extra_cidr": "10.222.1.128/25"},
            "--extra-cidr 10.222.1.128/25 overlaps --cidr 10.222.1.0/24",
            "a range of its own",
        ),
        ({"extra_cidr": "fd00::/64"}, "--extra-cidr fd00::/64 is IPv6", "IPv4 --extra-cidr"),
        ({"extra_cidr": "10.6.0.0/33"}, "invalid CIDR '10.6.0.0/33'", "pass --extra-cidr like"),
        (
            {"extra_cidr": "10.6.0.0/30", "workers": 2},
            "--extra-cidr 10.6.0.0/30 has room for 1 nodes, 3 asked",
            "larger --extra-cidr",
        ),
        (
            {"extra_cidr": "10.6.0.0/24", "provisioner": "process", "cidr": "127.5.0.0/24"},
            "--extra-cidr needs container nodes",
            "--provisioner container",
        ),
    ],
)
@ROOT_AND_TOOLS
def test_bad_container_flags_are_refused_before_anything_starts(
    tmp_path: Path, kw: dict[str, Any], message: str, hint: str
) -> None:
    with pytest.raises(MachineryError, match=message) as caught:
        _create(tmp_path, **kw)
    assert hint in (caught.value.hint or "") + str(caught.value)
    assert not (tmp_path / "s").exists()


def test_container_nodes_without_root_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(MachineryError, match="container nodes need root") as caught:
        _create(tmp_path)
    assert "--provisioner process" in (caught.value.hint or "")


@pytest.mark.parametrize("flag", ["--cidr", "--extra-cidr"])
@ROOT_AND_TOOLS
def test_a_cidr_this_machine_already_routes_is_refused(tmp_path: Path, flag: str) -> None:
    cidr = f"10.{random.choice([n for n in range(200, 251) if n != 244])}.{random.randint(0, 255)}.0/24"
    proc.run(["ip", "route", "add", "blackhole", cidr, "metric", str(net.BLACKHOLE_METRIC)])
    try:
        with pytest.raises(
            MachineryError, match=f"{flag} {cidr} overlaps a blackhole route to {cidr}"
        ) as caught:
            _create(tmp_path, **({"cidr": cidr} if flag == "--cidr" else {"extra_cidr": cidr}))
        assert f"pick a {flag} nothing on this machine uses" in (caught.value.hint or "")
        assert not (tmp_path / "s").exists()
    finally:
        proc.run(["ip", "route", "del", "blackhole", cidr, "metric", str(net.BLACKHOLE_METRIC)])


def test_dnsmasq_serves_dns_on_the_bridge_for_the_nodes_names_only() -> None:
    reservations = [
        ("02:00:00:00:00:02", "10.9.8.2", "c-controlplane-1"),
        ("02:00:00:00:00:03", "10.9.8.3", "c-worker-1"),
    ]
    command = net.dnsmasq_arguments(Path("/s"), "talosabc", "10.9.8.0/24", reservations, ["10.9.8.1"], 1400)
    # DNS on the bridge alone, no upstream, every name but the nodes' is NXDOMAIN.
    assert {
        "--port=53",
        "--no-resolv",
        "--no-hosts",
        "--local=/#/",
        "--log-queries",
        "--interface=talosabc",
        "--bind-interfaces",
    } <= set(command)
    assert not [c for c in command if c.startswith(("--server", "--resolv-file", "--port=0"))]
    assert "--host-record=c-controlplane-1,10.9.8.2" in command
    assert "--host-record=c-worker-1,10.9.8.3" in command
    assert "--dhcp-host=02:00:00:00:00:03,10.9.8.3,c-worker-1" in command
    assert "--dhcp-option=option:dns-server,10.9.8.1" in command
    assert "--dhcp-option=option:router,10.9.8.1" in command


def test_explicit_nameservers_inside_the_cidr_are_honoured_and_outside_refused() -> None:
    net.check_nameservers("10.9.8.0/24", ["10.9.8.1", "10.9.8.53"])
    with pytest.raises(
        MachineryError, match=r"1\.1\.1\.1 is outside the cluster.s --cidr 10\.9\.8\.0/24"
    ) as caught:
        net.check_nameservers("10.9.8.0/24", ["10.9.8.1", "1.1.1.1"])
    assert "--nameservers" in (caught.value.hint or "")
    with pytest.raises(MachineryError, match="'ns1' is not an IP address"):
        net.check_nameservers("10.9.8.0/24", ["ns1"])


def test_the_forwarding_guard_drops_what_the_host_would_route_for_the_bridge() -> None:
    text = net.firewall_ruleset("talosabc")
    assert net.firewall_table("talosabc") == "ichor-talosabc"
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0] == "table inet ichor-talosabc {"
    assert "type filter hook forward priority filter - 10; policy accept;" in lines
    rules = [line for line in lines if line.startswith(("iifname", "oifname"))]
    # Node to node over the bridge first, then everything else in or out of the bridge dropped.
    assert rules == [
        'iifname "talosabc" oifname "talosabc" accept',
        'iifname "talosabc" drop',
        'oifname "talosabc" drop',
    ]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("nft") is None, reason="needs root and nft")
def test_nft_accepts_the_forwarding_guard_as_written() -> None:
    # --check parses and validates against the kernel without changing anything.
    checked = proc.run(
        ["nft", "--check", "-f", "-"], input=net.firewall_ruleset("talos0badc0de"), check=False
    )
    assert checked.exit_code == 0, checked.stderr
