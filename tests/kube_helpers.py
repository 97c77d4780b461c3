"""Kubernetes PKI for tests: a CA, a server pair for 127.0.0.1/localhost and an admin kubeconfig."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import timedelta

from ichor.machinery.pki import CertKey, new_ecdsa_ca, new_keypair

DAY = timedelta(days=1)


@dataclass
class KubePKI:
    ca: CertKey
    server: CertKey
    admin: CertKey

    def kubeconfig(self, server_url: str, *, ca: bytes | None = None) -> str:
        b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
        return (
            "apiVersion: v1\nkind: Config\ncurrent-context: admin@test\n"
            f"clusters:\n- name: test\n  cluster:\n    server: {server_url}\n"
            f"    certificate-authority-data: {b64(ca or self.ca.crt)}\n"
            "users:\n- name: admin@test\n  user:\n"
            f"    client-certificate-data: {b64(self.admin.crt)}\n    client-key-data: {b64(self.admin.key)}\n"
            "contexts:\n- name: admin@test\n  context: {cluster: test, user: admin@test}\n"
        )


def new_kube_pki() -> KubePKI:
    ca = new_ecdsa_ca(organization="kubernetes", ttl=DAY)
    server = new_keypair(
        ca, common_name="kube-apiserver", ttl=DAY, server=True, client=False,
        dns_names=["localhost", "kubernetes"], ip_addresses=["127.0.0.1", "10.96.0.1"],
    )  # fmt: skip
    admin = new_keypair(
        ca, organizations=["system:masters"], common_name="admin", ttl=DAY, server=False, client=True
    )
    return KubePKI(ca, server, admin)
