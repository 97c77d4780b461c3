"""The kernel's hostname: set from the merged HostnameSpec only on a node with its own UTS namespace."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

import pytest
from controller_helpers import apply, run, running

from ichor.machined.controllers.network.hostname import hostname_controllers, hostname_spec_controller
from ichor.machined.cosi import WAIT_STATUSES, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import HOSTNAME_STATUSES
from ichor.machinery import proc

CONFIG = "version: v1alpha1\nmachine:\n  type: worker\n  network:\n    hostname: {name}\ncluster: {{}}\n"
SRC = Path(__file__).parent.parent / "src"


def test_a_container_node_sets_the_kernel_hostname_and_a_process_node_never_does(tmp_path: Path) -> None:
    calls: list[tuple[str, str]] = []
    own = Layout(root=tmp_path, address="10.5.0.2", own_netns=True, own_uts=True)

    async def main() -> None:
        controllers = [
            *hostname_controllers(own)[:2],
            hostname_spec_controller(own, lambda h, d: calls.append((h, d))),
        ]
        async with running(*controllers) as state:
            await assert_resource(
                state, HOSTNAME_STATUSES, "hostname", lambda r: r.spec.hostname == "talos-10-5-0-2"
            )
            apply(state, CONFIG.format(name="node-1.lab.example"))
            await assert_resource(state, HOSTNAME_STATUSES, "hostname", lambda r: r.spec.hostname == "node-1")
        assert calls == [("talos-10-5-0-2", ""), ("node-1", "lab.example")]

    run(main)
    # A process node: the default setter would change the host's hostname; it is never called.
    host_name = socket.gethostname()

    async def process_node() -> None:
        async with running(*hostname_controllers(Layout(root=tmp_path, address="127.5.0.9"))) as state:
            apply(state, CONFIG.format(name="must-not-be-set"))
            await assert_resource(
                state, HOSTNAME_STATUSES, "hostname", lambda r: r.spec.hostname == "must-not-be-set"
            )

    run(process_node)
    assert socket.gethostname() == host_name


def test_a_refused_sethostname_is_a_wait_naming_the_key(tmp_path: Path) -> None:
    def refuse(hostname: str, domainname: str) -> None:
        raise PermissionError(1, "Operation not permitted")

    own = Layout(root=tmp_path, address="10.5.0.2", own_uts=True)

    async def main() -> None:
        async with running(*hostname_controllers(own)[:2], hostname_spec_controller(own, refuse)) as state:
            await assert_resource(state, WAIT_STATUSES, "network.HostnameSpecController",
                                  lambda r: "machine.network.hostname" in r.spec.reason)  # fmt: skip

    run(main)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_set_kernel_hostname_changes_the_uts_namespace_it_runs_in() -> None:
    host_name = socket.gethostname()
    script = (
        "import socket; from ichor.machined.controllers.network.hostname import set_kernel_hostname; "
        "set_kernel_hostname('ichor-uts-test', 'lab.example'); "
        "print(socket.gethostname(), open('/proc/sys/kernel/domainname').read().strip())"
    )
    result = proc.run(["unshare", "--uts", sys.executable, "-c", script], timeout=30,
                      env={**os.environ, "PYTHONPATH": str(SRC)})  # fmt: skip
    assert result.stdout.split() == ["ichor-uts-test", "lab.example"]
    assert socket.gethostname() == host_name
