"""``/etc/hosts`` and ``/etc/resolv.conf``: rendered as Talos 1.7 renders them, then written in the node.

* ``network.EtcFileController``: HostnameStatus + NodeAddress ``default`` + ResolverStatus (+ the
  machine config's ``extraHostEntries`` and ``disableSearchDomain``) -> EtcFileSpecs ``hosts`` and
  ``resolv.conf`` (namespace ``files``);
  With host DNS enabled (HostDNSConfig ``config``) ``resolv.conf`` names ``127.0.0.53`` only, as Talos's;
* ``files.EtcFileController``: EtcFileSpecs -> the files under the node's ``/etc`` (through
  :class:`~ichor.machined.platform.Layout`: the real ``/etc`` on a node with its own mount
  namespace, ``<root>/etc`` on a process node, never the host's) -> EtcFileStatuses; and the pods'
  ``/system/resolved/resolv.conf`` (the kubelet's ``resolvConf``): the resolvers themselves, never
  ``127.0.0.53``, which in a pod's network namespace is nobody (CoreDNS forwarding there finds
  itself: ``plugin/loop`` kills it). Talos's network.EtcFileController writes that file.

A file is rewritten only when its contents changed, in place (``/etc/resolv.conf`` may be a bind
mount, which a rename would not replace).
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

from ichor.machined.controllers.config import ACTIVE_CONFIG
from ichor.machined.controllers.network.config import config_or_none
from ichor.machined.cosi import (
    Controller,
    ControllerContext,
    Input,
    Output,
    OutputKind,
    Phase,
    TransformController,
)
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ETC_FILE_SPECS,
    ETC_FILE_STATUSES,
    HOST_DNS_CONFIG_ID,
    HOST_DNS_CONFIGS,
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    NODE_ADDRESS_DEFAULT_ID,
    NODE_ADDRESSES,
    RESOLVER_ID,
    RESOLVER_STATUSES,
    EtcFileSpecSpec,
    EtcFileStatusSpec,
    HostnameStatusSpec,
)
from ichor.machinery.config import Config

__all__ = [
    "POD_RESOLV_CONF",
    "EtcFileWriter",
    "etc_file_spec_controller",
    "render_hosts",
    "render_resolv_conf",
]

_MAX_NAMESERVERS = 3
"""MAXNS of resolv.conf(5): the resolver reads no more."""
_RETRY_AFTER = 5.0
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def _aligned(rows: list[tuple[str, str]]) -> str:
    """Go's tabwriter as Talos configures it (padding 1, spaces): the first column padded to one width."""
    width = max(len(first) for first, _ in rows) + 1
    return "".join(f"{first.ljust(width)}{rest}\n" for first, rest in rows)


def render_hosts(hostname: HostnameStatusSpec, address: str, config: Config | None) -> str:
    """Talos's ``/etc/hosts``: localhost, the node's address with its FQDN (and short name), IPv6
    names, then ``machine.network.extraHostEntries``."""
    name = hostname.fqdn if hostname.fqdn == hostname.hostname else f"{hostname.fqdn} {hostname.hostname}"
    rows = [("127.0.0.1", "localhost"), (address, name), ("::1", "localhost ip6-localhost ip6-loopback"),
            ("ff02::1", "ip6-allnodes"), ("ff02::2", "ip6-allrouters")]  # fmt: skip
    network = config.machine.network if config is not None and config.machine is not None else None
    for extra in (network.extra_host_entries or []) if network is not None else []:
        aliases = [a for a in (extra.aliases or []) if _SAFE_NAME.match(a)]
        try:
            ip = str(ipaddress.ip_address((extra.ip or "").strip()))
        except ValueError:
            continue
        if aliases:
            rows.append((ip, " ".join(aliases)))
    return _aligned(rows)


def render_resolv_conf(nameservers: tuple[str, ...], search: tuple[str, ...]) -> str:
    """Talos's ``/etc/resolv.conf``: up to three ``nameserver`` lines, then a ``search`` line."""
    lines = "".join(f"nameserver {server}\n" for server in nameservers[:_MAX_NAMESERVERS])
    domains = [d for d in dict.fromkeys(search) if d and _SAFE_NAME.match(d)]
    return lines + (f"\nsearch {' '.join(domains)}\n" if domains else "")


def _resolv_conf(ctx: ControllerContext, *, host_dns: bool) -> str | None:
    """``resolv.conf`` naming the resolvers, or with ``host_dns`` the node's own cache at
    ``127.0.0.53`` (which forwards to them); None until the resolvers are known."""
    config = config_or_none(ctx)
    hostname = ctx.get_or_none(HOSTNAME_STATUSES, HOSTNAME_STATUS_ID)
    resolvers = ctx.get_or_none(RESOLVER_STATUSES, RESOLVER_ID)
    if resolvers is None:
        return None
    network = config.machine.network if config is not None and config.machine is not None else None
    no_search = network is not None and bool(network.disable_search_domain)
    domain = hostname.spec.domainname if hostname is not None and not no_search else ""
    servers = ("127.0.0.53",) if host_dns else resolvers.spec.dns_servers
    return render_resolv_conf(servers, (domain, *resolvers.spec.search_domains))


def etc_file_spec_controller() -> TransformController[EtcFileSpecSpec]:
    def derive(ctx: ControllerContext) -> dict[str, EtcFileSpecSpec]:
        config = config_or_none(ctx)
        hostname = ctx.get_or_none(HOSTNAME_STATUSES, HOSTNAME_STATUS_ID)
        address = ctx.get_or_none(NODE_ADDRESSES, NODE_ADDRESS_DEFAULT_ID)
        host_dns = ctx.get_or_none(HOST_DNS_CONFIGS, HOST_DNS_CONFIG_ID)
        files: dict[str, EtcFileSpecSpec] = {}
        contents = _resolv_conf(ctx, host_dns=host_dns is not None and host_dns.spec.enabled)
        if contents is not None:
            files["resolv.conf"] = EtcFileSpecSpec(contents=contents)
        if hostname is not None and address is not None and address.spec.addresses:
            ip = str(address.spec.addresses[0].ip)
            files["hosts"] = EtcFileSpecSpec(contents=render_hosts(hostname.spec, ip, config))
        return files

    return TransformController(
        "network.EtcFileController",
        inputs=[ACTIVE_CONFIG, Input(HOSTNAME_STATUSES, id=HOSTNAME_STATUS_ID),
                Input(NODE_ADDRESSES, id=NODE_ADDRESS_DEFAULT_ID), Input(RESOLVER_STATUSES, id=RESOLVER_ID),
                Input(HOST_DNS_CONFIGS, id=HOST_DNS_CONFIG_ID)],
        output=ETC_FILE_SPECS, map_inputs=derive, output_kind=OutputKind.SHARED,
    )  # fmt: skip


POD_RESOLV_CONF = "/system/resolved/resolv.conf"
"""The pods' resolv.conf (the kubelet's ``resolvConf``, bind-mounted into its container)."""


def _write_in_place(path: Path, contents: str, mode: int) -> bool:
    """Write ``contents`` to ``path`` unless it holds them already, in place (a bind mount of the
    file stays valid); True when written."""
    if path.exists() and path.read_text() == contents:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        handle.write(contents)
    path.chmod(mode)
    return True


class EtcFileWriter(Controller):
    """``files.EtcFileController``: writes each EtcFileSpec to ``/etc/<id>`` in the node, and the
    pods' :data:`POD_RESOLV_CONF` from the resolvers."""

    name = "files.EtcFileController"
    inputs = (Input(ETC_FILE_SPECS), ACTIVE_CONFIG, Input(HOSTNAME_STATUSES, id=HOSTNAME_STATUS_ID),
              Input(RESOLVER_STATUSES, id=RESOLVER_ID))  # fmt: skip
    outputs = (Output(ETC_FILE_STATUSES),)
    writes = f"(/etc/hosts, /etc/resolv.conf, {POD_RESOLV_CONF} in the node)"

    def __init__(self, layout: Layout) -> None:
        self._layout = layout

    async def run(self, ctx: ControllerContext) -> None:
        retry: float | None = None
        while True:
            await ctx.changed(timeout=retry)
            written: set[str] = set()
            failed: list[str] = []
            for resource in ctx.list(ETC_FILE_SPECS):
                if resource.metadata.phase is not Phase.RUNNING:
                    continue
                try:
                    path = self._layout.path(f"/etc/{resource.id}")
                    if _write_in_place(path, resource.spec.contents, resource.spec.mode):
                        ctx.logger.info("wrote /etc file", id=resource.id, version=resource.metadata.version)
                except OSError as err:
                    failed.append(f"/etc/{resource.id}: {err}")
                    continue
                ctx.modify(
                    ETC_FILE_STATUSES,
                    resource.id,
                    EtcFileStatusSpec(spec_version=str(resource.metadata.version)),
                )
                written.add(resource.id)
            ctx.clean_up_outputs(ETC_FILE_STATUSES, written)
            pods = _resolv_conf(ctx, host_dns=False)
            try:
                if pods is not None and _write_in_place(self._layout.path(POD_RESOLV_CONF), pods, 0o644):
                    ctx.logger.info("wrote the pods' resolv.conf", path=POD_RESOLV_CONF)
            except OSError as err:
                failed.append(f"{POD_RESOLV_CONF}: {err}")
            retry = ctx.waiting_on("/etc files written", failed, retry_after=_RETRY_AFTER)
