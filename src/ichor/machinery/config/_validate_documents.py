"""Talos's rules for the document kinds other than v1alpha1 (``ExtensionServiceConfig``,
``KmsgLogConfig``, ``WatchdogTimerConfig``, ``EventSinkConfig``, ``SideroLinkConfig``,
``NetworkRuleConfig``), and Ichor's for its own ``EtcdBackupConfig``, looked up by kind in
:data:`_KIND_VALIDATORS`.
"""

from __future__ import annotations

import re
import urllib.parse
from datetime import timedelta
from typing import Any

from ichor.machinery import cron, goduration
from ichor.machinery.errors import CronError, DurationError

from . import _models as m
from ._ichor_models import EtcdBackupConfigV1Alpha1
from ._validate_base import _parse_cidr, _q, _Report

# --- other document kinds (each stops at its first problem, as in Talos) --------------------------


def _validate_extension_service(doc: m.ExtensionServiceConfigV1Alpha1, r: _Report) -> None:
    name = doc.name or ""
    if not name:
        r.error(["name"], "name is required")
        return
    files = doc.config_files or []
    if not files and not doc.environment:
        r.error(["configFiles"], f"no config files found for extension {_q(name)}")
        return
    for i, cf in enumerate(files):
        if not cf.content:
            r.error(["configFiles", i, "content"], f"extension content is required for extension {_q(name)}")
            return
        if not cf.mount_path:
            r.error(
                ["configFiles", i, "mountPath"], f"extension mount path is required for extension {_q(name)}"
            )
            return


def _validate_kmsg_log(doc: m.KmsgLogConfigV1Alpha1, r: _Report) -> None:
    if not doc.name:
        r.error(["name"], "name is required")
        return
    if not doc.url:
        r.error(["url"], "url is required")
        return
    url = urllib.parse.urlsplit(doc.url)
    if url.scheme not in ("tcp", "udp"):
        r.error(["url"], "url scheme must be tcp:// or udp://")
    elif url.path not in ("", "/"):
        r.error(["url"], "url path must be empty")
    elif not re.search(r":\d+$", url.netloc):
        r.error(["url"], "url port is required")


def _validate_watchdog(doc: m.WatchdogTimerConfigV1Alpha1, r: _Report) -> None:
    if not doc.device:
        r.error(["device"], "watchdog device: empty value")
        return
    if doc.timeout:
        try:
            timeout = goduration.parse(doc.timeout, what="watchdog timeout")
        except DurationError as err:  # the schema's pattern lets a few non-Go spellings through
            r.error(["timeout"], str(err))
            return
        if timeout and timeout < timedelta(seconds=10):
            r.error(["timeout"], "watchdog timeout: minimum value is 10s")


def _validate_event_sink(doc: m.EventSinkConfigV1Alpha1, r: _Report) -> None:
    endpoint = doc.endpoint or ""
    if endpoint.startswith("["):
        ok = re.match(r"^\[[^\]]*\]:[^:]*$", endpoint) is not None
        reason = "missing port in address"
    else:
        colons = endpoint.count(":")
        ok = colons == 1
        reason = "missing port in address" if colons == 0 else "too many colons in address"
    if not ok:
        r.error(["endpoint"], f"event sink endpoint: address {endpoint}: {reason}")


def _validate_siderolink(doc: m.SideroLinkConfigV1Alpha1, r: _Report) -> None:
    if not doc.api_url:
        r.error(["apiUrl"], "apiUrl is required")
        return
    url = urllib.parse.urlsplit(doc.api_url)
    if url.scheme not in ("https", "grpc"):
        r.error(["apiUrl"], "apiUrl scheme must be https:// or grpc://")
    elif url.path not in ("", "/"):
        r.error(["apiUrl"], "apiUrl path must be empty")


def _port_range(value: int | str) -> tuple[int, int] | None:
    if isinstance(value, int):
        return (value, value) if 0 <= value <= 65535 else None
    lo, sep, hi = value.partition("-")
    if not sep or not lo.isdigit() or not hi.isdigit() or int(lo) > 65535 or int(hi) > 65535:
        return None
    return int(lo), int(hi)


def _validate_network_rule(doc: m.NetworkRuleConfigV1Alpha1, r: _Report) -> None:
    if not doc.name:
        r.error(["name"], "name is required")
        return
    ports = doc.port_selector.ports if doc.port_selector is not None else None
    if not ports:
        r.error(["portSelector", "ports"], "portSelector.ports is required")
        return
    ranges: list[tuple[int, int]] = []
    for i, port in enumerate(ports):
        parsed = _port_range(port)
        if parsed is None:
            r.error(["portSelector", "ports", i], f"invalid port range: {_q(port)}")
            return
        ranges.append(parsed)
    ranges.sort(key=lambda pr: pr[0])
    for i, (lo, hi) in enumerate(ranges):
        if lo > hi:
            r.error(["portSelector", "ports"], f"invalid port range: {lo}-{hi}")
            return
        if i > 0 and lo <= ranges[i - 1][1]:
            plo, phi = ranges[i - 1]
            r.error(["portSelector", "ports"], f"invalid port range: {lo}-{hi}, overlaps with {plo}-{phi}")
            return
    for i, rule in enumerate(doc.ingress or []):
        if not rule.subnet or not _parse_cidr(rule.subnet):
            r.error(["ingress", i, "subnet"], f"invalid subnet: {rule.subnet or 'invalid Prefix'}")
            return
        if rule.except_ and not _parse_cidr(rule.except_):
            r.error(["ingress", i, "except"], f"invalid except: {rule.except_}")
            return


ETCD_BACKUP_ROOT = "/var"
"""Snapshots go under /var (EPHEMERAL): the rest of a Talos root is read-only or a tmpfs."""
_ETCD_DATA = "/var/lib/etcd"


def _validate_etcd_backup(doc: EtcdBackupConfigV1Alpha1, r: _Report) -> None:
    """Ichor's rules: every problem at once (a document of our own need not stop at the first)."""
    try:
        cron.parse_cron(doc.schedule)
    except CronError as err:
        r.error(["schedule"], f"invalid cron schedule {_q(doc.schedule)}: {err}")
    if doc.retention < 1:
        r.error(["retention"], f"retention must be at least 1 (the snapshots to keep), got {doc.retention}")
    path = doc.path
    parts = path.split("/")
    if not path.startswith("/"):
        r.error(["path"], f"path {_q(path)} must be absolute (under {ETCD_BACKUP_ROOT})")
    elif ".." in parts or "." in parts or "" in parts[1:] or "\x00" in path:
        r.error(
            ["path"], f"path {_q(path)} must be a clean absolute path (no '.', '..', '//' or trailing '/')"
        )
    elif not path.startswith(ETCD_BACKUP_ROOT + "/"):
        r.error(["path"], f"path {_q(path)} must be under {ETCD_BACKUP_ROOT}/ (the EPHEMERAL partition)")
    elif path == _ETCD_DATA or path.startswith(_ETCD_DATA + "/"):
        r.error(["path"], f"path {_q(path)} must not be inside etcd's data directory {_ETCD_DATA}")


_KIND_VALIDATORS: dict[str, Any] = {
    "EtcdBackupConfig": _validate_etcd_backup,
    "ExtensionServiceConfig": _validate_extension_service,
    "KmsgLogConfig": _validate_kmsg_log,
    "WatchdogTimerConfig": _validate_watchdog,
    "EventSinkConfig": _validate_event_sink,
    "SideroLinkConfig": _validate_siderolink,
    "NetworkRuleConfig": _validate_network_rule,
}
