"""The controller graph's rules on a running node: no derived resource without the controller that owns it."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from test_graph_rules import DERIVED, _controllers

from ichor.machined.platform import Layout
from ichor.machined.resources import (
    NODE_TYPES,
    SERVICES,
)
from ichor.machinery.generate import GenOptions, OutputType, generate
from ichor.machinery.secrets import SecretsBundle

pytestmark = pytest.mark.e2e


def test_a_running_node_holds_no_derived_resource_a_controller_does_not_own(tmp_path: Path) -> None:
    from ichor.machined.node import Node

    address = f"127.{random.randint(150, 199)}.{random.randint(0, 255)}.{random.randint(2, 250)}"
    bundle = SecretsBundle.generate()
    opts = GenOptions(cluster_name="rules", endpoint=f"https://{address}:6443")
    config = generate(bundle, opts, output_types=[OutputType.CONTROLPLANE], with_docs=False).outputs[
        OutputType.CONTROLPLANE
    ]
    # This machine addresses only loopback: no lookup of the public discovery service.
    config = config.replace("endpoint: https://discovery.talos.dev/", "endpoint: http://127.0.0.1:9/")
    assert "discovery.talos.dev" not in config
    source = tmp_path / "controlplane.yaml"
    source.write_text(config)
    node = Node(Layout(tmp_path / "root", address), config_source=source)

    async def main() -> None:
        run = asyncio.create_task(node.run())
        try:
            async with asyncio.timeout(60):
                while not any(
                    r.id == "apid" and r.spec.running
                    for r in node.state.list(SERVICES.default_namespace, SERVICES)
                ):
                    assert not run.done(), f"node ended early: {run.result() if not run.cancelled() else ''}"
                    await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # let the controllers settle
            controllers = {c.name for c in _controllers(tmp_path)}
            wrong: list[str] = []
            seen: set[str] = set()
            for rtype in NODE_TYPES:
                if rtype.type not in DERIVED:
                    continue
                for resource in node.state.list(rtype.default_namespace, rtype):
                    seen.add(rtype.type)
                    if resource.metadata.owner not in controllers:
                        wrong.append(f"{rtype.type}/{resource.id} owned by {resource.metadata.owner!r}")
            assert not wrong, "derived resources not written by a controller:\n" + "\n".join(wrong)
            # The check saw the node's derived state, not an empty one.
            assert {"MachineStatuses.runtime.talos.dev", "Services.v1alpha1.talos.dev",
                    "ApiCertificates.secrets.talos.dev", "EtcdSpecs.etcd.talos.dev"} <= seen  # fmt: skip
        finally:
            node.finish(0)
            async with asyncio.timeout(30):
                await run

    asyncio.run(main())
