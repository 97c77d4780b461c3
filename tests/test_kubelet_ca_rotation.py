"""The kubelet through a Kubernetes CA rotation (``talosctl rotate-ca``), as Talos 1.7's
``KubeletServiceController`` does it: the CA it trusts is ``cluster.ca`` plus ``cluster.acceptedCAs``;
a client certificate from a CA no longer accepted is removed with its kubeconfig (the kubelet joins
again with its bootstrap token); otherwise its kubeconfig's CA follows the config."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from controller_helpers import apply, run, running

from ichor.machined.controllers.k8s import kubelet as area
from ichor.machined.controllers.k8s import kubelet_render as render
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import HOSTNAME_STATUS_ID, HOSTNAME_STATUSES, HostnameStatusSpec
from ichor.machinery import pki, yamlio
from ichor.machinery.config import Config, load_config

OLD = pki.new_ecdsa_ca(organization="kubernetes", ttl=timedelta(days=1))
NEW = pki.new_ecdsa_ca(organization="kubernetes", ttl=timedelta(days=1))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _config(issuing: pki.CertKey, *accepted: pki.CertKey) -> str:
    extra = "".join(f"\n    - crt: {_b64(c.crt)}" for c in accepted)
    return (
        "version: v1alpha1\nmachine:\n  type: worker\n  token: abc.def\n"
        "  kubelet: {extraArgs: {node-ip: 10.5.0.2}}\n"
        "cluster:\n  controlPlane: {endpoint: 'https://10.0.0.1:6443'}\n  token: 'abcdef.0123456789abcdef'\n"
        f"  ca: {{crt: {_b64(issuing.crt)}, key: ''}}\n" + (f"  acceptedCAs:{extra}\n" if accepted else "")
    )


def _client_cert(ca: pki.CertKey) -> bytes:
    """What the kubelet keeps in ``kubelet-client-<time>.pem``: its certificate, then its key."""
    pair = pki.new_keypair(ca, organizations=["system:nodes"], common_name="system:node:w-1",
                           ttl=timedelta(hours=1), server=False, client=True)  # fmt: skip
    return pair.crt + pair.key


def _kubeconfig(ca_bundle: bytes, server: str = "https://10.0.0.1:6443") -> str:
    return (
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n"
        f"    certificate-authority-data: {_b64(ca_bundle)}\n    server: {server}\n  name: default-cluster\n"
        "contexts:\n- context:\n    cluster: default-cluster\n    namespace: default\n    user: default-auth\n"
        "  name: default-context\ncurrent-context: default-context\npreferences: {}\nusers:\n- name: default-auth\n"
        "  user:\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n"
        "    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem\n"
    )


def _joined(layout: Layout, ca: pki.CertKey, bundle: bytes) -> Path:
    """A kubelet that joined: its client certificate from ``ca`` behind the ``-current`` symlink (by
    the absolute path the kubelet sees) and its kubeconfig trusting ``bundle``."""
    pki_dir = layout.path(render.PKI_DIR)
    pki_dir.mkdir(parents=True, exist_ok=True)
    (pki_dir / "kubelet-client-2026-01-01-00-00-00.pem").write_bytes(_client_cert(ca))
    (pki_dir / "kubelet-client-current.pem").symlink_to(
        f"{render.PKI_DIR}/kubelet-client-2026-01-01-00-00-00.pem"
    )
    kubeconfig = layout.path(render.KUBECONFIG)
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    kubeconfig.write_text(_kubeconfig(bundle))
    return pki_dir


async def _until(check: Callable[[], bool], timeout: float = 4.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


def _typed(text: str) -> Config:
    doc = load_config(text).v1alpha1
    assert doc is not None
    model = doc.model
    assert isinstance(model, Config)
    return model


def test_the_ca_bundle_is_the_issuing_ca_then_the_accepted_ones() -> None:
    bundle = area.kubelet_ca_bundle(_typed(_config(NEW, OLD)))
    assert [c.serial_number for c in pki.load_certificates(bundle)] == [
        NEW.certificate().serial_number,
        OLD.certificate().serial_number,
    ]
    assert area.kubelet_ca_bundle(_typed(_config(OLD))) == OLD.crt


def test_issued_by_any_checks_the_signature_against_each_ca() -> None:
    cert = _client_cert(OLD)
    assert pki.issued_by_any(cert, OLD.crt)
    assert pki.issued_by_any(cert, NEW.crt + OLD.crt)
    assert not pki.issued_by_any(cert, NEW.crt)
    assert not pki.issued_by_any(OLD.crt, OLD.crt)  # a CA is not a client certificate


def test_a_rotation_keeps_the_kubelet_joined_until_its_ca_is_dropped(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "10.5.0.2", platform=Platform.CONTAINER)
    restarts: list[int] = []

    async def changed() -> None:
        restarts.append(1)

    ca_file = layout.path(render.CA_FILE)
    bootstrap = layout.path(render.BOOTSTRAP_KUBECONFIG)
    kubeconfig = layout.path(render.KUBECONFIG)

    def kubeconfig_ca() -> bytes:
        doc = yamlio.to_plain(yamlio.load_documents(kubeconfig.read_text(), source="kubeconfig")[0])
        return base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"])

    async def main() -> None:
        async with running(*area.kubelet_controllers(layout, on_change=changed)) as state:
            state.create(HOSTNAME_STATUSES.new(HOSTNAME_STATUS_ID, HostnameStatusSpec("w-1", "")))
            pki_dir = _joined(layout, OLD, OLD.crt)
            apply(state, _config(OLD))
            await _until(lambda: ca_file.is_file() and len(restarts) == 1)
            assert ca_file.read_bytes() == OLD.crt
            assert kubeconfig.is_file(), "a certificate from the issuing CA stays"

            # 1. The new CA accepted: trusted beside the old one everywhere, the certificate stays.
            apply(state, _config(OLD, NEW))
            await _until(lambda: ca_file.read_bytes() == OLD.crt + NEW.crt and len(restarts) == 2)
            assert _b64(OLD.crt + NEW.crt) in bootstrap.read_text()
            await _until(lambda: kubeconfig_ca() == OLD.crt + NEW.crt)
            assert (pki_dir / "kubelet-client-current.pem").is_symlink()

            # 2. The new CA issuing, the old one accepted: still joined with the old certificate.
            apply(state, _config(NEW, OLD))
            await _until(lambda: ca_file.read_bytes() == NEW.crt + OLD.crt and len(restarts) == 3)
            await _until(lambda: kubeconfig_ca() == NEW.crt + OLD.crt)
            assert (pki_dir / "kubelet-client-current.pem").is_symlink()

            # 3. The old CA dropped: its certificate and the kubeconfig go (the kubelet re-joins).
            apply(state, _config(NEW))
            await _until(lambda: ca_file.read_bytes() == NEW.crt and len(restarts) == 4)
            await _until(lambda: not kubeconfig.exists() and not pki_dir.exists())

            # The kubelet joined again with a certificate from the new CA: nothing more is removed.
            _joined(layout, NEW, NEW.crt)
            apply(state, _config(NEW).replace("node-ip: 10.5.0.2", "node-ip: 10.5.0.2, v: '2'"))
            await asyncio.sleep(0.3)
            assert kubeconfig.is_file() and (pki_dir / "kubelet-client-current.pem").is_symlink()

    run(main)
