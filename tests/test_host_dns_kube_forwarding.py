"""``forwardKubeDNSToHost`` (which every config ``cluster create`` generates has, as container mode
requires) works as on Talos: the service address (the first service subnet's tenth) goes on each
node's lo (operator layer, host scope) so the host DNS can listen there, and the ``host-dns`` Service
CoreDNS forwards to carries an Endpoints object naming that address (kube-proxy rejects a Service
with none). Controller tests on an in-memory state; no node started."""

from __future__ import annotations

import asyncio

from controller_helpers import apply, run, running

from ichor.machined.controllers.k8s._bootstrap_objects import host_dns_service
from ichor.machined.controllers.network.config import address_config_controller, host_dns_service_address
from ichor.machined.cosi import assert_resource
from ichor.machined.resources import ADDRESS_SPECS, NETWORK_CONFIG_NAMESPACE
from ichor.machinery.config import Config, load_config

CONFIG = """version: v1alpha1
machine:
  type: worker
  features:
    hostDNS:
      enabled: true
      forwardKubeDNSToHost: {forward}
cluster:
  network:
    serviceSubnets: [{subnet}]
"""


def _config(forward: str, subnet: str = "10.96.0.0/12") -> str:
    return CONFIG.format(forward=forward, subnet=subnet)


def test_the_service_address_is_talos_tenth_of_the_first_service_subnet() -> None:
    def address(text: str) -> str:
        doc = load_config(text).v1alpha1
        assert doc is not None and isinstance(doc.model, Config)
        return host_dns_service_address(doc.model)

    assert address(_config("true")) == "10.96.0.9"
    assert address(_config("true", "10.43.0.0/16")) == "10.43.0.9"
    assert address(_config("false")) == ""


def test_the_service_address_goes_on_lo_with_forwarding_and_comes_off_without() -> None:
    async def main() -> None:
        async with running(address_config_controller()) as state:
            apply(state, _config("true"))
            spec = await assert_resource(
                state, ADDRESS_SPECS, "operator/lo/10.96.0.9/32", namespace=NETWORK_CONFIG_NAMESPACE
            )
            assert (spec.spec.link_name, spec.spec.scope, spec.spec.family) == ("lo", "host", "inet4")
            apply(state, _config("false"))
            ids = {"operator/lo/10.96.0.9/32"}
            for _ in range(100):
                ids = {r.id for r in state.list(NETWORK_CONFIG_NAMESPACE, ADDRESS_SPECS)}
                if "operator/lo/10.96.0.9/32" not in ids:
                    break
                await asyncio.sleep(0.01)
            assert "operator/lo/10.96.0.9/32" not in ids and "default/lo/127.0.0.1/8" in ids

    run(main)


def test_the_host_dns_service_has_talos_endpoints() -> None:
    service, endpoints = host_dns_service("10.96.0.9")
    assert (service["kind"], service["spec"]["clusterIP"]) == ("Service", "10.96.0.9")
    assert endpoints["kind"] == "Endpoints" and endpoints["metadata"] == service["metadata"]
    (subset,) = endpoints["subsets"]
    assert subset["addresses"] == [{"ip": "10.96.0.9"}]
    assert {(p["name"], p["port"], p["protocol"]) for p in subset["ports"]} == {
        ("dns", 53, "UDP"),
        ("dns-tcp", 53, "TCP"),
    }
