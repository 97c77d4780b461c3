"""Run a node's network controllers in the current network namespace, for the netns integration test.

``python netns_node.py ADDRESS CONFIG=ID...``: registers :func:`network_controllers` for a node that owns
its namespace (``Layout.own_netns``), over the real kernel. For each CONFIG file in turn it applies
the config, waits until the AddressStatus ID is there (the config has been merged), every merged
AddressSpec and RouteSpec is in the kernel's statuses and every spec the previous config had but
this one lacks is gone, prints ``applied <n>``, and reads a
line from stdin before going on. Exits 1 naming what it waited for if that takes over 30 s.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from controller_helpers import apply, running

from ichor.machined.controllers import network
from ichor.machined.cosi import State
from ichor.machined.platform import Layout
from ichor.machined.resources import ADDRESS_SPECS, ADDRESS_STATUSES, ROUTE_SPECS, ROUTE_STATUSES


def _settled(state: State, previous: set[str], expected: str) -> tuple[bool, str]:
    wanted = {r.id for r in state.list("network", ADDRESS_SPECS)} | {
        r.id for r in state.list("network", ROUTE_SPECS)
    }
    have = {r.id for r in state.list("network", ADDRESS_STATUSES)} | {
        r.id for r in state.list("network", ROUTE_STATUSES)
    }
    missing, stale = wanted - have, (previous - wanted) & have
    return (
        expected in have and not missing and not stale
    ), f"{expected}, missing {sorted(missing)}, stale {sorted(stale)}"


async def main(address: str, configs: list[tuple[Path, str]]) -> int:
    with tempfile.TemporaryDirectory() as root:
        layout = Layout(root=Path(root), address=address, own_netns=True)
        async with running(*network.network_controllers(layout)) as state:
            previous: set[str] = set()
            for n, (config, expected) in enumerate(configs, 1):
                apply(state, config.read_text())
                why = ""
                for _ in range(300):
                    done, why = _settled(state, previous, expected)
                    if done:
                        break
                    await asyncio.sleep(0.1)
                else:
                    print(f"timeout applying config {n}: {why}", flush=True)
                    return 1
                previous = {r.id for r in state.list("network", ADDRESS_SPECS)} | {
                    r.id for r in state.list("network", ROUTE_SPECS)
                }
                print(f"applied {n}", flush=True)
                await asyncio.to_thread(sys.stdin.readline)
    return 0


if __name__ == "__main__":
    pairs = [arg.partition("=") for arg in sys.argv[2:]]
    sys.exit(asyncio.run(main(sys.argv[1], [(Path(path), id) for path, _, id in pairs])))
