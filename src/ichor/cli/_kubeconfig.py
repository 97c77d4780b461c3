"""``talosctl kubeconfig [local-path]``: fetch the admin kubeconfig from a control plane node.

Where it goes (talosctl's rules): no path + ``--merge`` (default) -> merged into ``~/.kube/config``
(``$KUBECONFIG``'s first entry when set); no path + ``--merge=false`` -> ``./kubeconfig``; a
directory -> ``<dir>/kubeconfig``; ``-`` -> stdout. An existing file is merged (renaming
conflicting entries, or overwriting them with ``--force``) or, with ``--merge=false``, replaced only
with ``--force``. Nothing is written until the node's kubeconfig has arrived and the merge succeeded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import run
from ichor.client.health_k8s import fetch_kubeconfig

HELP = """Download the admin kubeconfig from the node.

If merge flag is defined, config will be merged with ~/.kube/config or [local-path] if specified.
Otherwise kubeconfig will be written to PWD or [local-path] if specified."""


def default_kubeconfig_path() -> Path:
    """``$KUBECONFIG``'s first entry if set, else ``~/.kube/config`` (client-go's recommended file)."""
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), "")
    return Path(first) if first else Path.home() / ".kube" / "config"


async def kubelet_running(client: Any) -> bool | None:
    """Whether the node runs a kubelet (the API server is a static pod it starts); None when the node
    cannot say (an older or restricted node)."""
    from google.protobuf import empty_pb2

    from ichor.client import ClientError, node_replies

    try:
        reply = await client.machine.ServiceList(empty_pb2.Empty())
    except ClientError:
        return None
    answered = node_replies(reply, fallback_node=client.peer_host)
    if not answered.replies:
        return None
    return any(s.id == "kubelet" and s.state == "Running" for _, m in answered for s in m.services)


def _note_nothing_serves(node: str, data: bytes) -> None:
    from ichor.machinery.errors import MachineryError
    from ichor.machinery.kubeconfig import kubeconfig_servers

    try:
        servers = kubeconfig_servers(data.decode("utf-8", errors="replace"))
    except MachineryError:
        servers = []
    where = " and ".join(servers) or "the server address in it"
    click.echo(
        f"note: Kubernetes is not running on {node} (no kubelet service): nothing serves the Kubernetes API at"
        f" {where} yet, so kubectl cannot connect with this kubeconfig until it does"
        " (`talosctl -n <node> services` shows what runs)",
        err=True,
    )


@click.command("kubeconfig", cls=CobraCommand, help=HELP)
@click.argument("local_path", metavar="[local-path]", required=False)
@click.option(
    "-f",
    "--force",
    is_flag=True,
    default=False,
    help="Force overwrite of kubeconfig if already present, force overwrite on kubeconfig merge",
)
@click.option("--force-context-name", default="", help="Force context name for kubeconfig merge")
@click.option("-m", "--merge/--no-merge", default=True, help="Merge with existing kubeconfig")
def kubeconfig(local_path: str | None, force: bool, force_context_name: str, merge: bool) -> None:
    from ichor.machinery.errors import MachineryError, OutputExistsError
    from ichor.machinery.files import write_atomic
    from ichor.machinery.kubeconfig import merge_kubeconfig

    to_stdout = local_path == "-"
    target: Path | None = None
    if not to_stdout:
        target = Path(local_path) if local_path else default_kubeconfig_path() if merge else Path.cwd()
        if target.is_dir():
            target = target / "kubeconfig"
        if target.exists() and not (force or merge):
            raise OutputExistsError(
                f"kubeconfig file already exists, use --force to overwrite: {str(target)!r}",
                hint="pass --force to replace it, or --merge (the default) to merge into it",
            )
        if target.exists() and target.is_dir():
            raise MachineryError(
                f"{str(target)!r} is a directory", hint="give a file path for the kubeconfig"
            )

    async def work(client: Any) -> bytes:
        node = client.require_single_node("kubeconfig")
        data = await fetch_kubeconfig(client)
        if await kubelet_running(client) is False:
            _note_nothing_serves(node, data)
        return data

    data = run(work)
    if to_stdout:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    assert target is not None
    if merge and target.exists():
        try:
            existing = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise MachineryError(
                f"error loading kubeconfig {str(target)!r}: {exc}",
                hint="fix or move the file away, or write to another file with `talosctl kubeconfig <path>`",
            ) from None
        result = merge_kubeconfig(
            existing, data, force=force, force_context_name=force_context_name or None, source=str(target)
        )
        for line in result.renamed:
            click.echo(line)
        mode = target.stat().st_mode & 0o777
        write_atomic(target, result.text, mode=mode)
        return
    if force_context_name:
        # Talos applies the forced name only when merging; a fresh file gets it too, so the name the
        # user asked for is the one they find (merging into nothing is the same as writing).
        data = merge_kubeconfig(
            "", data, force_context_name=force_context_name, source=str(target)
        ).text.encode()
    write_atomic(target, data, mode=0o600)
