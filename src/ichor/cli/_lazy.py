"""A click group whose sub-commands are imported only when they are run or listed in help."""

from __future__ import annotations

import importlib
from typing import Any

import click


class LazyGroup(click.Group):
    """Sub-commands given as ``name -> "module:attribute"`` and a one-line help each."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = dict(lazy or {})
        self._aliases: dict[str, str] = {}
        self._hidden: set[str] = set()

    def add_lazy(
        self, name: str, target: str, short_help: str, aliases: tuple[str, ...] = (), *, hidden: bool = False
    ) -> None:
        self._lazy[name] = (target, short_help)
        for alias in aliases:
            self._aliases[alias] = name
        if hidden:
            self._hidden.add(name)

    def add_alias(self, alias: str, name: str) -> None:
        """``alias`` runs the sub-command ``name`` (``image ls`` is ``image list``)."""
        self._aliases[alias] = name

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Talos (cobra): a group run without a sub-command prints its help and succeeds.
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            click.echo(ctx.get_help())
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        # hidden commands still run (get_command) but are neither listed in help nor completed
        return sorted({*super().list_commands(ctx), *self._lazy} - self._hidden)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd_name = self._aliases.get(cmd_name, cmd_name)
        if cmd_name in self._lazy:
            target, _ = self._lazy[cmd_name]
            module_name, attr = target.split(":")
            command = getattr(importlib.import_module(module_name), attr)
            assert isinstance(command, click.Command)
            return command
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        return (command.name if command is not None else name), command, rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Help lists lazy commands from their one-line text without importing them.
        rows = []
        for name in self.list_commands(ctx):
            if name in self._lazy:
                rows.append((name, self._lazy[name][1]))
            else:
                command = super().get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class CobraCommand(click.Command):
    """A command whose boolean flags also accept Talos's (cobra's) ``--flag=true|false`` spelling."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, rewrite_bool_flags(self.params, args))


def rewrite_bool_flags(params: list[click.Parameter], args: list[str]) -> list[str]:
    """Turn ``--with-docs=false`` into ``--no-with-docs`` for on/off flags declared as ``--x/--no-x``,
    and ``--recurse=true|false`` into ``--recurse`` or nothing for a plain boolean flag."""
    switches: dict[str, tuple[str, str]] = {}
    for param in params:
        if isinstance(param, click.Option) and param.is_flag and param.secondary_opts:
            for opt in param.opts:
                switches[opt] = (opt, param.secondary_opts[0])
        elif isinstance(param, click.Option) and param.is_flag and param.is_bool_flag:
            for opt in param.opts:
                switches[opt] = (opt, "")
    out: list[str] = []
    for arg in args:
        if arg == "--":
            out.extend(args[len(out) :])
            break
        name, eq, value = arg.partition("=")
        if eq and name in switches:
            on, off = switches[name]
            lowered = value.lower()
            if lowered in ("true", "1", "t", "yes"):
                out.append(on)
                continue
            if lowered in ("false", "0", "f", "no"):
                if off:
                    out.append(off)
                continue
            raise click.UsageError(f'invalid argument "{value}" for "{name}" flag: expected true or false')
        out.append(arg)
    return out
