"""``talosctl cluster create --provisioner qemu``: a 1-node VM cluster from the imager's cached kernel
and initramfs, configured through ``talos.config=`` (the launcher's config server on the bridge's
gateway), answering ``talosctl version`` and ``disks`` with the cluster's talosconfig, rebooted
through its QEMU monitor socket (``q``: QEMU exits, the launcher starts it again, the node boots and
answers again), shown by ``cluster show`` and destroyed with nothing left: no process of the cluster,
no tap, bridge, route or nftables table, no state directory.

Time budget (QEMU TCG, 1 vCPU, 1 GiB, OVMF; the KVM canary's verdict cached): measured on 2 cores
at load ~6, create returned with etcd bootstrapped after 108 s, the API answered again 86 s after
``q``, and the whole test took 200 s. It allows 15 min in all (create's own wait 10 min, each boot
7 min). It runs alone (``vm``), under ``/tmp/ichor-heavy.lock`` like every VM.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from container_helpers import free_cidr
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from ichor.machinery import proc
from ichor.provision import _network as net
from ichor.provision._processes import find
from ichor.provision._qemu import tap_name

pytestmark = [pytest.mark.e2e, pytest.mark.vm, pytest.mark.root, pytest.mark.slow]

BOOT_LIMIT = 420.0
"""Seconds a boot may take to the configured API (the measured ~90 s, times a loaded host)."""


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (bridge, taps, routes)"
    for tool in ("qemu-system-x86_64", "ip", "dnsmasq", "nft", "chronyd", "mksquashfs"):
        if shutil.which(tool) is None:
            return f"needs {tool} (scripts/os-packages.txt)"
    return None


@pytest.fixture
def cluster() -> Iterator[tuple[str, Path, str, dict[str, str]]]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    # Short: the monitor socket's path must fit a unix socket address.
    work = Path(tempfile.mkdtemp(prefix="iq", dir="/tmp"))
    name = f"q{os.getpid()}"
    env = {**os.environ, "TALOSCONFIG": str(work / "talosconfig")}
    try:
        yield name, work / "st", free_cidr(), env
    finally:
        for log in sorted((work / "st" / name).glob("*.log")):
            print(f"--- {log.name} (last 3000 characters)\n{log.read_text(errors='replace')[-3000:]}")
        _talosctl(env, "cluster", "destroy", "--name", name, "--state", str(work / "st"), timeout=300)
        shutil.rmtree(work, ignore_errors=True)


def _talosctl(env: dict[str, str], *args: str, timeout: float = 120) -> proc.Completed:
    return proc.run([sys.executable, "-m", "ichor", *args], env=env, check=False, timeout=timeout)


def _monitor(path: Path, command: bytes) -> bytes:
    """Send ``command`` to the QEMU monitor at ``path`` as ``echo q | socat - unix-connect:...`` does:
    after QEMU's banner, and reading until QEMU closes (a peer that hangs up at once may lose it)."""
    seen = b""
    with socket.socket(socket.AF_UNIX) as monitor:
        monitor.settimeout(30)
        monitor.connect(str(path))
        while b"(qemu)" not in seen:
            chunk = monitor.recv(4096)
            if not chunk:
                break
            seen += chunk
        monitor.sendall(command)
        try:
            while chunk := monitor.recv(4096):
                seen += chunk
        except TimeoutError:
            pass
    return seen


def _wait_version(env: dict[str, str], address: str, limit: float) -> float:
    started = time.monotonic()
    while True:
        r = _talosctl(env, "-n", address, "version", timeout=60)
        if r.exit_code == 0:
            return time.monotonic() - started
        assert time.monotonic() - started < limit, (
            f"no `talosctl version` within {limit:g}s: {r.stderr[-800:]}"
        )
        time.sleep(3)


def _watchdog_sysfs(env: dict[str, str], address: str) -> tuple[str, str]:
    values = []
    for key in ("state", "timeout"):
        read = _talosctl(env, "-n", address, "read", f"/sys/class/watchdog/watchdog0/{key}")
        assert read.exit_code == 0, read.stderr
        values.append(read.stdout.strip())
    return values[0], values[1]


def _watchdog_armed_and_disarmed(env: dict[str, str], address: str, config: Path, patch: Path) -> None:
    """The seed's ``WatchdogTimerConfig`` (004:757-771) on the VM's i6300esb, as Talos's own
    integration test checks it: armed with the document's timeout in the kernel's sysfs,
    ``WatchdogTimerStatus`` with the feed interval, disarmed when the config drops the document.
    (~10 s: two config changes without a reboot and a few reads.)"""
    assert _watchdog_sysfs(env, address)[0] == "inactive"
    patch.write_text("apiVersion: v1alpha1\nkind: WatchdogTimerConfig\ndevice: /dev/watchdog0\ntimeout: 2m\n")
    patched = _talosctl(env, "-n", address, "patch", "mc", "--mode", "no-reboot", "--patch", f"@{patch}")
    assert patched.exit_code == 0, patched.stdout + patched.stderr
    deadline = time.monotonic() + 60
    while (
        status := _talosctl(env, "-n", address, "get", "watchdogtimerstatuses", "-o", "yaml")
    ).stdout.count("feedInterval: 40s") != 1:
        assert time.monotonic() < deadline, status.stdout + status.stderr
        time.sleep(2)
    assert _watchdog_sysfs(env, address) == ("active", "120")
    applied = _talosctl(env, "-n", address, "apply-config", "--mode", "no-reboot", "--file", str(config))
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    deadline = time.monotonic() + 60
    while _watchdog_sysfs(env, address)[0] != "inactive":
        assert time.monotonic() < deadline, "the watchdog stayed armed without its document"
        time.sleep(2)


BOND = """machine:
  network:
    interfaces:
      - interface: bond0
        dhcp: true
        bond:
          mode: active-backup
          interfaces: [eth0, eth1]
          miimon: 100
          updelay: 200
          downdelay: 200
        vlans:
          - vlanId: 100
            addresses: [{vlan_address}/24]
      - interface: dummy0
        dummy: true
        addresses: [192.0.2.1/32]
      - interface: wg0
        addresses: [192.0.2.9/32]
        wireguard:
          privateKey: {wg_private}
          listenPort: 51820
          peers:
            - publicKey: {wg_peer}
              allowedIPs: [198.51.100.0/24]
"""


def _bond_and_vlan(env: dict[str, str], address: str, bridge: str, patch: Path) -> None:
    """The Advanced Networking guide's bond with a VLAN on top (001:40-76) on the VM's two NICs:
    ``bond0`` (active-backup, miimon) over eth0 and eth1 keeps the node's DHCP address (the bond
    takes eth0's MAC), ``bond0.100`` carries a static address, and tagged traffic crosses the
    cluster bridge: from a namespace of the test's own on the bridge, an 802.1Q-tagged ARP request
    for the VM's VLAN address gets its tagged reply (``vlan_probe.py``: no VLAN device on this side,
    which would need the ``8021q`` module in the host's kernel). ``get links`` shows the bond, its
    two slaves and the VLAN link; ``get addresses`` both addresses. The same patch adds the Advanced
    Networking guide's other logical links: a ``dummy`` link and a WireGuard link (keys made here, a
    peer with no endpoint, so nothing is sent): both exist with their kind and addresses, and no
    network controller waits. (~60 s.)"""
    vlan_net = ipaddress.ip_network(free_cidr())
    vm_vlan, peer_vlan = str(vlan_net.network_address + 2), str(vlan_net.network_address + 1)
    netns, host_end, inner = f"iqv{os.getpid()}", f"iqv{os.getpid()}h", f"iqv{os.getpid()}n"
    try:
        for command in (
            ["netns", "add", netns],
            ["link", "add", host_end, "type", "veth", "peer", "name", inner],
            ["link", "set", inner, "netns", netns],
            ["link", "set", host_end, "master", bridge, "up"],
            ["-n", netns, "link", "set", inner, "up"],
        ):
            proc.run(["ip", *command], timeout=15)
        wg_private, wg_peer = (
            base64.b64encode(X25519PrivateKey.generate().private_bytes_raw()).decode(),
            base64.b64encode(X25519PrivateKey.generate().public_key().public_bytes_raw()).decode(),
        )
        patch.write_text(BOND.format(vlan_address=vm_vlan, wg_private=wg_private, wg_peer=wg_peer))
        patched = _talosctl(env, "-n", address, "patch", "mc", "--mode", "no-reboot", "--patch", f"@{patch}")
        assert patched.exit_code == 0, patched.stdout + patched.stderr
        probe = [
            "ip", "netns", "exec", netns, sys.executable, str(Path(__file__).parent / "vlan_probe.py"),
            inner, "100", peer_vlan, vm_vlan, "3",
        ]  # fmt: skip
        deadline = time.monotonic() + 240
        while (answer := proc.run(probe, check=False, timeout=30)).exit_code:
            assert time.monotonic() < deadline, (
                f"no tagged ARP reply from {vm_vlan} on VLAN 100: {answer.stderr}"
            )
            time.sleep(2)
        print(f"VLAN 100: {vm_vlan} is at {answer.stdout.strip()}")
        _wait_version(env, address, 120)  # the node kept its DHCP address on the bond
        links = _talosctl(env, "-n", address, "get", "links", "-o", "yaml")
        assert links.exit_code == 0, links.stderr
        for needed in ("id: bond0\n", "id: bond0.100\n", "kind: bond", "kind: vlan", "slaveKind: bond"):
            assert needed in links.stdout, f"{needed!r} not in get links"
        assert links.stdout.count("slaveKind: bond") == 2, "eth0 and eth1 are the bond's slaves"
        addresses = _talosctl(env, "-n", address, "get", "addresses")
        assert f"bond0.100/{vm_vlan}/{vlan_net.prefixlen}" in addresses.stdout, addresses.stdout
        assert f"bond0/{address}/" in addresses.stdout, addresses.stdout
        deadline = time.monotonic() + 60
        while "id: wg0\n" not in links.stdout and time.monotonic() < deadline:
            time.sleep(3)
            links = _talosctl(env, "-n", address, "get", "links", "-o", "yaml")
        if "id: wg0\n" not in links.stdout:
            logged = _talosctl(env, "-n", address, "logs", "controller-runtime").stdout
            why = "\n".join(line for line in logged.splitlines() if "wg0" in line or "ireguard" in line)
            waits = _talosctl(env, "-n", address, "get", "waits").stdout
            raise AssertionError(
                f"no wg0 in get links; controller-runtime says:\n{why[-4000:]}\nwaits:\n{waits}"
            )
        for needed in ("id: dummy0\n", "kind: dummy", "id: wg0\n", "kind: wireguard"):
            assert needed in links.stdout, f"{needed!r} not in get links"
        deadline = time.monotonic() + 60  # wg0's address follows wg0 (read again: the list above is older)
        while (
            "wg0/192.0.2.9/32" not in (addresses := _talosctl(env, "-n", address, "get", "addresses")).stdout
        ):
            assert time.monotonic() < deadline, addresses.stdout
            time.sleep(3)
        assert "dummy0/192.0.2.1/32" in addresses.stdout, addresses.stdout
        waits = _talosctl(env, "-n", address, "get", "waits")
        assert not re.search(r"network\.(Link|Address)", waits.stdout), waits.stdout
    finally:
        proc.run(["ip", "netns", "delete", netns], check=False, timeout=15)
        proc.run(["ip", "link", "delete", host_end], check=False, timeout=15)


def test_a_qemu_node_boots_configured_reboots_through_its_monitor_and_is_destroyed_without_remains(
    cluster: tuple[str, Path, str, dict[str, str]],
) -> None:
    name, state, cidr, env = cluster
    node = f"{name}-controlplane-1"
    address = net.node_addresses(cidr, 1)[0]
    state_dir = state / name
    started = time.monotonic()
    created = _talosctl(
        env, "cluster", "create", "--provisioner", "qemu", "--name", name, "--state", str(state),
        "--cidr", cidr, "--workers", "0", "--cpus", "1", "--memory", "1024", "--disk", "3072", "--with-nics", "2",
        "--no-wait", "--wait-timeout", "10m", "--skip-kubeconfig", timeout=900,
    )  # fmt: skip
    log = (
        (state_dir / f"{node}.log").read_text(errors="replace")
        if (state_dir / f"{node}.log").exists()
        else ""
    )
    assert created.exit_code == 0, created.stderr[-3000:] + "\nconsole:\n" + log[-3000:]
    create_took = time.monotonic() - started
    assert re.search(r"acceleration: (tcg|kvm)", created.stderr)
    assert f"started VM {node}" in created.stderr and "bootstrapping etcd" in created.stderr

    version = _talosctl(env, "-n", address, "version")
    assert version.exit_code == 0 and "Server:" in version.stdout, version.stderr
    disks = _talosctl(env, "-n", address, "disks")
    assert disks.exit_code == 0 and "/dev/vda" in disks.stdout, disks.stdout + disks.stderr

    _watchdog_armed_and_disarmed(env, address, state_dir / f"{node}.yaml", state_dir / "watchdog.yaml")
    _bond_and_vlan(env, address, net.bridge_name(name), state_dir / "bond.yaml")

    shown = _talosctl(env, "cluster", "show", "--name", name, "--state", str(state))
    assert shown.exit_code == 0, shown.stderr
    qemu = [p for p in find(state_dir) if p.role == "qemu-system-x86_64"]
    assert len(qemu) == 1 and str(qemu[0].id.pid) in shown.stdout
    assert f"{node}-0.disk:3072MiB" in shown.stdout and str(state_dir / f"{node}.monitor") in shown.stdout
    disk = state_dir / f"{node}-0.disk"
    assert disk.stat().st_size == 3072 * 2**20 and disk.stat().st_blocks * 512 < disk.stat().st_size  # sparse

    # The docs' quick reboot (001:405): `q` on the monitor; QEMU exits 0 and the launcher relaunches it.
    boots = (state_dir / f"{node}.log").read_text(errors="replace").count("ichor-stage1: switching root")
    _monitor(state_dir / f"{node}.monitor", b"q\n")
    deadline = time.monotonic() + 60
    while [p for p in find(state_dir) if p.role == "qemu-system-x86_64" and p.id == qemu[0].id]:
        assert time.monotonic() < deadline, "QEMU did not quit on the monitor's q"
        time.sleep(0.5)
    rebooted = time.monotonic()
    until_second = BOOT_LIMIT
    while (state_dir / f"{node}.log").read_text(errors="replace").count(
        "ichor-stage1: switching root"
    ) <= boots:
        assert time.monotonic() - rebooted < until_second, "the VM did not boot again after q"
        time.sleep(1)
    answered = _wait_version(env, address, BOOT_LIMIT)
    relaunched = [p for p in find(state_dir) if p.role == "qemu-system-x86_64"]
    assert len(relaunched) == 1 and relaunched[0].id != qemu[0].id
    print(f"create {create_took:.0f}s; after q the API answered again in {time.monotonic() - rebooted:.0f}s "
          f"({answered:.0f}s of polling)")  # fmt: skip

    destroyed = _talosctl(env, "cluster", "destroy", "--name", name, "--state", str(state), timeout=300)
    assert destroyed.exit_code == 0, destroyed.stderr
    assert f"destroyed cluster {name!r}" in destroyed.stderr
    assert not find(state_dir) and not state_dir.exists()
    links = proc.run(["ip", "-o", "link", "show"]).stdout
    assert tap_name(name, node, 0) not in links and net.bridge_name(name) not in links
    assert not net.has_blackhole(cidr) and not net.has_firewall(net.firewall_table(net.bridge_name(name)))


def test_with_apply_config_a_seabios_vm_waits_in_maintenance_and_takes_its_config_over_the_api(
    cluster: tuple[str, Path, str, dict[str, str]],
) -> None:
    """``--with-apply-config --with-uefi=false``: no ``talos.config=`` on the command line, SeaBIOS;
    create waits for the node's insecure maintenance API and applies the config there, as Talos's
    ``ApplyConfig`` step does; the node installs, SeaBIOS boots its disk, and it answers ``version``
    with the cluster's talosconfig."""
    name, state, cidr, env = cluster
    node = f"{name}-controlplane-1"
    address = net.node_addresses(cidr, 1)[0]
    created = _talosctl(
        env, "cluster", "create", "--provisioner", "qemu", "--name", name, "--state", str(state),
        "--cidr", cidr, "--workers", "0", "--cpus", "1", "--memory", "1024", "--disk", "3072",
        "--with-apply-config", "--with-uefi=false", "--no-wait", "--wait-timeout", "10m", "--skip-kubeconfig",
        timeout=900,
    )  # fmt: skip
    assert created.exit_code == 0, created.stderr[-3000:]
    assert "applying configuration to each node over the insecure maintenance API" in created.stderr
    launch = json.loads((state / name / f"{node}.vm.json").read_text())
    assert "talos.config=" not in launch["cmdline"] and launch["uefi_vars"] == "" and launch["config"] == ""
    console = (state / name / f"{node}.log").read_text(errors="replace")
    assert f"talosctl apply-config --insecure --nodes {address} --file" in console  # maintenance mode first
    _wait_version(env, address, BOOT_LIMIT)
    # It installed, and SeaBIOS booted the disk: boot.img in the MBR, core.img in the BIOS partition,
    # BOOT's grub.cfg starting slot A (the only legacy-BIOS install-and-boot of the VM tests).
    console = (state / name / f"{node}.log").read_text(errors="replace")
    assert "installation complete: rebooting into the installed system" in console
    assert re.search(r"Command line: BOOT_IMAGE=/A/vmlinuz .*ichor\.slot=A", console), console[-3000:]
