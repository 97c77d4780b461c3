"""``talosctl patch <type> [<id>]``: patch the machine config of each node and apply the result.

As talosctl 1.7: the patches (``-p``/``--patch``, repeatable, ``@file`` or inline; ``--patch-file``
last) are strategic merge or RFC 6902 JSON patches, loaded and applied by the same engine as
``talosctl machineconfig patch``. For each node in turn the active machine config
(``MachineConfigs.config.talos.dev/v1alpha1``, the only patchable type) is read, patched, and sent
back with ``ApplyConfiguration`` in ``--mode`` (``--dry-run`` asks the node for the change summary and
diff instead, ``--timeout`` is try mode's rollback time). A patch that changes nothing is not sent
("Apply was skipped: no changes detected."); an applied one prints ``patched <type>/<id> at the
node <node>`` and what the node did.

Every patch is read and parsed before any node is contacted. A patch that does not fit a node's
config, or a result the node refuses, is that node's error: the other nodes are still patched, and
the command exits 1 naming each failed node. The node validates the config, so a refused patch
leaves its config as it was.
"""

from __future__ import annotations

from typing import Any

import click

from ichor.cli._edit import (
    MODES,
    UNCHANGED,
    apply_config,
    editable,
    machine_config_type,
    print_apply_results,
)
from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import parse_duration, run


def patched_config(original: str, patches: list[Any]) -> str:
    """``original`` (the node's YAML) with ``patches`` applied; raises the engine's ``PatchError``."""
    from ichor.machinery.patch import apply_patches
    from ichor.machinery.yamlio import dump_documents, load_documents

    return dump_documents(
        apply_patches(load_documents(original, source="the node's machine config"), patches)
    )


async def _patch_one(
    client: Any, node: str, resource: Any, patches: list[Any], flags: dict[str, Any]
) -> None:
    original = resource.spec.yaml_spec
    text = patched_config(original, patches)
    if text.strip() == original.strip():
        click.echo(UNCHANGED)
        return
    replies = await apply_config(client, node, text, flags)
    click.echo(f"patched {resource.metadata.type}/{resource.metadata.id} at the node {node}")
    print_apply_results(node, replies)


def _node_error(node: str, exc: Exception, hint: str) -> None:
    from ichor.client import AllNodesFailedError

    reason = "; ".join(map(str, exc.errors)) if isinstance(exc, AllNodesFailedError) else str(exc)
    # The node's replies already start with its name.
    where = "" if reason.startswith(f"{node}:") else f"{node}: "
    click.echo(f"error: {where}{reason}", err=True)
    click.echo(f"hint: {hint}", err=True)


async def _patch_node(
    client: Any, node: str, selector: tuple[str, str | None, str], patches: list[Any], flags: dict[str, Any]
) -> bool:
    """Patch the machine config of one node; False (after saying why) when that node failed."""
    from ichor.client import AllNodesFailedError, RPCError
    from ichor.machinery.errors import PatchError

    resource_type, resource_id, namespace = selector
    bound = client.with_node(node)
    try:
        spec = await machine_config_type(bound, resource_type, "patch")
        ns = namespace or spec.default_namespace
        resources = await bound.list_resources(ns, spec.resource_type)
    except (AllNodesFailedError, RPCError) as exc:
        _node_error(node, exc, f"cannot read the machine config of {node}: check it is up (`talosctl -n {node} version`) "
                    "and that -n names it")  # fmt: skip
        return False
    ok = True
    for resource in editable(resources, resource_id, node, ns, command="patch"):
        try:
            await _patch_one(client, node, resource, patches, flags)
        except PatchError as exc:
            ok = False
            _node_error(node, exc, exc.hint or "fix the patch given to --patch/--patch-file")
        except (AllNodesFailedError, RPCError) as exc:
            ok = False
            _node_error(node, exc, "the node refused the patched config and kept its own; fix the patch given "
                        f"to --patch/--patch-file (`talosctl -n {node} patch mc --dry-run` shows the change)")  # fmt: skip
    return ok


@click.command(
    "patch",
    cls=CobraCommand,
    short_help="Update field(s) of a resource using a JSON patch.",
    help="Update field(s) of a resource using a JSON patch.\n\nOnly the machine config (`machineconfig`, `mc`) "
    "can be patched; a patch is a strategic merge patch or an RFC 6902 JSON patch, as in "
    "`talosctl machineconfig patch`.",
)
@click.argument("resource_type", metavar="<type>")
@click.argument("resource_id", metavar="[<id>]", required=False)
@click.option("--dry-run", is_flag=True, default=False,
              help="print the change summary and patch preview without applying the changes")  # fmt: skip
@click.option("-m", "--mode", type=click.Choice(list(MODES)), default="auto", show_default=True,
              help="apply config mode")  # fmt: skip
@click.option(
    "--namespace", default="", help="resource namespace (default is to use default namespace per resource)"
)
@click.option("-p", "--patch", "patches", multiple=True,
              help="the patch to be applied to the resource file, use @file to read a patch from file.")  # fmt: skip
@click.option("--patch-file", default="", help="a file containing a patch to be applied to the resource.")
@click.option("--timeout", default="1m", show_default=True,
              help="the config will be rolled back after specified timeout (if try mode is selected)")  # fmt: skip
def patch(resource_type: str, resource_id: str | None, dry_run: bool, mode: str, namespace: str,
          patches: tuple[str, ...], patch_file: str, timeout: str) -> None:  # fmt: skip
    from ichor.machinery.patch import load_patches

    if not patches and not patch_file:
        raise click.UsageError("either --patch or --patch-file should be defined")
    flags = {"mode": MODES[mode], "dry_run": dry_run, "timeout": parse_duration(timeout, flag="--timeout")}
    loaded = load_patches(list(patches), flag="--patch")
    if patch_file:
        loaded += load_patches([f"@{patch_file}"], flag="--patch-file")

    selector = (resource_type, resource_id, namespace)

    async def work(client: Any) -> int:
        failed = 0
        for node in client.require_nodes():
            failed += not await _patch_node(client, node, selector, loaded, flags)
        return failed

    if run(work):
        raise click.exceptions.Exit(1)
