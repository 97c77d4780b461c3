"""The client configuration file (talosconfig): contexts of endpoints, nodes and credentials.

File format (Talos's, so either tool can read the other's files)::

    context: <current context name>
    contexts:
        <name>:
            endpoints: [...]     # always written, possibly []
            nodes: [...]         # omitted when empty
            ca: <base64 PEM>     # ca/crt/key omitted when empty
            crt: <base64 PEM>
            key: <base64 PEM>
            auth: {...}          # kept as-is when present
            cluster: <name>      # omitted when empty

Contexts are written sorted by name (as Talos does); keys we do not know are kept, so a round trip
loses nothing. The deprecated ``target`` key is folded into ``endpoints`` on load, like Talos.

Lookup order when no ``--talosconfig`` is given: ``$TALOSCONFIG``, ``$XDG_CONFIG_HOME/talos/config.yaml``
(only while ``$XDG_CONFIG_HOME`` is set to an absolute path, as the XDG base directory spec says),
``~/.talos/config``, then the read-only ``/var/run/secrets/talos.dev/config``; the first that exists
wins, else the first writable (so with ``$XDG_CONFIG_HOME`` set and no file yet, ``config merge``
creates ``$XDG_CONFIG_HOME/talos/config.yaml``, as the Talos docs describe).

:class:`GlobalOptions` are talosctl's persistent flags, which pick the file and context and override
its endpoints and nodes; ``Client.from_options`` builds a client from them (the CLI and ``cluster
create`` alike).

This module reads, edits and writes talosconfig files and issues admin client certificates. It does
not talk to nodes.
"""

from __future__ import annotations

__all__ = [
    "KNOWN_ROLES",
    "SERVICE_ACCOUNT_TALOSCONFIG",
    "Context",
    "GlobalOptions",
    "TalosConfig",
    "TalosconfigLocation",
    "default_talosconfig_path",
    "find_talosconfig",
    "issue_admin_context",
    "validate_roles",
]

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ichor.machinery.errors import ClientConfigError, PKIError
from ichor.machinery.files import write_atomic

if TYPE_CHECKING:
    from ichor.machinery.secrets import SecretsBundle

KNOWN_ROLES = ("os:admin", "os:operator", "os:reader", "os:etcd:backup", "os:impersonator")
"""Talos API roles, carried as Organization of the client certificate."""

SERVICE_ACCOUNT_TALOSCONFIG = Path("/var/run/secrets/talos.dev/config")
"""Where Talos mounts a talosconfig into pods with Talos API access; never written to."""

_KNOWN_CONTEXT_KEYS = ("target", "endpoints", "nodes", "ca", "crt", "key", "auth", "cluster")


@dataclass
class GlobalOptions:
    """Talos's persistent flags (``--talosconfig``, ``--context``, ``-e``, ``-n``, ``--cluster``);
    empty means "the talosconfig's"."""

    talosconfig: str | None = None
    context: str | None = None
    endpoints: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    cluster: str | None = None


@dataclass
class Context:
    """One talosconfig context; ``ca``/``crt``/``key`` are base64 PEM exactly as in the file."""

    endpoints: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    ca: str = ""
    crt: str = ""
    key: str = ""
    cluster: str | None = None
    auth: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys this version does not know, kept verbatim."""

    @classmethod
    def from_plain(cls, raw: Mapping[str, Any], *, where: str) -> Context:
        def strings(key: str) -> list[str]:
            value = raw.get(key)
            if value is None:
                return []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ClientConfigError(f"{where}.{key} must be a list of strings")
            return list(value)

        def text(key: str) -> str:
            value = raw.get(key)
            if value is None:
                return ""
            if not isinstance(value, str):
                raise ClientConfigError(f"{where}.{key} must be a string")
            return value

        auth = raw.get("auth")
        if auth is not None and not isinstance(auth, Mapping):
            raise ClientConfigError(f"{where}.auth must be a mapping")
        endpoints = strings("endpoints")
        target = text("target")
        if target:
            endpoints.append(target)
        return cls(
            endpoints=endpoints,
            nodes=strings("nodes"),
            ca=text("ca"),
            crt=text("crt"),
            key=text("key"),
            cluster=text("cluster") or None,
            auth=dict(auth) if auth else None,
            extra={k: v for k, v in raw.items() if k not in _KNOWN_CONTEXT_KEYS},
        )

    def to_plain(self) -> dict[str, Any]:
        out: dict[str, Any] = {"endpoints": list(self.endpoints)}
        if self.nodes:
            out["nodes"] = list(self.nodes)
        for key in ("ca", "crt", "key"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.auth:
            out["auth"] = self.auth
        if self.cluster:
            out["cluster"] = self.cluster
        out.update(self.extra)
        return out

    def client_certificate(self) -> Any:
        """The parsed client certificate (``cryptography`` object); ClientConfigError if absent/bad."""
        from ichor.machinery.pki import CertKey

        if not self.crt:
            raise ClientConfigError("the context has no client certificate (crt)")
        try:
            return CertKey.from_b64(self.crt, "", what="context").certificate()
        except PKIError as exc:
            raise ClientConfigError(
                str(exc), hint="replace the context's crt/key, e.g. with `talosctl config add`"
            ) from None


@dataclass
class TalosConfig:
    """A whole talosconfig file."""

    context: str | None = None
    contexts: dict[str, Context] = field(default_factory=dict)

    @classmethod
    def from_yaml(cls, text: str | bytes, *, source: str = "<input>") -> TalosConfig:
        from ichor.machinery.yamlio import load_documents, to_plain

        docs = load_documents(text, source=source)
        if not docs:
            return cls()
        if len(docs) != 1 or not isinstance(docs[0], Mapping):
            raise ClientConfigError(f"{source}: a talosconfig is a single YAML mapping")
        raw = to_plain(docs[0])
        current = raw.get("context")
        if current is not None and not isinstance(current, str):
            raise ClientConfigError(f"{source}: context must be a string")
        contexts_raw = raw.get("contexts") or {}
        if not isinstance(contexts_raw, Mapping):
            raise ClientConfigError(f"{source}: contexts must be a mapping of name to context")
        contexts: dict[str, Context] = {}
        for name, value in contexts_raw.items():
            if not isinstance(value, Mapping):
                raise ClientConfigError(f"{source}: contexts.{name} must be a mapping")
            try:
                contexts[str(name)] = Context.from_plain(value, where=f"contexts.{name}")
            except ClientConfigError as exc:
                raise ClientConfigError(f"{source}: {exc}") from None
        return cls(context=current or None, contexts=contexts)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TalosConfig:
        target = Path(path)
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            raise ClientConfigError(
                f"talosconfig {str(target)!r} does not exist",
                hint="generate one with `talosctl gen config`, then point to it with --talosconfig or $TALOSCONFIG",
            ) from None
        except OSError as exc:
            raise ClientConfigError(f"cannot read talosconfig {str(target)!r}: {exc.strerror}") from None
        return cls.from_yaml(data, source=str(target))

    def to_yaml(self) -> str:
        from ichor.machinery.yamlio import dump_document, from_plain

        doc = {
            "context": self.context or "",
            "contexts": {name: self.contexts[name].to_plain() for name in sorted(self.contexts)},
        }
        return dump_document(from_plain(doc))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically with mode 0600 (the directory is created 0700 if missing)."""
        target = Path(path)
        if target.resolve() == SERVICE_ACCOUNT_TALOSCONFIG.resolve():
            raise ClientConfigError(
                f"not allowed to write to config: {target}",
                hint="pass --talosconfig or set $TALOSCONFIG to a writable file",
            )
        parent = target.parent if str(target.parent) else Path(".")
        if not parent.exists():
            try:
                parent.mkdir(mode=0o700, parents=True)
            except OSError as exc:
                raise ClientConfigError(f"cannot create {str(parent)!r}: {exc.strerror}") from None
        return write_atomic(target, self.to_yaml(), mode=0o600, force=True)

    def get(self, name: str | None = None) -> tuple[str, Context]:
        """The named context, or the current one; errors list what is defined."""
        chosen = name or self.context
        if not chosen:
            raise ClientConfigError(
                "no context is set",
                hint=_known_hint(self) + "; choose one with `talosctl config context <name>` or --context",
            )
        if chosen not in self.contexts:
            raise ClientConfigError(f"context {chosen!r} is not defined", hint=_known_hint(self))
        return chosen, self.contexts[chosen]

    def merge(self, other: TalosConfig) -> list[str]:
        """Add ``other``'s contexts, renaming clashes ``<name>-1``, ``-2``…; ``other``'s current
        context becomes current. Returns one message per rename."""
        mapped: dict[str, str] = {}
        messages: list[str] = []
        for name, ctx in other.contexts.items():
            merged = name
            i = 0
            while merged in self.contexts:
                i += 1
                merged = f"{name}-{i}"
            mapped[name] = merged
            if merged != name:
                messages.append(f'renamed talosconfig context "{name}" -> "{merged}"')
            self.contexts[merged] = ctx
        if other.context:
            self.context = mapped.get(other.context, other.context)
        return messages


def _known_hint(cfg: TalosConfig) -> str:
    if not cfg.contexts:
        return "the talosconfig defines no contexts; add one with `talosctl config merge` or `talosctl config add`"
    return "defined contexts: " + ", ".join(sorted(cfg.contexts))


@dataclass(frozen=True)
class TalosconfigLocation:
    """Where the talosconfig is, why, and whether we may write it."""

    path: Path
    source: str
    """``--talosconfig``, ``$TALOSCONFIG``, ``$XDG_CONFIG_HOME``, ``default`` or ``service account``."""
    write_allowed: bool
    tried: tuple[Path, ...]


def find_talosconfig(flag: str | None) -> TalosconfigLocation:
    """Resolve the talosconfig path the way talosctl does."""
    if flag:
        path = Path(flag).expanduser()
        return TalosconfigLocation(path, "--talosconfig", True, (path,))
    candidates: list[tuple[Path, str, bool]] = []
    env = os.environ.get("TALOSCONFIG")
    if env is not None:
        candidates.append((Path(env).expanduser(), "$TALOSCONFIG", True))
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    if xdg and Path(xdg).is_absolute():
        candidates.append((Path(xdg) / "talos" / "config.yaml", "$XDG_CONFIG_HOME", True))
    candidates.append((Path.home() / ".talos" / "config", "default", True))
    candidates.append((SERVICE_ACCOUNT_TALOSCONFIG, "service account", False))
    tried = tuple(c[0] for c in candidates)
    for path, source, writable in candidates:
        if path.exists():
            return TalosconfigLocation(path, source, writable, tried)
    path, source, writable = next(c for c in candidates if c[2])
    return TalosconfigLocation(path, source, writable, tried)


def default_talosconfig_path(flag: str | None) -> Path:
    """``--talosconfig``, else the first of ``$TALOSCONFIG``, ``$XDG_CONFIG_HOME/talos/config.yaml``,
    ``~/.talos/config``, ``/var/run/secrets/talos.dev/config`` that exists (see the module docstring)."""
    return find_talosconfig(flag).path


def validate_roles(roles: Sequence[str]) -> list[str]:
    """Check role names against Talos's; raises ClientConfigError naming the unknown ones."""
    unknown = [r for r in roles if r not in KNOWN_ROLES]
    if unknown:
        raise ClientConfigError(
            f"unknown roles: {', '.join(unknown)}", hint=f"known roles: {', '.join(KNOWN_ROLES)}"
        )
    return list(dict.fromkeys(roles))


def issue_admin_context(
    bundle: SecretsBundle,
    *,
    endpoints: Sequence[str] = (),
    nodes: Sequence[str] = (),
    roles: Sequence[str] = ("os:admin",),
    ttl: timedelta = timedelta(days=365),
    now: datetime | None = None,
) -> Context:
    """A context with a client certificate signed by the bundle's OS CA.

    The certificate's subject is ``O=<role>...`` (no CN), ExtKeyUsage ClientAuth only, and the key
    follows the CA's algorithm (Ed25519 for Talos-made bundles).
    """
    from ichor.machinery.pki import new_keypair

    pair = new_keypair(
        bundle.os,
        organizations=validate_roles(roles),
        ttl=ttl,
        server=False,
        client=True,
        now=now,
    )
    return Context(
        endpoints=list(endpoints),
        nodes=list(nodes),
        ca=bundle.os.crt_b64(),
        crt=pair.crt_b64(),
        key=pair.key_b64(),
    )
