"""/etc/hosts and /etc/resolv.conf: Talos's contents, written under the node's root, statuses, readiness."""

from __future__ import annotations

import os
from pathlib import Path

from controller_helpers import apply, run, running

from ichor.machined.controllers import network
from ichor.machined.cosi import assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ETC_FILE_SPECS,
    ETC_FILE_STATUSES,
    NETWORK_STATUSES,
    HostnameStatusSpec,
)
from ichor.machinery.config import load_config

CONFIG = """version: v1alpha1
machine:
  type: worker
  network:
    hostname: node-1.lab.example
    nameservers: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4]
    extraHostEntries:
      - ip: 192.168.1.100
        aliases: [example, www.example]
      - ip: not-an-ip
        aliases: [skipped]
      - ip: 192.168.1.101
        aliases: ["bad alias\\n1.2.3.4 injected"]
cluster: {}
"""


def test_a_process_node_writes_talos_hosts_and_resolv_conf_under_its_root(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.9")
    host_hosts = Path("/etc/hosts").read_bytes() if Path("/etc/hosts").exists() else None

    async def main() -> None:
        async with running(*network.network_controllers(layout)) as state:
            apply(state, CONFIG)
            status = await assert_resource(state, ETC_FILE_STATUSES, "hosts",
                                           lambda r: "node-1" in (tmp_path / "etc/hosts").read_text())  # fmt: skip
            spec = state.get("files", ETC_FILE_SPECS, "hosts")
            assert status.spec.spec_version == str(spec.metadata.version)
            await assert_resource(state, ETC_FILE_STATUSES, "resolv.conf",
                                  lambda r: "10.0.0.1" in (tmp_path / "etc/resolv.conf").read_text())  # fmt: skip
            await assert_resource(state, NETWORK_STATUSES, "status", lambda r: r.spec.etc_files_ready)
            await assert_resource(state, ETC_FILE_STATUSES, "pod-resolv.conf")

    run(main)
    assert (tmp_path / "etc/hosts").read_text() == (
        "127.0.0.1     localhost\n"
        "127.5.0.9     node-1.lab.example node-1\n"
        "::1           localhost ip6-localhost ip6-loopback\n"
        "ff02::1       ip6-allnodes\n"
        "ff02::2       ip6-allrouters\n"
        "192.168.1.100 example www.example\n"
    )
    assert (tmp_path / "etc/resolv.conf").read_text() == (
        "nameserver 10.0.0.1\nnameserver 10.0.0.2\nnameserver 10.0.0.3\n\nsearch lab.example\n"
    )
    assert oct(os.stat(tmp_path / "etc/hosts").st_mode & 0o777) == "0o644"
    # The kubelet's resolvConf, for pods: without host DNS the same resolvers.
    assert (tmp_path / "system/resolved/resolv.conf").read_text() == (
        tmp_path / "etc/resolv.conf"
    ).read_text()
    # The host's own /etc is never touched.
    assert (Path("/etc/hosts").read_bytes() if Path("/etc/hosts").exists() else None) == host_hosts


def test_hosts_without_a_domain_and_resolv_conf_without_search() -> None:
    hosts = network.render_hosts(HostnameStatusSpec("talos-10-5-0-2"), "10.5.0.2", None)
    assert hosts.splitlines()[:2] == ["127.0.0.1 localhost", "10.5.0.2  talos-10-5-0-2"]
    assert (
        network.render_resolv_conf(("1.1.1.1", "8.8.8.8"), ("",))
        == "nameserver 1.1.1.1\nnameserver 8.8.8.8\n"
    )
    # A search domain from DHCP that would add a line is dropped; duplicates go.
    assert network.render_resolv_conf(
        ("10.0.0.1",), ("a.example", "evil\nnameserver 6.6.6.6", "a.example")
    ) == ("nameserver 10.0.0.1\n\nsearch a.example\n")


def test_disable_search_domain_leaves_the_hostname_domain_out(tmp_path: Path) -> None:
    text = CONFIG.replace(
        "    hostname: node-1.lab.example\n",
        "    hostname: node-1.lab.example\n    disableSearchDomain: true\n",
    )
    assert load_config(text) is not None

    async def main() -> None:
        async with running(*network.network_controllers(Layout(root=tmp_path, address="127.5.0.9"))) as state:
            apply(state, text)
            await assert_resource(state, ETC_FILE_SPECS, "resolv.conf", lambda r: "search" not in r.spec.contents
                                  and "nameserver 10.0.0.3" in r.spec.contents)  # fmt: skip

    run(main)
