"""``talosctl edit <type> [<id>]``: edit the machine config of each node in ``$EDITOR`` and apply it on save.

As talosctl 1.7: the config is read from the node (resource ``MachineConfigs.config.talos.dev``, the
only type that can be edited) and written to a temporary file under a header comment
``# Editing <type>/<id> at node <node>``; the editor is ``$TALOS_EDITOR``, then ``$EDITOR``, then
``vi``. On exit, leading ``# `` comment lines are dropped; an empty file ("Apply was skipped: empty
file.") or an unchanged one ("Apply was skipped: no changes detected.") applies nothing. Otherwise
the text goes to ``ApplyConfiguration`` with ``--mode``/``--dry-run``/``--timeout``.

When the node rejects the config, the editor opens again on the user's edited text with the error
as comment lines under the header, as talosctl does. Beyond talosctl, saving that same rejected text
again ends the loop instead of sending it again: the command exits 1 with the node's error and
keeps the edited file, naming its path and the ``apply-config`` command to retry it with.

``--immediate`` (the seeds' recovery step: ``edit mc --immediate``) and ``--on-reboot`` are the
spellings of talosctl before 0.14, accepted for ``--mode=no-reboot`` and ``--mode=staged``.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from pathlib import Path
from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import parse_duration, run

EDITABLE_TYPE = "MachineConfigs.config.talos.dev"
ACTIVE_CONFIG_ID = "v1alpha1"
EDITOR_VARIABLES = ("TALOS_EDITOR", "EDITOR")
DEFAULT_EDITOR = "vi"
MODES = {"auto": 1, "no-reboot": 2, "reboot": 0, "staged": 3, "try": 4}

EMPTY = "Apply was skipped: empty file."
UNCHANGED = "Apply was skipped: no changes detected."


def editor_command(path: str, environ: dict[str, str] | None = None) -> list[str]:
    """The command that edits ``path``: kubectl's rules for an editor variable that holds arguments.

    A plain word or words run as they are; a value with quotes or backslashes runs through ``sh -c``
    (so ``EDITOR='code --wait'`` and ``EDITOR="sed -i 's/a/b/'"`` both work).
    """
    env = os.environ if environ is None else environ
    value = next((env[v].strip() for v in EDITOR_VARIABLES if env.get(v, "").strip()), DEFAULT_EDITOR)
    if not re.search(r"[\"'\\]", value):
        return [*value.split(), path]
    return ["sh", "-c", f'{value} "$1"', "sh", path]


def strip_editing_comment(text: str) -> str:
    """The text after the leading ``# `` lines (the header and the error that talosctl writes)."""
    lines = text.splitlines(keepends=True)
    while lines and (lines[0].startswith("# ") or lines[0].rstrip("\r\n") == "#"):
        lines.pop(0)
    return "".join(lines)


def has_content(text: str) -> bool:
    """Whether anything but blank and comment lines is left."""
    return any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines())


def header(resource_type: str, resource_id: str, node: str, error: str | None) -> str:
    out = f"# Editing {resource_type}/{resource_id} at node {node}\n"
    if error:
        out += "# \n" + "".join(f"# {line}\n" for line in error.splitlines())
    return out


def editable(
    resources: list[Any], resource_id: str | None, node: str, namespace: str, command: str = "edit"
) -> list[Any]:
    """The config documents to edit: the node's active config (``v1alpha1``).

    A node that went through maintenance mode also keeps the partial config it got there
    (``MachineConfigs/maintenance``); applying that as the node's config would replace the real one,
    so it is never offered, with or without an id.
    """
    wanted = resource_id or ACTIVE_CONFIG_ID
    if wanted != ACTIVE_CONFIG_ID:
        raise click.ClickException(
            f"{node}: only the machine config {EDITABLE_TYPE}({namespace}/{ACTIVE_CONFIG_ID}) can be edited, "
            f"not {wanted!r}; run `talosctl {command} mc`"
        )
    found = [r for r in resources if r.metadata.id == ACTIVE_CONFIG_ID]
    if not found:
        raise click.ClickException(
            f"{node}: resource {EDITABLE_TYPE}({namespace}/{ACTIVE_CONFIG_ID}) doesn't exist: the node has no "
            "machine config yet; give it one with `talosctl apply-config --insecure`"
        )
    return found


class EditSession:
    """One resource on one node: the file the editor works on, the last edit and the node's error."""

    def __init__(self, node: str, resource_id: str, original: str) -> None:
        self.node = node
        self.resource_id = resource_id
        self.original = original
        self.edited = original
        self.error: str | None = None
        self.rejected: str | None = None
        # mkstemp: a fresh 0600 file (the machine config holds the cluster's keys) in the temp dir
        fd, name = tempfile.mkstemp(prefix=f"{EDITABLE_TYPE}-{resource_id}-edit-", suffix=".yaml")
        os.close(fd)
        self.path = Path(name)

    def open_editor(self) -> str:
        """Write the file, run the editor, return what was saved (editing comment stripped)."""
        from ichor.machinery import proc

        self.path.write_text(header(EDITABLE_TYPE, self.resource_id, self.node, self.error) + self.edited)
        command = editor_command(str(self.path))
        code = proc.run_in_terminal(
            command, hint="set TALOS_EDITOR or EDITOR to an editor installed here (e.g. EDITOR=nano)"
        )
        if code != 0:
            raise click.ClickException(
                f"the editor ({shlex.join(command[:-1])}) exited with status {code}; nothing was applied "
                f"and the file is kept: {self.path}"
            )
        return strip_editing_comment(self.path.read_text(errors="replace"))

    def reject(self, edited: str, error: str) -> None:
        self.error, self.rejected, self.edited = error, edited, edited

    def done(self, message: str | None = None) -> bool:
        self.path.unlink(missing_ok=True)
        if message:
            click.echo(message)
        return True


async def _edit_one(client: Any, node: str, resource: Any, flags: dict[str, Any]) -> bool:
    """Edit one resource until it applies or the user gives up; False when the node's error stands."""
    from ichor.client import AllNodesFailedError, RPCError

    session = EditSession(node, resource.metadata.id, resource.spec.yaml_spec)
    while True:
        edited = session.open_editor()
        if not has_content(edited):
            return session.done(EMPTY)
        if edited == session.original:
            return session.done(UNCHANGED)
        if edited == session.rejected:
            # Saved again as the node refused it: stop here, keep the work and say how to go on.
            session.path.write_text(edited)
            click.echo(f"error: {node}: {session.error}", err=True)
            click.echo(
                f"hint: your edit is kept in {session.path}; fix it and apply it with "
                f"`talosctl -n {node} apply-config -f {session.path}`, or run `talosctl edit mc` again",
                err=True,
            )
            return False
        try:
            replies = await apply_config(client, node, edited, flags)
        except AllNodesFailedError as exc:
            session.reject(edited, "; ".join(map(str, exc.errors)))
            continue
        except RPCError as exc:
            session.reject(edited, str(exc))
            continue
        print_apply_results(node, replies)
        return session.done()


async def apply_config(client: Any, node: str, text: str, flags: dict[str, Any]) -> Any:
    """Send ``text`` to ``node`` with ApplyConfiguration in the mode of ``flags``; the node's replies."""
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import node_replies

    request = machine_pb2.ApplyConfigurationRequest(
        data=text.encode(), mode=flags["mode"], dry_run=flags["dry_run"]
    )
    request.try_mode_timeout.FromTimedelta(flags["timeout"])
    response = await client.with_nodes(node).machine.ApplyConfiguration(request)
    return node_replies(response, fallback_node=node).check("error applying new configuration")


def print_apply_results(node: str, replies: Any) -> None:
    """The node's warnings (to stderr) and what it did with the config ("Applied configuration ...")."""
    for _, message in replies:
        for warning in message.warnings:
            click.echo(f"{node}: warning: {warning}", err=True)
        if message.mode_details:
            click.echo(message.mode_details)


async def machine_config_type(bound: Any, resource_type: str, command: str) -> Any:
    """The resource definition ``resource_type`` names on the node; only the machine config qualifies."""
    from ichor.cli._get import RD_TYPE, _match

    spec = _match(await bound.list_resources("meta", RD_TYPE), resource_type)
    if spec.resource_type != EDITABLE_TYPE:
        raise click.ClickException(
            f"only the machineconfig resource can be edited (not {spec.resource_type}); "
            f"run `talosctl {command} mc`"
        )
    return spec


@click.command(
    "edit",
    cls=CobraCommand,
    short_help="Edit a resource from the default editor.",
    help="Edit a resource from the default editor.\n\nThe edit command allows you to directly edit any API "
    "resource you can retrieve via the command line tools.\n\nIt will open the editor defined by your "
    "TALOS_EDITOR, or EDITOR environment variables, or fall back to 'vi' for Linux.\n\nOnly the machine "
    "config (`machineconfig`, `mc`) can be edited.",
)
@click.argument("resource_type", metavar="<type>")
@click.argument("resource_id", metavar="[<id>]", required=False)
@click.option(
    "--namespace", default="", help="resource namespace (default is to use default namespace per resource)"
)
@click.option("-m", "--mode", type=click.Choice(list(MODES)), default="auto", show_default=True,
              help="apply config mode")  # fmt: skip
@click.option("--dry-run/--no-dry-run", default=False,
              help="do not apply the change after editing and print the change summary instead")  # fmt: skip
@click.option("--timeout", default="1m", show_default=True,
              help="the config will be rolled back after specified timeout (if try mode is selected)")  # fmt: skip
@click.option("--immediate", is_flag=True, help="old spelling of --mode=no-reboot")
@click.option("--on-reboot", is_flag=True, help="old spelling of --mode=staged")
def edit(resource_type: str, resource_id: str | None, namespace: str, mode: str, dry_run: bool, timeout: str,
         immediate: bool, on_reboot: bool) -> None:  # fmt: skip
    ctx = click.get_current_context()
    explicit_mode = ctx.get_parameter_source("mode") != click.core.ParameterSource.DEFAULT
    if immediate and on_reboot:
        raise click.UsageError("--immediate and --on-reboot contradict each other; pass one --mode")
    if (immediate or on_reboot) and explicit_mode:
        raise click.UsageError(f"--{'immediate' if immediate else 'on-reboot'} is the old spelling of --mode; "
                               "pass only one of them")  # fmt: skip
    if immediate:
        mode = "no-reboot"
    elif on_reboot:
        mode = "staged"
    flags = {"mode": MODES[mode], "dry_run": dry_run, "timeout": parse_duration(timeout, flag="--timeout")}

    async def work(client: Any) -> int:
        failed = 0
        for node in client.require_nodes():
            bound = client.with_node(node)
            spec = await machine_config_type(bound, resource_type, "edit")
            ns = namespace or spec.default_namespace
            for resource in editable(
                await bound.list_resources(ns, spec.resource_type), resource_id, node, ns
            ):
                failed += not await _edit_one(client, node, resource, flags)
        return failed

    if run(work):
        raise click.exceptions.Exit(1)
