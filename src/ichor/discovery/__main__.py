"""``python -m ichor.discovery serve --listen HOST:PORT``: a discovery service until SIGTERM/SIGINT.

Prints ``discovery service listening on HOST:PORT`` once it accepts connections (a launcher may
wait for that line; with port 0 it names the port picked). Plain gRPC, no TLS: nodes reach it
with an ``http://`` endpoint, which Talos treats as insecure.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from ichor.discovery._client import parse_endpoint
from ichor.discovery._errors import DiscoveryConfigError
from ichor.discovery._server import DiscoveryServer


async def _serve(host: str, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = DiscoveryServer()
    await server.start(host, port)
    try:
        print(f"discovery service listening on {server.endpoint}", flush=True)
        await stop.wait()
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ichor.discovery", description="Ichor discovery service")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a discovery service until SIGTERM")
    serve.add_argument(
        "--listen", default="127.0.0.1:3000", help="HOST:PORT to listen on (default %(default)s)"
    )
    serve.add_argument("--debug", action="store_true", help="log every expiry and client error")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, stream=sys.stderr)
    try:
        host, port = parse_endpoint(args.listen) if not args.listen.endswith(":0") else (args.listen[:-2], 0)
    except DiscoveryConfigError as exc:
        print(f"error: --listen: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(host.strip("[]"), port))
    except OSError as exc:
        print(f"error: cannot listen on {args.listen}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
