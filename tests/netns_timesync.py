"""Run a node's time-server and time-sync controllers in the current network namespace, for the chrony test.

``python netns_timesync.py SERVER``: applies a config with ``machine.time.servers: [SERVER]``, waits
until TimeStatus ``node`` is synced, prints ``synced <offset>`` and exits 0; exits 1 with the wait's
reason after 30 s.
"""

from __future__ import annotations

import asyncio
import sys

from controller_helpers import apply, running

from ichor.machined.controllers import network
from ichor.machined.controllers.timesync import TimeSyncController
from ichor.machined.cosi import WAIT_STATUSES
from ichor.machined.resources import TIME_STATUSES


async def main(server: str) -> int:
    async with running(*network.time_server_controllers(), TimeSyncController()) as state:
        apply(
            state,
            f"version: v1alpha1\nmachine:\n  type: worker\n  time:\n    servers: [{server}]\ncluster: {{}}\n",
        )
        for _ in range(300):
            status = state.list("runtime", TIME_STATUSES)
            if status and status[0].spec.synced and not status[0].spec.sync_disabled:
                print("synced", flush=True)
                return 0
            await asyncio.sleep(0.1)
        print("timeout:", [w.spec for w in state.list("runtime", WAIT_STATUSES)], flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
