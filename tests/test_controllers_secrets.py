"""controllers/secrets.py: the OS and etcd roots, certificate SANs and the API certificates (a control
plane signs its own, a worker asks trustd)."""

from __future__ import annotations

import base64
from datetime import timedelta
from pathlib import Path
from typing import Any

from controller_helpers import ADDRESS, apply, config, run, running
from cryptography import x509

from ichor.machined.controllers import config as config_area
from ichor.machined.controllers import network, secrets
from ichor.machined.controllers.k8s.address_filter import node_address_filter_controller
from ichor.machined.cosi import WAIT_STATUSES, Controller, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import API_CERTIFICATES, CERT_SANS, ETCD_ROOT_SECRETS, OS_ROOT_SECRETS
from ichor.machinery import pki


def _config_and_network(layout: Layout) -> list[Controller]:
    return [
        config_area.machine_type_controller(),
        *network.hostname_controllers(layout),
        network.node_address_controller(layout),
        node_address_filter_controller(),
    ]


def test_os_root_and_cert_sans_follow_the_config(tmp_path: Path) -> None:
    ca = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    layout = Layout(root=tmp_path, address=ADDRESS)
    text = config(ca=ca, extra_machine="  certSANs: [10.9.9.9, api.example.org]\n")

    async def main() -> None:
        controllers = [
            *_config_and_network(layout),
            secrets.os_root_controller(),
            secrets.cert_san_controller(),
        ]
        async with running(*controllers) as state:
            apply(state, text)
            await assert_resource(
                state, OS_ROOT_SECRETS, "os",
                lambda r: r.spec.token == "abc.def" and r.spec.issuing_ca.key == ca.key
                and r.spec.cert_san_dns_names == ("api.example.org",),
            )  # fmt: skip
            await assert_resource(
                state, CERT_SANS, "api",
                lambda r: [str(ip) for ip in r.spec.ips] == ["10.9.9.9", ADDRESS]
                and r.spec.dns_names == ("api.example.org", "cp-1", "cp-1.lab") and r.spec.fqdn == "cp-1.lab",
            )  # fmt: skip

    run(main)


def test_etcd_root_holds_the_etcd_ca(tmp_path: Path) -> None:
    etcd_ca = pki.new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))
    b64 = base64.b64encode

    async def main() -> None:
        async with running(secrets.etcd_root_controller()) as state:
            apply(
                state,
                config(
                    etcd=f"{{ca: {{crt: {b64(etcd_ca.crt).decode()}, key: {b64(etcd_ca.key).decode()}}}}}"
                ),
            )
            await assert_resource(
                state, ETCD_ROOT_SECRETS, "etcd",
                lambda r: r.spec.etcd_ca is not None and r.spec.etcd_ca.crt == etcd_ca.crt
                and r.spec.etcd_ca.key == etcd_ca.key,
            )  # fmt: skip

    run(main)


def _api_controllers(layout: Layout, request: Any = None) -> list[Controller]:
    return [
        *_config_and_network(layout),
        secrets.os_root_controller(),
        secrets.cert_san_controller(),
        secrets.api_certificates_controller(layout, request),
    ]


def test_a_control_plane_signs_its_own_api_certificates(tmp_path: Path) -> None:
    ca = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    layout = Layout(tmp_path, ADDRESS)

    async def main() -> None:
        async with running(*_api_controllers(layout)) as state:
            apply(state, config(ca=ca))
            certs = await assert_resource(state, API_CERTIFICATES, "api", timeout=10)
            assert certs.spec.server is not None and certs.spec.client is not None
            server = x509.load_pem_x509_certificate(certs.spec.server.crt)
            sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            assert ADDRESS in [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
            assert {"cp-1", "cp-1.lab"} <= set(sans.get_values_for_type(x509.DNSName))
            client = x509.load_pem_x509_certificate(certs.spec.client.crt)
            assert (
                client.subject.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)[0].value
                == "os:impersonator"
            )
            assert [c.crt for c in certs.spec.accepted_cas] == [ca.crt]

    run(main)


def test_a_worker_asks_trustd_and_says_why_it_waits(tmp_path: Path) -> None:
    ca = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    layout = Layout(tmp_path, ADDRESS)
    answer: dict[str, Any] = {"up": False}
    asked: list[tuple[list[str], str]] = []

    async def request(
        endpoints: list[str], *, os_ca_crt: bytes, token: str, hostname: str, address: str
    ) -> Any:
        asked.append((endpoints, token))
        if not answer["up"]:
            raise ConnectionError("10.0.0.1:50001: connection refused")
        key = pki.new_ed25519_key()
        crt = pki.issue_certificate(ca, key, common_name=hostname, organizations=[], ttl=timedelta(hours=1),
                                    server=True, client=False, ip_addresses=[address])  # fmt: skip
        return pki.CertKey(crt, key), ca.crt

    async def main() -> None:
        async with running(*_api_controllers(layout, request)) as state:
            apply(state, config(type="worker", ca=pki.CertKey(ca.crt, b"")))
            await assert_resource(
                state, WAIT_STATUSES, "secrets.APIController",
                lambda r: r.spec.waiting_for == "a server certificate from trustd"
                and "connection refused" in r.spec.reason,
                timeout=5,
            )  # fmt: skip
            assert asked[0] == (["10.0.0.1"], "abc.def")
            answer["up"] = True
            certs = await assert_resource(state, API_CERTIFICATES, "api", timeout=10)
            assert certs.spec.client is None and [c.crt for c in certs.spec.accepted_cas] == [ca.crt]
            await assert_no_resource(state, WAIT_STATUSES, "secrets.APIController", timeout=2)

    run(main)
