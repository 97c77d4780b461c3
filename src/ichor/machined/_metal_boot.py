"""machined's start on the metal platform (the child :mod:`ichor.machined.metal` forks as PID 1).

Brings ``lo`` and the links up, applies a static ``ip=`` kernel argument (address, default route)
before any controller runs, picks the node's address (``ip=``'s, else the first global IPv4 address
a link has after a short wait, else ``0.0.0.0``: maintenance mode then listens on every address),
fetches ``talos.config=<url>`` when given (Talos's ``${uuid}``, ``${serial}``, ``${mac}``,
``${hostname}`` substituted; retried with the reason on the console for up to 5 minutes, then
maintenance mode), carries out ``talos.experimental.wipe`` first when given (:mod:`ichor.machined.bootwipe`:
the whole system disk or the labels named, then a reboot as Talos), mounts an installed disk's STATE on
``/system/state`` and EPHEMERAL on ``/var`` (formatted on first mount; ``installation.mount_system_partitions``) and runs
``python -m ichor.machined --root / --platform metal [--config FILE]``.

Addresses set here are the kernel's, not a layer's: the address controllers leave what they did
not add (``controllers/network/apply.py``), so ``get addresses`` shows them and nothing removes
them. (Talos reads ``ip=`` into its ``cmdline`` network layer; Ichor's cmdline layer is still empty.)
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from pathlib import Path

from ichor.machined.kernelargs import IPArg, KernelArgs

__all__ = ["config_url", "fetch_config", "run"]


def config_url(template: str, *, uuid: str, serial: str, mac: str, hostname: str) -> str:
    """``talos.config``'s URL with Talos's variables filled in (``${code}`` is left as is)."""
    for name, value in (("uuid", uuid), ("serial", serial), ("mac", mac), ("hostname", hostname)):
        template = template.replace("${" + name + "}", value)
    return template


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def fetch_config(url: str, target: Path, *, deadline_s: float = 300, sleep: float = 2.0) -> bool:
    """Download ``url`` to ``target``, retrying (and saying why) until ``deadline_s`` passes."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + deadline_s
    attempt = 0
    while True:
        attempt += 1
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                body = reply.read(4 << 20)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body)
            print(f"fetched the machine config from {url} ({len(body)} bytes)")
            return True
        except (urllib.error.URLError, OSError, ValueError) as err:
            reason = getattr(err, "reason", None) or err
            if time.monotonic() > deadline:
                print(
                    f"giving up on talos.config={url} after {attempt} attempts ({reason}); maintenance mode"
                )
                return False
            print(f"fetching the machine config from {url} failed ({reason}); retrying (attempt {attempt})")
            time.sleep(min(sleep * attempt, 15))


async def _first_mac() -> str:
    from ichor.machined.netlink import KernelNetlink

    netlink = KernelNetlink()
    try:
        links = await netlink.links()
    finally:
        await netlink.close()
    return next((link.hardware_addr for _, link in sorted(links.items()) if link.physical), "")


async def _bring_up(ip: IPArg | None, say: object) -> str:
    from ichor.machined.netlink import KernelNetlink
    from ichor.machined.resources import AddressSpecSpec, RouteSpecSpec

    netlink = KernelNetlink()
    try:
        # PID 1's coldplug is loading the NIC drivers meanwhile: wait for the link ip= names (or any).
        deadline = time.monotonic() + 120
        while True:
            links = await netlink.links()
            wanted = ip.device if ip is not None and ip.device else None
            if (wanted in links) if wanted else any(link.physical for link in links.values()):
                break
            if time.monotonic() > deadline:
                print(f"no network link {wanted or ''} after 120 s; going on without it")
                break
            await asyncio.sleep(0.5)
        for name, link in sorted(links.items()):
            if name == "lo" or link.physical:
                await netlink.set_link(name, up=True)
        if ip is not None:
            device = ip.device or next((n for n, link in sorted(links.items()) if link.physical), "")
            if not device:
                print("ip= names no device and the machine has no ethernet link: address not set")
                return ip.ip
            family = "inet6" if ":" in ip.ip else "inet4"
            await netlink.add_address(AddressSpecSpec(address=ip.address, link_name=device, family=family))
            if ip.gateway:
                await netlink.add_route(
                    RouteSpecSpec(family=family, gateway=ip.gateway, out_link_name=device, priority=1024)
                )
            print(
                f"ip= kernel argument: {ip.address} on {device}"
                + (f" via {ip.gateway}" if ip.gateway else "")
            )
            return ip.ip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for address in await netlink.addresses():
                addr = ipaddress.ip_interface(address.address).ip
                if addr.version == 4 and not (addr.is_loopback or addr.is_link_local):
                    return str(addr)
            await asyncio.sleep(0.5)
        return "0.0.0.0"
    finally:
        await netlink.close()


def _wipe_at_boot(
    args: KernelArgs, sys_block: str = "/sys/block", coldplug_done: str = "/run/ichor/coldplug-done",
    wait_s: float = 120.0,
) -> int | None:  # fmt: skip
    """``talos.experimental.wipe`` (:mod:`ichor.machined.bootwipe`) before anything is mounted: the
    exit code when the boot stops here (75: reboot; 1: the wipe failed, fatal as in Talos), else None.
    It waits for PID 1's coldplug first (``coldplug_done``, as the mounts do): the disk's driver may
    not be loaded yet when the network link is."""
    from ichor.machined.bootwipe import KERNEL_ARG, wipe_at_boot
    from ichor.machined.platform import EXIT_REBOOT
    from ichor.machinery.blockdev import find_system_disk
    from ichor.machinery.errors import MachineryError

    value = args.last(KERNEL_ARG)
    if not value:
        return None
    deadline = time.monotonic() + wait_s
    while not Path(coldplug_done).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        wiped = wipe_at_boot(value, find_system_disk(sys_block), print)
    except (MachineryError, OSError) as err:
        print(f"wipeDisks: {err}")
        return 1
    if wiped is not None and wiped.reboot:
        print("rebooting after the system disk wipe")
        return EXIT_REBOOT
    return None


def run(args: KernelArgs) -> int:
    """Bring the network up as the kernel arguments say, then run machined; its exit code."""
    address = asyncio.run(_bring_up(args.ip, print))
    from ichor.machined.installation import mount_system_partitions

    wiped = _wipe_at_boot(args)
    if wiped is not None:
        return wiped
    # An installed machine: STATE (the config) and EPHEMERAL (/var) before machined looks for them.
    mount_system_partitions(print)
    argv = ["--root", "/", "--address", address, "--platform", "metal"]
    if args.config_url and not Path("/system/state/config.yaml").exists():
        url = config_url(
            args.config_url, uuid=_read("/sys/class/dmi/id/product_uuid"),
            serial=_read("/sys/class/dmi/id/product_serial"), mac=asyncio.run(_first_mac()),
            hostname=args.hostname or (args.ip.hostname if args.ip else "") or "",
        )  # fmt: skip
        target = Path("/run/ichor/talos.config.yaml")
        if fetch_config(url, target):
            argv += ["--config", str(target)]
    from ichor.machined.__main__ import main

    return main(argv)
