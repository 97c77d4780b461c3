"""``talosctl inject serviceaccount`` (alias ``tsa``): a Talos API service account injected into
Kubernetes manifests, offline (:mod:`ichor.machinery.inject`)."""

from __future__ import annotations

import sys

import click

from ichor.cli._lazy import LazyGroup


@click.group(cls=LazyGroup, help="Inject Talos API resources into Kubernetes manifests")
def inject() -> None:
    pass


@inject.command(
    "serviceaccount",
    help="Inject Talos API ServiceAccount into Kubernetes manifests",
    epilog="""\b
Examples:
  talosctl inject serviceaccount --roles="os:admin" -f deployment.yaml > deployment-injected.yaml

\b
Alternatively, stdin can be piped to the command:
  cat deployment.yaml | talosctl inject serviceaccount --roles="os:admin" -f - > deployment-injected.yaml""",
)
@click.option(
    "-f",
    "--file",
    "file_",
    default="",
    help="file with Kubernetes manifests to be injected with ServiceAccount",
)
@click.option("-r", "--roles", multiple=True, default=("os:reader",), show_default=True,
              help="roles to add to the generated ServiceAccount manifests")  # fmt: skip
@click.pass_context
def serviceaccount(ctx: click.Context, file_: str, roles: tuple[str, ...]) -> None:
    from ichor.machinery.errors import MachineryError
    from ichor.machinery.inject import inject_service_account

    if not file_:
        click.echo(ctx.get_help())
        return
    if file_ == "-":
        text, source = sys.stdin.read(), "<stdin>"
    else:
        try:
            with open(file_, "rb") as handle:
                text, source = handle.read().decode("utf-8", "replace"), file_
        except OSError as exc:
            raise MachineryError(f"open {file_}: {(exc.strerror or str(exc)).lower()}") from None
    wanted = [role.strip() for value in roles for role in value.split(",") if role.strip()]
    click.echo(inject_service_account(text, wanted, source=source))


assert isinstance(inject, LazyGroup)
inject.add_alias("tsa", "serviceaccount")
