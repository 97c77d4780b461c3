"""``cluster create --provisioner qemu`` without a VM: the QEMU command line per boot (Talos's
``launch.go`` rules: direct kernel until the system disk has partitions, the firmware after, unless
``--with-bootloader=false``), the kernel command line, the flags it takes and refuses, the configs it
generates, the launcher's reboot rule, the config server, and what destroy removes."""

from __future__ import annotations

import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_destroy_order import FakeHost

from ichor.machined.platform import EXIT_REBOOT
from ichor.machinery.blockdev import write_disk_table
from ichor.machinery.blockdev._gpt import Partition, new_table
from ichor.machinery.config import Mode, load_config, validate
from ichor.machinery.errors import MachineryError
from ichor.machinery.secrets import SecretsBundle
from ichor.machinery.yamlio import load_documents, to_plain
from ichor.provision import _network as net
from ichor.provision import _qemu, _remains
from ichor.provision._configs import Patches, node_configs
from ichor.provision._record import ClusterRecord, NodeRecord
from ichor.provision.launcher import Launcher

_BUNDLE = SecretsBundle.generate()


def _launch(tmp_path: Path, **kw: Any) -> _qemu.LaunchConfig:
    values: dict[str, Any] = dict(
        name="c-controlplane-1", memory_mb=1024, vcpus=1,
        disks=[str(tmp_path / "c-controlplane-1-0.disk"), str(tmp_path / "c-controlplane-1-1.disk")],
        taps=["tapaaaaaaaa-0", "tapaaaaaaaa-1"], macs=["02:00:00:00:00:01", "02:00:00:00:00:02"],
        uuid="5b0c5b2e-0000-4000-8000-000000000001", serial_log=str(tmp_path / "n.log"),
        monitor=str(tmp_path / "n.monitor"), cmdline=_qemu.boot_cmdline("") + f" talos.config={_qemu.CONFIG_URL}",
        kernel="/k/vmlinuz-amd64", initrd="/k/initramfs-amd64.xz",
    )  # fmt: skip
    values.update(kw)
    return _qemu.LaunchConfig(**values)


def _after(command: list[str], flag: str) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == flag]


def test_the_kernel_command_line_is_talos_qemu_provisioners() -> None:
    line = _qemu.boot_cmdline("talos.dashboard.disabled=1 ip=dhcp")
    assert line.startswith("init_on_alloc=1 slab_nomerge pti=on consoleblank=0")
    assert line.endswith(
        "ima_hash=sha512 console=ttyS0 reboot=k panic=1 talos.shutdown=halt talos.platform=metal "
        "talos.dashboard.disabled=1 ip=dhcp"
    )


def test_a_first_boot_loads_the_kernel_with_the_config_url_and_every_nic_disk_and_socket(
    tmp_path: Path,
) -> None:
    command = _qemu.qemu_command(
        _launch(tmp_path), boot_disk=False, config_url="http://10.5.0.1:4444/config.yaml"
    )
    assert command[0] == "qemu-system-x86_64" and "-no-reboot" in command
    assert _after(command, "-accel") == ["tcg"] and _after(command, "-cpu") == ["max"]
    assert _after(command, "-kernel") == ["/k/vmlinuz-amd64"]
    assert _after(command, "-initrd") == ["/k/initramfs-amd64.xz"]
    (append,) = _after(command, "-append")
    assert append.endswith("talos.platform=metal talos.config=http://10.5.0.1:4444/config.yaml")
    assert _after(command, "-netdev") == [
        "tap,id=net0,ifname=tapaaaaaaaa-0,script=no,downscript=no",
        "tap,id=net1,ifname=tapaaaaaaaa-1,script=no,downscript=no",
    ]
    assert "virtio-net-pci,netdev=net1,mac=02:00:00:00:00:02" in _after(command, "-device")
    drives = _after(command, "-drive")
    assert drives[0] == f"format=raw,if=virtio,file={tmp_path}/c-controlplane-1-0.disk,cache=unsafe"
    assert drives[1] == f"format=raw,if=ide,file={tmp_path}/c-controlplane-1-1.disk,cache=unsafe"
    assert _after(command, "-monitor") == [f"unix:{tmp_path}/n.monitor,server,nowait"]
    # Appended: a relaunch after a reboot keeps the earlier boots' console (tail -F works).
    assert _after(command, "-chardev") == [f"file,id=console,path={tmp_path}/n.log,append=on"]
    assert _after(command, "-smbios") == ["type=1,uuid=5b0c5b2e-0000-4000-8000-000000000001"]
    assert not [d for d in drives if "pflash" in d]  # SeaBIOS without --with-uefi


def test_an_installed_disk_boots_through_the_firmware_unless_the_bootloader_is_off(tmp_path: Path) -> None:
    uefi = _launch(
        tmp_path, uefi_code="/usr/share/OVMF/OVMF_CODE_4M.fd", uefi_vars=str(tmp_path / "n.vars.fd")
    )
    from_disk = _qemu.qemu_command(uefi, boot_disk=True)
    assert "-kernel" not in from_disk and "-cdrom" not in from_disk
    assert _after(from_disk, "-drive")[-2:] == [
        "if=pflash,format=raw,unit=0,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd",
        f"if=pflash,format=raw,unit=1,file={tmp_path}/n.vars.fd",
    ]
    no_bootloader = _qemu.qemu_command(_launch(tmp_path, bootloader=False), boot_disk=True)
    assert "-kernel" in no_bootloader
    iso = _qemu.qemu_command(_launch(tmp_path, iso="/x/metal-amd64.iso"), boot_disk=False)
    assert _after(iso, "-cdrom") == ["/x/metal-amd64.iso"] and "-kernel" not in iso
    assert "-cdrom" not in _qemu.qemu_command(_launch(tmp_path, iso="/x/metal-amd64.iso"), boot_disk=True)
    kvm = _qemu.qemu_command(_launch(tmp_path, accel="kvm"), boot_disk=False)
    assert _after(kvm, "-accel") == ["kvm"] and _after(kvm, "-cpu") == ["host"]


def test_a_disk_is_bootable_once_it_has_a_partition_table_with_partitions(tmp_path: Path) -> None:
    disk = tmp_path / "n-0.disk"
    with disk.open("wb") as f:
        f.truncate(64 * 2**20)
    assert not _qemu.disk_bootable(disk)
    sectors = 64 * 2**20 // 512
    write_disk_table(disk, new_table(sectors))
    assert not _qemu.disk_bootable(disk)  # a GPT with no partition: Talos's checkPartitions says no
    efi = Partition(1, "EFI", uuid.UUID("c12a7328-f81f-11d2-ba4b-00a0c93ec93b"), uuid.uuid4(), 2048, 4095)
    write_disk_table(disk, new_table(sectors, [efi]))
    assert _qemu.disk_bootable(disk)
    assert not _qemu.disk_bootable(tmp_path / "missing.disk")


def test_vcpus_are_talos_cpu_share_rounded_to_even_and_at_least_one() -> None:
    assert [_qemu.VMOptions(cpus=c).vcpus("controlplane") for c in ("2.0", "0.5", "1.5", "2.5", "3")] == [
        2, 1, 2, 2, 3,
    ]  # fmt: skip
    assert _qemu.VMOptions(cpus_workers="4").vcpus("worker") == 4
    with pytest.raises(MachineryError, match="--cpus-workers 'x' is not a number"):
        _qemu.VMOptions(cpus_workers="x").vcpus("worker")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"disk_mb": 0}, "--disk 0: a disk needs at least 1 MB"),
        ({"nics": 5}, "--with-nics 5 is out of range"),
        ({"extra_disks": -1}, "--extra-disks -1 is out of range"),
        ({"memory_mb": 256}, "--memory 256 MB is too little for a VM node"),
        ({"vmlinuz_path": "/nonexistent/vmlinuz"}, "--vmlinuz-path /nonexistent/vmlinuz: no such file"),
        ({"extra_cidr": "10.6.0.0/24"}, "VM nodes take --with-nics"),
        ({"extensions": ["/x"]}, "--extension layers into container nodes"),
        ({"static_addresses": True}, "--static-addresses is for container nodes"),
        ({"extra_boot_kernel_args": 'a="b c"'}, "cannot be passed on the kernel command line"),
    ],
)
def test_vm_flags_out_of_range_are_refused_naming_the_flag(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(MachineryError, match=message.replace("(", r"\(")):
        _qemu.PROVISIONER.check_flags({"with_uefi": False, **flags})


def test_kernel_and_initrd_go_together(tmp_path: Path) -> None:
    kernel = tmp_path / "vmlinuz"
    kernel.write_bytes(b"k")
    with pytest.raises(MachineryError, match="--vmlinuz-path and --initrd-path go together"):
        _qemu.PROVISIONER.check_flags({"with_uefi": False, "vmlinuz_path": str(kernel)})


@pytest.mark.parametrize("provisioner", ["container", "process"])
def test_other_provisioners_refuse_vm_flags_naming_them(provisioner: str) -> None:
    from ichor.provision._provisioner import provisioner_for

    provider = provisioner_for(provisioner)
    provider.check_flags({"nics": 1, "disk_mb": 6144, "with_uefi": True})  # the defaults pass
    with pytest.raises(MachineryError, match=f"--with-nics needs VM nodes: {provisioner} nodes"):
        provider.check_flags({"nics": 2})


def _record(tmp_path: Path, **vm: Any) -> ClusterRecord:
    record = ClusterRecord(name="c", cidr="10.5.0.0/24", state_dir=str(tmp_path), provisioner="qemu",
                           discovery_endpoint="http://10.5.0.1:3000/", vm=vm)  # fmt: skip
    record.nodes = [
        NodeRecord("c-controlplane-1", "controlplane", "10.5.0.2", str(tmp_path / "c-controlplane-1")),
        NodeRecord("c-worker-1", "worker", "10.5.0.3", str(tmp_path / "c-worker-1")),
    ]
    for node in record.nodes:
        _qemu.PROVISIONER.plan_node(record, node)
    return record


def test_each_node_gets_taps_macs_disks_and_a_uuid_of_its_own(tmp_path: Path) -> None:
    record = _record(tmp_path, nics=2, extra_disks=1)
    cp, worker = record.nodes
    assert cp.taps == [_qemu.tap_name("c", cp.name, 0), _qemu.tap_name("c", cp.name, 1)]
    assert all(len(t) <= 15 for t in cp.taps) and not set(cp.taps) & set(worker.taps)
    assert cp.mac == cp.macs[0] == net.node_mac("c", cp.name)  # the DHCP reservation's MAC
    assert len(set(cp.macs + worker.macs)) == 4
    assert cp.disks == [str(tmp_path / "c-controlplane-1-0.disk"), str(tmp_path / "c-controlplane-1-1.disk")]
    assert uuid.UUID(cp.uuid) != uuid.UUID(worker.uuid)


@pytest.mark.parametrize("bootloader", [True, False])
def test_vm_configs_install_to_vda_take_dhcp_on_virtio_and_validate_for_metal(
    tmp_path: Path, bootloader: bool
) -> None:
    record = _record(tmp_path, with_bootloader=bootloader)
    configs = node_configs(record, _BUNDLE, [], Patches([], [], []))
    for name, text in configs.items():
        result = validate(load_config(text, source=name), Mode.METAL)
        assert not result.errors, (name, result.errors)
        machine = to_plain(load_documents(text, source=name)[0])["machine"]
        assert machine["install"]["disk"] == "/dev/vda"
        assert "talos.platform=metal" in machine["install"]["extraKernelArgs"]
        (interface,) = machine["network"]["interfaces"]
        assert interface["deviceSelector"] == {"driver": "virtio_net"} and interface["dhcp"] is True
        assert machine["time"]["servers"] == ["10.5.0.1"]
        assert ("kernel.kexec_load_disabled" in machine.get("sysctls", {})) is not bootloader


def test_a_guest_reboot_relaunches_qemu_and_a_stop_ends_it(tmp_path: Path) -> None:
    class FakeQemu:
        def __init__(self, code: int) -> None:
            self.code, self.pid = code, 4242

        def wait(self, timeout: float | None = None) -> int:
            return self.code

        def signal_group(self, sig: int) -> None:
            pass

        def poll(self) -> int:
            return self.code

    boots: list[_qemu.VMBoot] = []
    launcher: Launcher

    def start() -> _qemu.VMBoot:
        boots.append(_qemu.VMBoot(FakeQemu(0 if len(boots) < 2 else 1)))  # type: ignore[arg-type]
        if len(boots) == 3:
            launcher.stop()
        return boots[-1]

    launcher = Launcher(start, None, tmp_path / "log", sleep=lambda _: None)
    assert boots == [] and launcher.run() == 0
    assert len(boots) == 3  # two reboots (QEMU exit 0), then powered off by the stop
    assert _qemu.VMBoot(FakeQemu(0)).wait() == EXIT_REBOOT  # type: ignore[arg-type]
    assert _qemu.VMBoot(FakeQemu(1)).wait() == 1  # type: ignore[arg-type]


def test_the_config_server_serves_the_nodes_config_only(tmp_path: Path) -> None:
    config = tmp_path / "n.yaml"
    config.write_text("version: v1alpha1\n")
    server = _qemu.ConfigServer("127.0.0.1", config)
    try:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/config.yaml")
        with urllib.request.urlopen(server.url, timeout=5) as reply:
            assert reply.read() == b"version: v1alpha1\n"
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(server.url.replace("config.yaml", "secrets.yaml"), timeout=5)
    finally:
        server.close()


def test_destroy_removes_the_taps_before_the_bridge_even_without_a_record(tmp_path: Path) -> None:
    record = _record(tmp_path)
    host = FakeHost(record=tmp_path / "cluster.yaml")
    bridge = net.bridge_name("c")
    host.links = {bridge: "10.5.0.0/24", **{t: "" for n in record.nodes for t in n.taps}}
    host.firewalls, host.blackholes = {net.firewall_table(bridge)}, {"10.5.0.0/24"}
    for node in record.nodes:  # what a killed create leaves: launcher logs, no record
        (tmp_path / f"{node.name}.launcher.log").write_text("")
    found = _qemu.PROVISIONER.host_parts(None, "c", tmp_path, host)
    assert sorted(found.taps) == sorted(t for n in record.nodes for t in n.taps)
    _remains.remove(found, host, lambda line: None)
    order = [part for part, _ in host.removed]
    assert order.index(bridge) > max(order.index(t) for n in record.nodes for t in n.taps)
    assert order[-1] == "10.5.0.0/24" and not host.everything()
    assert _remains.recorded(record).taps == [t for n in record.nodes for t in n.taps]


def test_the_cli_hands_the_vm_flags_to_the_qemu_provisioner_only(
    talosctl: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ichor.provision import _cluster

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(_cluster, "create", lambda **kw: calls.append(kw))
    r = talosctl("cluster", "create", "--provisioner", "qemu", "--disk", "2048", "--with-uefi=false",
                 "--with-nics", "2", "--cpus", "1", "--memory", "1024", "--extra-disks", "1",
                 "--extra-boot-kernel-args", "talos.dashboard.disabled=1", "--iso-path", "x.iso",
                 "--with-apply-config", "--masters", "1", cwd=tmp_path)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    (kw,) = calls
    assert kw["provisioner"] == "qemu" and kw["cidr"] == "10.5.0.0/24"
    assert kw["cpus"] == {} and kw["memory_mb"] == {}  # a VM's size, not a cgroup limit
    vm = kw["vm_flags"]
    assert (vm["disk_mb"], vm["with_uefi"], vm["nics"], vm["cpus"], vm["memory_mb"], vm["extra_disks"]) == (
        2048, False, 2, "1", 1024, 1,
    )  # fmt: skip
    assert vm["with_apply_config"] is True and vm["with_bootloader"] is True
    assert (
        vm["iso_path"] == str(tmp_path / "x.iso")
        and vm["extra_boot_kernel_args"] == "talos.dashboard.disabled=1"
    )
    r = talosctl("cluster", "create", "--provisioner", "container", "--with-apply-config")
    assert r.exit_code == 1 and len(calls) == 1
    assert "--with-apply-config is not supported by Ichor's cluster create" in r.stderr
    assert "VM nodes take it (--provisioner qemu)" in r.stderr
    r = talosctl("cluster", "create", "--provisioner=qemu", "--with-tpm2")
    assert r.exit_code == 1 and "--with-tpm2 is not supported" in r.stderr


def test_a_direct_boot_carries_the_nodes_reserved_address_as_ip(tmp_path: Path) -> None:
    record = _record(tmp_path)
    cp, worker = record.nodes
    assert _qemu.ip_argument(record, cp) == "ip=10.5.0.2::10.5.0.1:255.255.255.0:c-controlplane-1::off"
    from ichor.machined.kernelargs import parse_ip

    parsed = parse_ip(_qemu.ip_argument(record, worker).removeprefix("ip="))
    assert parsed is not None and (parsed.ip, parsed.gateway, parsed.hostname) == (
        "10.5.0.3",
        "10.5.0.1",
        "c-worker-1",
    )


def test_cluster_show_lists_each_vm_with_its_disks_console_and_monitor(tmp_path: Path) -> None:
    record = _record(tmp_path, extra_disks=1)
    record.accel = "tcg"
    cp = record.nodes[0]
    for i, disk in enumerate(cp.disks):
        with open(disk, "wb") as f:
            f.truncate((i + 1) * 2**20)
    header, first, second = _qemu.PROVISIONER.show_rows(record)
    assert header == ["NAME", "QEMU PID", "ACCEL", "DISKS", "CONSOLE LOG", "MONITOR"]
    assert first[:3] == [cp.name, "-", "tcg"]  # no QEMU of this cluster runs
    assert first[3] == "c-controlplane-1-0.disk:1MiB(0MiB used),c-controlplane-1-1.disk:2MiB(0MiB used)"
    assert first[4:] == [str(tmp_path / f"{cp.name}.log"), str(tmp_path / f"{cp.name}.monitor")]
    assert "gone" in second[3]  # the worker's disks were never made
