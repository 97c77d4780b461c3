"""The kubelet restarts when its spec changes (``upgrade-k8s`` patching ``machine.kubelet.image``,
new ``extraArgs``), as Talos 1.7's ``KubeletServiceController`` does: the ``kubelet`` service reads
its spec when it starts, so without a restart a running kubelet would keep its old image."""

from __future__ import annotations

import asyncio
import base64
from datetime import timedelta
from pathlib import Path

from controller_helpers import apply, run, running

from ichor.machined.controllers.k8s import kubelet as area
from ichor.machined.controllers.k8s import kubelet_render as render
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import HOSTNAME_STATUS_ID, HOSTNAME_STATUSES, HostnameStatusSpec
from ichor.machined.resources._kubelet import KUBELET_ID, KUBELET_SPECS
from ichor.machinery import pki

_CA = pki.new_ecdsa_ca(organization="kubernetes", ttl=timedelta(days=1))
_CONFIG = (
    "version: v1alpha1\nmachine:\n  type: worker\n  token: abc.def\n"
    "  kubelet: {image: 'ghcr.io/siderolabs/kubelet:v%s', extraArgs: {node-ip: 10.5.0.2}}\n"
    "cluster:\n  controlPlane: {endpoint: 'https://10.0.0.1:6443'}\n  token: 'abcdef.0123456789abcdef'\n"
    f"  ca: {{crt: {base64.b64encode(_CA.crt).decode()}, key: ''}}\n"
)


async def _until(check: object, timeout: float = 4.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():  # type: ignore[operator]
            await asyncio.sleep(0.02)


def test_a_new_kubelet_image_restarts_the_kubelet_and_nothing_else_does(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "10.5.0.2", platform=Platform.CONTAINER)
    restarts: list[str] = []

    async def changed() -> None:
        spec = state.spec_of(KUBELET_SPECS, KUBELET_ID)
        restarts.append(spec.image if spec is not None else "")

    async def main() -> None:
        nonlocal state
        async with running(*area.kubelet_controllers(layout, on_change=changed)) as state:
            state.create(HOSTNAME_STATUSES.new(HOSTNAME_STATUS_ID, HostnameStatusSpec("w-1", "")))
            apply(state, _CONFIG % "1.30.2")
            await _until(lambda: len(restarts) == 1)  # the files written the first time
            await asyncio.sleep(0.3)
            assert len(restarts) == 1, "the same spec again restarts nothing"
            apply(state, _CONFIG % "1.30.3")
            await _until(lambda: restarts[-1] == "ghcr.io/siderolabs/kubelet:v1.30.3")
            count = len(restarts)
            apply(state, (_CONFIG % "1.30.3") + "# a comment changes no spec\n")
            await asyncio.sleep(0.3)
            assert len(restarts) == count

    state: object = None
    run(main)


def test_a_kubelet_that_started_without_a_client_certificate_restarts_once_when_it_has_one(
    tmp_path: Path, monkeypatch: object
) -> None:
    """Budget 3 s: the certificate is looked for every 0.05 s here."""
    from ichor.machined.resources import SERVICES, ServiceSpec

    monkeypatch.setattr(area, "CERT_POLL", 0.05)  # type: ignore[attr-defined]
    layout = Layout(tmp_path, "10.5.0.2", platform=Platform.CONTAINER)
    restarts: list[str] = []

    async def changed() -> None:
        restarts.append("restart")

    async def main() -> None:
        async with running(*area.kubelet_controllers(layout, on_change=changed)) as state:
            state.create(HOSTNAME_STATUSES.new(HOSTNAME_STATUS_ID, HostnameStatusSpec("w-1", "")))
            apply(state, _CONFIG % "1.30.3")
            await _until(lambda: len(restarts) == 1)  # the files written the first time
            state.create(SERVICES.new("kubelet", ServiceSpec(running=True)))
            await asyncio.sleep(0.3)
            assert len(restarts) == 1, "a kubelet waiting for its certificate is left alone"
            cert = layout.path(render.CLIENT_CERTIFICATE)
            cert.parent.mkdir(parents=True, exist_ok=True)
            cert.write_bytes(_CA.crt)  # signed by the CA it trusts: kept
            await _until(lambda: len(restarts) == 2)  # looked for on its own: no input changed
            await asyncio.sleep(0.3)
            assert len(restarts) == 2, "once"
            # A kubelet that starts with its certificate (a reboot of a joined node) is not restarted.
            service = state.list("runtime", SERVICES)[0]
            state.update(service.with_spec(ServiceSpec(running=False)))
            await asyncio.sleep(0.1)
            state.update(state.list("runtime", SERVICES)[0].with_spec(ServiceSpec(running=True)))
            await asyncio.sleep(0.3)
            assert len(restarts) == 2

    run(main)
