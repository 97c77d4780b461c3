"""Host DNS controllers: machine config -> HostDNSConfig, the resolver's listeners, resolv.conf."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path

from controller_helpers import apply, run, running
from test_dnscache import query

from ichor.machined import dnscache
from ichor.machined.controllers import network
from ichor.machined.controllers.network.etcfiles import (
    POD_RESOLV_CONF,
    EtcFileWriter,
    etc_file_spec_controller,
)
from ichor.machined.controllers.network.hostdns import DNSResolveCacheController, host_dns_config_controller
from ichor.machined.cosi import assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import DNS_RESOLVE_CACHES, ETC_FILE_SPECS, ETC_FILE_STATUSES, HOST_DNS_CONFIGS

CONFIG = """version: v1alpha1
machine:
  type: worker
  network:
    nameservers: [10.5.0.1]
  features:
    hostDNS:
      enabled: {enabled}
      forwardKubeDNSToHost: true
cluster:
  network:
    serviceSubnets: [10.96.0.0/12]
"""


def test_the_config_records_talos_listen_and_service_addresses(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.9", own_netns=True)

    async def main() -> None:
        async with running(host_dns_config_controller(layout)) as state:
            apply(state, CONFIG.format(enabled="true"))
            config = await assert_resource(state, HOST_DNS_CONFIGS, "config", lambda r: r.spec.enabled)
            assert config.spec.listen_addresses == ("127.0.0.53:53", "10.96.0.9:53")
            assert config.spec.service_host_dns_address == "10.96.0.9"

    run(main)


def test_a_process_node_never_enables_host_dns_and_keeps_its_resolvers(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.9")

    async def main() -> None:
        async with running(*network.network_controllers(layout)) as state:
            apply(state, CONFIG.format(enabled="true"))
            await assert_resource(state, HOST_DNS_CONFIGS, "config", lambda r: not r.spec.enabled)
            spec = await assert_resource(state, ETC_FILE_SPECS, "resolv.conf", lambda r: "10.5.0.1" in r.spec.contents,
                                         namespace="files")  # fmt: skip
            assert "127.0.0.53" not in spec.spec.contents

    run(main)


def test_resolv_conf_names_the_host_dns_when_it_runs_and_the_resolvers_when_not(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.9", own_netns=True)
    controllers = [
        c for c in network.network_controllers(layout) if not isinstance(c, DNSResolveCacheController)
    ]

    async def main() -> None:
        names = {c.name for c in controllers}
        picked = [
            c
            for c in controllers
            if c.name.startswith(("network.Resolver", "network.Hostname", "network.HostDNS"))
        ]
        assert "network.HostDNSConfigController" in names
        async with running(*picked, etc_file_spec_controller()) as state:
            apply(state, CONFIG.format(enabled="true"))
            await assert_resource(state, ETC_FILE_SPECS, "resolv.conf",
                                  lambda r: r.spec.contents.startswith("nameserver 127.0.0.53\n"), namespace="files")  # fmt: skip
            # Pods (CoreDNS's forward among them) get the resolvers, never the node's loopback cache.
            pods = await assert_resource(state, ETC_FILE_SPECS, "pod-resolv.conf", namespace="files")
            assert pods.spec.contents.startswith("nameserver 10.5.0.1\n"), pods.spec.contents
            assert "127." not in pods.spec.contents, pods.spec.contents
            apply(state, CONFIG.format(enabled="false"))
            await assert_resource(state, ETC_FILE_SPECS, "resolv.conf",
                                  lambda r: r.spec.contents.startswith("nameserver 10.5.0.1\n"), namespace="files")  # fmt: skip

    run(main)


def test_the_resolver_listens_while_enabled_and_forwards_to_the_resolvers(tmp_path: Path) -> None:
    """The listeners bind loopback port 0 here (127.0.0.53:53 would be the host's): the controller's
    serve functions are wrapped, nothing else is."""
    layout = Layout(root=tmp_path, address="127.5.0.9", own_netns=True)
    ports: dict[str, int] = {}

    def on_loopback(serve: Callable[..., object], proto: str) -> Callable[..., object]:
        def wrapped(cache: dnscache.DNSCache, host: str, port: int, started: Callable[[int], None]) -> object:
            def bound(actual: int) -> None:
                ports[f"{proto}-{host}:{port}"] = actual
                started(actual)

            return serve(cache, "127.0.0.1", 0, bound)

        return wrapped

    resolver = DNSResolveCacheController(
        on_loopback(dnscache.serve_udp, "udp"), on_loopback(dnscache.serve_tcp, "tcp")
    )  # type: ignore[arg-type]
    picked = [
        c
        for c in network.network_controllers(layout)
        if c.name.startswith(("network.Resolver", "network.HostDNS"))
    ]

    async def main() -> None:
        async with running(*picked, resolver) as state:
            apply(state, CONFIG.format(enabled="true"))
            for listener in ("udp-127.0.0.53:53", "tcp-127.0.0.53:53", "udp-10.96.0.9:53"):
                await assert_resource(
                    state, DNS_RESOLVE_CACHES, listener, lambda r: r.spec.status == "running"
                )
            assert resolver.cache.upstreams == (("10.5.0.1", 53),)
            apply(state, CONFIG.format(enabled="false"))
            while state.list("network", DNS_RESOLVE_CACHES):
                await asyncio.sleep(0.02)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:  # the listener is gone: refused
                sock.setblocking(False)
                sock.connect(("127.0.0.1", ports["udp-127.0.0.53:53"]))
                sock.send(query("test.lan"))
                await asyncio.sleep(0.1)
                try:
                    sock.recv(512)
                    answered = True
                except (ConnectionRefusedError, BlockingIOError):
                    answered = False
                assert not answered

    run(main)


def test_pods_get_the_resolvers_not_the_host_dns_which_is_nobody_in_their_namespace(tmp_path: Path) -> None:
    """CoreDNS forwards to the pods' resolv.conf; 127.0.0.53 there would be CoreDNS itself (a loop)."""
    layout = Layout(root=tmp_path, address="127.5.0.9", own_netns=True)
    picked = [
        c for c in network.network_controllers(layout)
        if c.name.startswith(("network.Resolver", "network.Hostname", "network.HostDNS"))
    ]  # fmt: skip
    pods = layout.path(POD_RESOLV_CONF)

    async def main() -> None:
        async with running(*picked, etc_file_spec_controller(), EtcFileWriter(layout)) as state:
            apply(state, CONFIG.format(enabled="true"))
            await assert_resource(state, ETC_FILE_STATUSES, "resolv.conf", lambda r: True, namespace="files")
            for _ in range(200):
                if pods.exists() and pods.read_text():
                    break
                await asyncio.sleep(0.02)
            assert layout.path("/etc/resolv.conf").read_text().startswith("nameserver 127.0.0.53\n")
            assert pods.read_text().startswith("nameserver 10.5.0.1\n")
            assert "127.0.0.53" not in pods.read_text()

    run(main)
