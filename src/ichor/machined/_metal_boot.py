"""machined's start on the metal platform (the child :mod:`ichor.machined.metal` forks as PID 1).

Brings ``lo`` and the links up, applies a static ``ip=`` kernel argument (address, default route)
before any controller runs, picks the node's address (``ip=``'s, else the first global IPv4 address
a link has after a short wait, else ``0.0.0.0``: maintenance mode then listens on every address)
and runs ``python -m ichor.machined --root / --platform metal``.

Addresses set here are the kernel's, not a layer's: the address controllers leave what they did
not add (``controllers/network/apply.py``), so ``get addresses`` shows them and nothing removes
them. (Talos reads ``ip=`` into its ``cmdline`` network layer; Ichor's cmdline layer is still empty.)
"""

from __future__ import annotations

import asyncio
import ipaddress
import time

from ichor.machined.kernelargs import IPArg, KernelArgs

__all__ = ["run"]


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


def run(args: KernelArgs) -> int:
    """Bring the network up as the kernel arguments say, then run machined; its exit code."""
    address = asyncio.run(_bring_up(args.ip, print))
    from ichor.machined.__main__ import main

    argv = ["--root", "/", "--address", address, "--platform", "metal"]
    return main(argv)
