"""``machine.registries`` as containerd's registry host files, in Talos 1.7's layout.

Every registry named in ``machine.registries.mirrors`` or ``.config`` gets a directory under
``/etc/cri/conf.d/hosts`` (``*`` is containerd's ``_default``) holding ``hosts.toml``: one
``[host."<endpoint>"]`` per mirror endpoint in order (``capabilities = ["pull", "resolve"]``,
``override_path`` when asked) with the TLS settings ``machine.registries.config`` gives for the
endpoint's host (``ca``, ``client``, ``skip_verify``); the CA and client key pair are files beside
it. A registry with TLS settings but no mirror gets its own ``https://<host>`` entry. Credentials
cannot go into ``hosts.toml``: they become ``registry.configs."<host>".auth`` of the CRI plugin in
``01-registries.part``.

containerd reads the host files for every pull, so rewriting them needs no restart; the ``.part``
is read when ``cri`` starts. This module only renders; :class:`HostFiles` is what gets written.
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from ichor.machined.cri import _toml
from ichor.machined.cri._errors import CRIConfigError
from ichor.machinery.config._models import RegistriesConfig, RegistryConfig
from ichor.machinery.config._paths import format_path

__all__ = ["HostFiles", "host_directory", "render_registries"]

_CRI_PLUGIN = "io.containerd.grpc.v1.cri"


@dataclass(frozen=True)
class HostFiles:
    """What to write: ``files`` maps paths relative to the hosts directory to their contents;
    ``registries_part`` is ``01-registries.part`` (empty when no registry has credentials)."""

    files: dict[str, str] = field(default_factory=dict)
    registries_part: str = ""


def host_directory(registry: str) -> str:
    """The directory containerd looks in for ``registry`` (``*`` is its ``_default``)."""
    if registry == "*":
        return "_default"
    if not registry or "/" in registry or registry in (".", ".."):
        raise CRIConfigError(
            f"registry name {registry!r} is not a host[:port]",
            hint="machine.registries.mirrors and .config keys are registry hosts, e.g. docker.io or registry.local:5000",
        )
    return registry


def _endpoint(url: str, where: str) -> urllib.parse.SplitResult:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CRIConfigError(
            f"{where}: {url!r} is not an http:// or https:// URL",
            hint=f"fix {where} (e.g. https://registry.local:5000)",
        )
    return parts


def _decode(value: str, where: str) -> str:
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as err:
        raise CRIConfigError(f"{where} is not base64-encoded PEM: {err}", hint=f"fix {where}") from err


def _tls(
    config: RegistryConfig | None, directory: str, name: str, files: dict[str, str], where: str
) -> dict[str, Any]:
    """The TLS keys of one ``[host."..."]`` table; writes the CA and key pair into ``files``."""
    tls = config.tls if config is not None else None
    if tls is None:
        return {}
    out: dict[str, Any] = {}
    if tls.ca:
        files[f"{directory}/{name}-ca.crt"] = _decode(tls.ca, f"{where}.tls.ca")
        out["ca"] = f"{name}-ca.crt"
    identity = tls.client_identity
    if identity is not None and (identity.crt or identity.key):
        if not (identity.crt and identity.key):
            raise CRIConfigError(
                f"{where}.tls.clientIdentity needs both crt and key",
                hint=f"set both in {where}.tls.clientIdentity",
            )
        files[f"{directory}/{name}-client.crt"] = _decode(identity.crt, f"{where}.tls.clientIdentity.crt")
        files[f"{directory}/{name}-client.key"] = _decode(identity.key, f"{where}.tls.clientIdentity.key")
        out["client"] = [[f"{name}-client.crt", f"{name}-client.key"]]
    if tls.insecure_skip_verify:
        out["skip_verify"] = True
    return out


def _absolute(table: dict[str, Any], hosts_dir: str, directory: str) -> dict[str, Any]:
    """containerd resolves relative CA paths against its working directory, not the file's: make them absolute."""
    prefix = f"{hosts_dir}/{directory}/"
    out = dict(table)
    if "ca" in out:
        out["ca"] = prefix + out["ca"]
    if "client" in out:
        out["client"] = [[prefix + p for p in pair] for pair in out["client"]]
    return out


def render_registries(registries: RegistriesConfig | None, hosts_dir: str) -> HostFiles:
    """Render ``machine.registries`` (see the module doc); ``hosts_dir`` is the Talos path the files
    go to (CA paths inside ``hosts.toml`` are absolute)."""
    mirrors = (registries.mirrors if registries is not None else None) or {}
    configs = (registries.config if registries is not None else None) or {}
    files: dict[str, str] = {}
    hosts: dict[str, dict[str, Any]] = {}
    for registry, mirror in mirrors.items():
        where = format_path(["machine", "registries", "mirrors", registry])
        directory = host_directory(registry)
        tables: dict[str, Any] = {}
        for i, url in enumerate((mirror.endpoints if mirror is not None else None) or []):
            parts = _endpoint(url, f"{where}.endpoints[{i}]")
            table: dict[str, Any] = {"capabilities": ["pull", "resolve"]}
            if mirror is not None and mirror.override_path:
                table["override_path"] = True
            endpoint_host = parts.netloc
            tls = _tls(configs.get(endpoint_host), directory, endpoint_host.replace(":", "_"), files,
                       format_path(["machine", "registries", "config", endpoint_host]))  # fmt: skip
            table.update(_absolute(tls, hosts_dir, directory))
            tables[url] = table
        hosts[directory] = {"host": tables} if tables else {}
    for registry, config in configs.items():
        directory = host_directory(registry)
        if directory in hosts or config is None or config.tls is None:
            continue
        where = format_path(["machine", "registries", "config", registry])
        tls = _tls(config, directory, registry.replace(":", "_"), files, where)
        server = f"https://{registry}"
        hosts[directory] = {
            "host": {server: {"capabilities": ["pull", "resolve"], **_absolute(tls, hosts_dir, directory)}}
        }
    for directory, document in hosts.items():
        files[f"{directory}/hosts.toml"] = _toml.dumps(document)

    auths: dict[str, Any] = {}
    for registry, config in configs.items():
        auth = config.auth if config is not None else None
        if auth is None:
            continue
        values = {"username": auth.username, "password": auth.password, "auth": auth.auth,
                  "identitytoken": auth.identity_token}  # fmt: skip
        kept = {k: str(v) for k, v in values.items() if v}
        if kept:
            auths[registry] = {"auth": kept}
    part = ""
    if auths:
        part = _toml.dumps({"version": 2, "plugins": {_CRI_PLUGIN: {"registry": {"configs": auths}}}})
    return HostFiles(files=files, registries_part=part)
