"""``talosctl machineconfig`` (alias ``mc``): machine config commands that need no node.

``patch <file> -p @patch [-p ...] [-o out]`` applies patches the way Talos does: the result goes to
stdout, or with ``-o`` to a file (created with mode 0600, replaced atomically). Any error -- an
unreadable or invalid input file, a bad patch, a patch for a missing document -- stops before
anything is written.
"""

from __future__ import annotations

from pathlib import Path

import click

from ichor.cli._lazy import LazyGroup


@click.group(
    cls=LazyGroup,
    help="Machine config related commands",
    context_settings={"help_option_names": ["-h", "--help"]},
)
def machineconfig() -> None:
    pass


assert isinstance(machineconfig, LazyGroup)
# Talos's `machineconfig gen` is `gen config` under another name
machineconfig.add_lazy(
    "gen",
    "ichor.cli._gen_config:machineconfig_gen",
    "Generates a set of configuration files for Talos cluster",
)


@machineconfig.command("patch", help="Patch a machine config")
@click.argument("machineconfig_file", metavar="<machineconfig-file>", type=click.Path(dir_okay=True))
@click.option(
    "-p",
    "--patch",
    "patches",
    multiple=True,
    help="patch generated machineconfigs (applied to all node types), use @file to read a patch from file",
)
@click.option(
    "-o",
    "--output",
    default="",
    help="output destination. if not specified, output will be printed to stdout",
)
def patch_command(machineconfig_file: str, patches: tuple[str, ...], output: str) -> None:
    from ichor.machinery.files import write_atomic
    from ichor.machinery.patch import apply_patches, load_patches
    from ichor.machinery.yamlio import dump_documents

    docs = _read_config(Path(machineconfig_file))
    loaded = load_patches(list(patches), flag="--patch")
    patched = apply_patches(docs, loaded)
    data = dump_documents(patched)
    if not output:
        # Talos prints the config followed by one more newline.
        click.echo(data)
        return
    write_atomic(output, data, mode=0o600, force=True)


def _read_config(path: Path) -> list[object]:
    from collections.abc import Mapping

    from ichor.machinery.errors import ConfigError, YAMLError
    from ichor.machinery.yamlio import load_documents

    hint = "give 'talosctl machineconfig patch' the path of a machine config file"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"machine config file {str(path)!r} does not exist", hint=hint) from None
    except IsADirectoryError:
        raise ConfigError(f"machine config file {str(path)!r} is a directory", hint=hint) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read machine config file {str(path)!r}: {exc.strerror}", hint=hint
        ) from None
    try:
        docs = load_documents(data, source=str(path))
    except YAMLError as exc:
        raise YAMLError(
            str(exc), hint=exc.hint or "fix the machine config file, or give the right file"
        ) from None
    if not docs:
        raise ConfigError(f"machine config file {str(path)!r} has no documents", hint=hint)
    for index, doc in enumerate(docs, start=1):
        if not isinstance(doc, Mapping):
            raise ConfigError(
                f"{path}: document {index} is not a config document (a mapping of keys)",
                hint="a machine config is YAML documents like the ones 'talosctl gen config' writes",
            )
    return docs
