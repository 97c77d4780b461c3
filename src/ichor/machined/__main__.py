"""``python -m ichor.machined --root DIR --address IP [--config FILE] [--platform P] [--own-netns] [--own-uts]``: run one node.

The process exits with :data:`~ichor.machined.platform.EXIT_REBOOT` when the node reboots (its
launcher starts it again) and :data:`~ichor.machined.platform.EXIT_POWEROFF` when it powers off.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ichor.machined.platform import EXIT_POWEROFF, Layout, Platform


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ichor.machined", description=__doc__)
    parser.add_argument("--root", required=True, type=Path, help="the node's root directory (its disks)")
    parser.add_argument("--address", required=True, help="the node's address (one loopback IP per node)")
    parser.add_argument("--config", type=Path, help="a machine config to boot with when STATE has none")
    parser.add_argument(
        "--own-netns",
        action="store_true",
        help="the node runs in a network namespace of its own: apply machine.network to its links, "
        "addresses and routes (never on a process node, which shares the host's network)",
    )
    parser.add_argument(
        "--own-uts",
        action="store_true",
        help="the node runs in a UTS namespace of its own: set the kernel's hostname from the "
        "machine config (never on a process node, which shares the host's)",
    )
    parser.add_argument(
        "--platform",
        type=Platform,
        choices=list(Platform),
        default=Platform.PROCESS,
        help="where the node runs: process (the host's loopback), container (PID 1 of its own "
        "namespaces, root /, which implies --own-netns and --own-uts) or metal (a machine of its own: "
        "started by /sbin/init, ichor.machined.metal)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)

    # Importing the node's stack makes ~10^5 objects and no garbage worth a collection: the cyclic
    # collector stays off until the node is built, then what exists is frozen out of its scans
    # (13% less CPU to maintenance mode on the host; in a TCG guest, seconds of every boot).
    gc.disable()
    # In an image, the dataclasses' methods come compiled (ichor.machinery.codecache: ~25% of the import's CPU).
    from ichor.machinery import codecache

    codecache.install()
    from ichor.machined.exitdeadline import SHUTDOWN_LIMIT
    from ichor.machined.h2writes import coalesce_h2_writes
    from ichor.machined.memory import bound_h2_closed_streams, start_tracemalloc_from_env
    from ichor.machined.node import Node

    start_tracemalloc_from_env(args.root.resolve())
    bound_h2_closed_streams()
    coalesce_h2_writes()

    # The node serves I/O on its event loop while worker threads do CPU work (loading a config):
    # with CPython's default 5 ms GIL switch interval every hand-off back to the loop can cost 5 ms,
    # and a proxied call needs dozens of them (measured: p99 190 ms at 5 ms, 12 ms at 1 ms).
    sys.setswitchinterval(0.001)

    node = Node(
        Layout(
            root=args.root.resolve(),
            address=args.address,
            platform=args.platform,
            own_netns=args.own_netns or args.platform.owns_kernel,
            own_uts=args.own_uts or args.platform.owns_kernel,
            block_devices=Path("/sys/block") if args.platform is Platform.METAL else None,
            kernel_log=Path("/dev/kmsg") if args.platform is Platform.METAL else None,
            mount_table=Path("/proc/self/mounts") if args.platform is Platform.METAL else None,
        ),
        config_source=args.config,
        exit_limit=SHUTDOWN_LIMIT,
    )

    gc.freeze()
    gc.enable()

    async def run() -> int:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        loop.set_default_executor(_UnjoinedExecutor(thread_name_prefix="machined"))
        # SIGTERM from the launcher is a power-off: stop services and exit cleanly.
        loop.add_signal_handler(signal.SIGTERM, lambda: node.finish(EXIT_POWEROFF))
        loop.add_signal_handler(signal.SIGINT, lambda: node.finish(EXIT_POWEROFF))
        return await node.run()

    code = asyncio.run(run())
    logging.getLogger("ichor.machined").info(
        "event loop closed %.1f s after the node stopped", time.monotonic() - node.stopped_at
    )
    return code


class _UnjoinedExecutor(ThreadPoolExecutor):
    """The event loop's default executor, whose shutdown does not wait for a thread still blocked in
    a call (a read of a device that never answers): when the node has stopped nothing waits for
    their results, and ``asyncio.run`` would otherwise hold the reboot until the call returns."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=True)


if __name__ == "__main__":
    sys.exit(main())
