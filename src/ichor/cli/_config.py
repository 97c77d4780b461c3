"""``talosctl config``: edit the client configuration file (talosconfig).

The file is found like talosctl does (global ``--talosconfig``, ``$TALOSCONFIG``,
``$XDG_CONFIG_HOME/talos/config.yaml``, ``~/.talos/config``,
``/var/run/secrets/talos.dev/config``) and ``--context`` picks a context other than the current one.
Only ``add`` and ``merge`` create a missing file; the other sub-commands say which path was tried.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from ichor.cli._lazy import LazyGroup

if TYPE_CHECKING:
    from ichor.machinery.clientconfig import TalosConfig, TalosconfigLocation

_M = "ichor.cli._config"
EXPIRY_WARNING = timedelta(days=30)


@click.group("config", cls=LazyGroup, help="Manage the client configuration file (talosconfig)")
def config() -> None:
    pass


assert isinstance(config, LazyGroup)
config.add_lazy("add", f"{_M}:config_add", "Add a new context")
config.add_lazy("context", f"{_M}:config_context", "Set the current context", ("use-context",))
config.add_lazy("contexts", f"{_M}:config_contexts", "List defined contexts", ("get-contexts",))
config.add_lazy(
    "endpoint", f"{_M}:config_endpoint", "Set the endpoint(s) for the current context", ("endpoints",)
)
config.add_lazy("info", f"{_M}:config_info", "Show information about the current context")
config.add_lazy(
    "merge", f"{_M}:config_merge", "Merge additional contexts from another client configuration file"
)
config.add_lazy("new", "ichor.cli._node_more:config_new", "Generate a new client configuration file")
config.add_lazy("node", f"{_M}:config_node", "Set the node(s) for the current context", ("nodes",))
config.add_lazy("remove", f"{_M}:config_remove", "Remove contexts")


# --- plumbing ---------------------------------------------------------------------------------


def _globals() -> Any:
    return click.get_current_context().find_root().obj


def _open(*, create: bool = False) -> tuple[TalosConfig, TalosconfigLocation]:
    from ichor.machinery.clientconfig import TalosConfig, find_talosconfig
    from ichor.machinery.errors import ClientConfigError

    opts = _globals()
    where = find_talosconfig(getattr(opts, "talosconfig", None))
    if not where.path.exists():
        if create:
            return TalosConfig(), where
        tried = ", ".join(str(p) for p in where.tried)
        raise ClientConfigError(
            f"talosconfig {str(where.path)!r} does not exist (looked at: {tried})",
            hint="generate one with `talosctl gen config` (or merge one with `talosctl config merge <file>`), "
            "and point to it with --talosconfig or $TALOSCONFIG",
        )
    return TalosConfig.load(where.path), where


def _save(cfg: TalosConfig, where: TalosconfigLocation) -> None:
    from ichor.machinery.errors import ClientConfigError

    if not where.write_allowed:
        raise ClientConfigError(
            f"not allowed to write to config: {where.path}",
            hint="pass --talosconfig or set $TALOSCONFIG to a writable file",
        )
    cfg.save(where.path)


def _context_name() -> str | None:
    return getattr(_globals(), "context", None) or None


# --- endpoint / node / context ------------------------------------------------------------------


def _clean(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@click.command("endpoint", help="Set the endpoint(s) for the current context")
@click.argument("endpoints", nargs=-1, required=True)
def config_endpoint(endpoints: tuple[str, ...]) -> None:
    from ichor.machinery.errors import ClientConfigError

    cleaned = _clean(endpoints)
    if not cleaned:
        raise ClientConfigError(
            "no endpoints given (only empty strings)",
            hint="pass one or more control plane addresses: `talosctl config endpoint 10.0.0.2 10.0.0.3`",
        )
    cfg, where = _open()
    _, ctx = cfg.get(_context_name())
    ctx.endpoints = cleaned
    _save(cfg, where)


@click.command("node", help="Set the node(s) for the current context")
@click.argument("nodes", nargs=-1)
def config_node(nodes: tuple[str, ...]) -> None:
    cfg, where = _open()
    _, ctx = cfg.get(_context_name())
    # As in Talos, no arguments clears the default nodes.
    ctx.nodes = _clean(nodes)
    _save(cfg, where)


@click.command("context", help="Set the current context")
@click.argument("name")
def config_context(name: str) -> None:
    cfg, where = _open()
    cfg.get(name)
    cfg.context = name
    _save(cfg, where)


@click.command("contexts", help="List defined contexts")
def config_contexts() -> None:
    cfg, _ = _open()
    rows = [["CURRENT", "NAME", "ENDPOINTS", "NODES"]]
    for name in sorted(cfg.contexts):
        ctx = cfg.contexts[name]
        nodes = ",".join(ctx.nodes[:3]) + ("..." if len(ctx.nodes) > 3 else "")
        rows.append(["*" if name == cfg.context else "", name, ",".join(ctx.endpoints), nodes])
    click.echo(_table(rows), nl=False)


def _table(rows: list[list[str]]) -> str:
    """Go ``tabwriter`` with padding 3: every cell but the last is padded to its column width."""
    widths = [max(len(row[i]) for row in rows) + 3 for i in range(len(rows[0]) - 1)]
    lines = ["".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + row[-1] for row in rows]
    return "\n".join(lines) + "\n"


# --- add / merge / remove ------------------------------------------------------------------------


@click.command("add", help="Add a new context")
@click.argument("name")
@click.option("--ca", "ca_path", default="", help="the path to the CA certificate")
@click.option("--crt", "crt_path", default="", help="the path to the certificate")
@click.option("--key", "key_path", default="", help="the path to the key")
def config_add(name: str, ca_path: str, crt_path: str, key_path: str) -> None:
    import base64

    from ichor.machinery import pki
    from ichor.machinery.clientconfig import Context
    from ichor.machinery.errors import ClientConfigError, PKIError

    if bool(crt_path) != bool(key_path):
        raise click.UsageError("if either the 'crt' or 'key' flag is specified, both are required")

    def read(path: str, flag: str, check: Any) -> str:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise ClientConfigError(
                f"error reading {flag[2:]}: {path!r}: {exc.strerror}", hint=f"check {flag}"
            ) from None
        try:
            check(data, what=f"{flag} {path}")
        except PKIError as exc:
            raise ClientConfigError(str(exc), hint=f"{flag} must point to a PEM file") from None
        return base64.b64encode(data).decode("ascii")

    ctx = Context()
    if ca_path:
        ctx.ca = read(ca_path, "--ca", pki.load_certificate)
    if crt_path:
        ctx.crt = read(crt_path, "--crt", pki.load_certificate)
        ctx.key = read(key_path, "--key", pki.load_private_key)
    cfg, where = _open(create=True)
    cfg.contexts[name] = ctx
    _save(cfg, where)


@click.command("merge", help="Merge additional contexts from another client configuration file")
@click.argument("source")
def config_merge(source: str) -> None:
    from ichor.machinery.clientconfig import TalosConfig

    other = TalosConfig.load(source)
    cfg, where = _open(create=True)
    for message in cfg.merge(other):
        click.echo(message, err=True)
    _save(cfg, where)


@click.command("remove", help="Remove contexts")
@click.argument("patterns", nargs=-1, required=True)
@click.option("-y", "--noconfirm", is_flag=True, help="do not ask for confirmation")
@click.option("--dry-run", is_flag=True, help="dry run")
def config_remove(patterns: tuple[str, ...], noconfirm: bool, dry_run: bool) -> None:
    from fnmatch import fnmatchcase

    from ichor.machinery.errors import ClientConfigError

    cfg, where = _open()
    if not cfg.contexts:
        raise ClientConfigError("no contexts defined")
    matches: list[str] = []
    for pattern in patterns:
        found = sorted(name for name in cfg.contexts if fnmatchcase(name, pattern))
        if not found:
            raise ClientConfigError(
                f'no contexts matched "{pattern}"',
                hint="defined contexts: " + ", ".join(sorted(cfg.contexts)),
            )
        matches.extend(name for name in found if name not in matches)
    changed = False
    for name in matches:
        if name == cfg.context:
            click.echo(
                f'skipping removal of current context "{name}", please change it to another before removing',
                err=True,
            )
            continue
        if noconfirm:
            click.echo(f'removing context "{name}"', err=True)
        elif not click.confirm(f'remove context "{name}"?', default=False, err=True):
            continue
        del cfg.contexts[name]
        changed = True
    if changed and not dry_run:
        _save(cfg, where)


# --- info -----------------------------------------------------------------------------------------


def _humanize(then: datetime, now: datetime) -> str:
    """go-humanize ``RelTime(then, now, "ago", "from now")``, which Talos prints."""
    day, month = 86400, 30 * 86400
    year = 12 * month
    label = "ago"
    diff = int((now - then).total_seconds())
    if then > now:
        label, diff = "from now", int((then - now).total_seconds())
    table: list[tuple[float, str, int]] = [
        (1, "now", 1),
        (2, "1 second %s", 1),
        (60, "%d seconds %s", 1),
        (120, "1 minute %s", 1),
        (3600, "%d minutes %s", 60),
        (7200, "1 hour %s", 1),
        (day, "%d hours %s", 3600),
        (2 * day, "1 day %s", 1),
        (7 * day, "%d days %s", day),
        (14 * day, "1 week %s", 1),
        (month, "%d weeks %s", 7 * day),
        (2 * month, "1 month %s", 1),
        (year, "%d months %s", month),
        (18 * month, "1 year %s", 1),
        (2 * year, "2 years %s", 1),
        (37 * year, "%d years %s", year),
        (float("inf"), "a long while %s", 1),
    ]
    _, fmt, div = next(row for row in table if row[0] > diff)
    if fmt == "now":
        return fmt
    return fmt.replace("%d", str(diff // div)).replace("%s", label)


def info_data(name: str, cfg: TalosConfig, now: datetime) -> dict[str, Any]:
    """The fields ``config info`` shows (Talos's JSON/YAML keys)."""
    from cryptography.x509.oid import NameOID

    from ichor.machinery.clientconfig import KNOWN_ROLES

    ctx = cfg.contexts[name]
    roles: list[str] = []
    ttl = not_after = ""
    expires: datetime | None = None
    if ctx.crt:
        cert = ctx.client_certificate()
        orgs = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
        roles = sorted({o for o in orgs if o in KNOWN_ROLES})
        expires = cert.not_valid_after_utc
        ttl = _humanize(expires, now)
        not_after = expires.strftime("%Y-%m-%d")
    return {
        "context": name,
        "nodes": list(ctx.nodes),
        "endpoints": list(ctx.endpoints),
        "roles": roles,
        "certTTL": ttl,
        "certNotAfter": not_after,
        "_expires": expires,
    }


@click.command("info", help="Show information about the current context")
@click.option("-o", "--output", default="text", show_default=True, help="output format (json|yaml|text)")
def config_info(output: str) -> None:
    from datetime import UTC

    from ichor.machinery.errors import ClientConfigError

    if output not in ("text", "json", "yaml"):
        raise ClientConfigError(f'unknown output format: "{output}"', hint="use -o text, -o json or -o yaml")
    cfg, _ = _open()
    name, _ctx = cfg.get(_context_name())
    now = datetime.now(UTC)
    data = info_data(name, cfg, now)
    expires = data.pop("_expires")
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    elif output == "yaml":
        from ichor.machinery.yamlio import dump_document, from_plain

        click.echo(dump_document(from_plain(data)), nl=False)
    else:
        lines = [
            f"Current context:     {name}",
            f"Nodes:               {', '.join(data['nodes']) or 'not defined'}",
            f"Endpoints:           {', '.join(data['endpoints']) or 'not defined'}",
        ]
        if data["roles"]:
            lines.append(f"Roles:               {', '.join(data['roles'])}")
        if data["certTTL"]:
            lines.append(f"Certificate expires: {data['certTTL']} ({data['certNotAfter']})")
        click.echo("\n".join(lines))
    if expires is not None:
        _warn_expiry(name, expires, now)


def _warn_expiry(name: str, expires: datetime, now: datetime) -> None:
    # Users find out about an expired talosconfig only when every command fails; say it early.
    if expires <= now:
        click.echo(
            f"warning: the client certificate of context {name!r} expired {_humanize(expires, now)}; "
            "get a new talosconfig (`talosctl config new` against a node, or regenerate it from secrets.yaml)",
            err=True,
        )
    elif expires - now <= EXPIRY_WARNING:
        click.echo(
            f"warning: the client certificate of context {name!r} expires {_humanize(expires, now)} "
            f"({expires:%Y-%m-%d}); renew it before then with `talosctl config new`",
            err=True,
        )
