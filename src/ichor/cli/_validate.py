"""``talosctl validate --config F --mode M [--strict]``: check a machine config file offline.

Loads the file with Talos's decoding rules, applies the validation rules for the mode and prints
``<file> is valid for <mode> mode``; warnings go to stderr as ``WARNING: ...``. Any problem is raised
to the error edge (exit 1) with every finding listed.
"""

from __future__ import annotations

import click

_MODES = ("metal", "cloud", "container")


@click.command(help="Validate config")
@click.option(
    "-c", "--config", "config_path", required=True, metavar="PATH", help="the path of the config file"
)
@click.option(
    "-m",
    "--mode",
    required=True,
    type=click.Choice(_MODES),
    help="the mode to validate the config for (valid values are metal, cloud, and container)",
)
@click.option("--strict", is_flag=True, help="treat validation warnings as errors")
def validate(config_path: str, mode: str, strict: bool) -> None:
    from ichor.machinery.config import load_config_file, validate_or_raise

    container = load_config_file(config_path)
    warnings = validate_or_raise(container, mode, strict=strict)
    for warning in warnings:
        click.echo(f"WARNING: {warning}", err=True)
    click.echo(f"{config_path} is valid for {mode} mode")
