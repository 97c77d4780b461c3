"""The kernel command line as Talos 1.7 reads it (``/proc/cmdline``): parsed, never fatal.

:func:`parse` splits the command line (repeated keys keep every value, ``console=`` is usually
given twice); :class:`KernelArgs` names what machined uses: ``talos.platform``, ``talos.config``,
``ip=`` (the kernel's ``nfsroot`` syntax Talos's cmdline network layer reads), ``console=``,
``talos.hostname``, ``talos.shutdown``. Unknown ``talos.*`` arguments are listed in
:attr:`KernelArgs.unknown` for the console, never refused: a typo must not stop a machine booting.

Stdlib only: PID 1 imports this before anything heavy.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

__all__ = ["KNOWN_TALOS_ARGS", "IPArg", "KernelArgs", "parse", "parse_ip"]

# pkg/machinery/constants (1.7) plus the ones Ichor adds.
KNOWN_TALOS_ARGS = frozenset({
    "talos.platform", "talos.config", "talos.hostname", "talos.shutdown", "talos.board",
    "talos.dashboard.disabled", "talos.logging.kernel", "talos.events.sink", "talos.halt_if_installed",
    "talos.experimental.wipe", "talos.network.interface.ignore", "talos.config.auth.node_uuid",
    "talos.unique_token", "talos.environment", "talos.device.settle_time",
})  # fmt: skip


@dataclass(frozen=True)
class IPArg:
    """``ip=<client>:<server>:<gw>:<netmask>:<hostname>:<device>:<autoconf>:<dns0>:<dns1>:<ntp0>``."""

    address: str
    """``client/prefix`` (``10.5.0.2/24``)."""
    gateway: str = ""
    hostname: str = ""
    device: str = ""
    nameservers: tuple[str, ...] = ()
    ntp: str = ""

    @property
    def ip(self) -> str:
        return self.address.split("/")[0]


def parse_ip(value: str) -> IPArg | None:
    """The static part of an ``ip=`` value; None for ``dhcp``/``off``-only forms. Raises ValueError."""
    fields = value.split(":")
    if not fields[0] or value in ("dhcp", "on", "any", "off", "none", "both", "bootp", "rarp", "dhcp6"):
        return None  # autoconfiguration, or ip=:::: without a client address
    fields += [""] * (10 - len(fields))
    client = ipaddress.ip_address(fields[0])
    netmask = fields[3]
    if not netmask:
        prefix: int = client.max_prefixlen
    elif netmask.isdigit():
        prefix = int(netmask)
    else:
        prefix = ipaddress.ip_network(f"0.0.0.0/{netmask}").prefixlen
    if fields[2]:
        ipaddress.ip_address(fields[2])
    dns = tuple(d for d in fields[7:9] if d)
    for d in dns:
        ipaddress.ip_address(d)
    return IPArg(
        address=f"{client}/{prefix}", gateway=fields[2], hostname=fields[4], device=fields[5],
        nameservers=dns, ntp=fields[9],
    )  # fmt: skip


def parse(cmdline: str) -> dict[str, list[str]]:
    """``a=1 b c=2 a=3`` -> ``{"a": ["1", "3"], "b": [""], "c": ["2"]}`` (double quotes grouped)."""
    args: dict[str, list[str]] = {}
    word, quoted, words = "", False, []
    for ch in cmdline.strip():
        if ch == '"':
            quoted = not quoted
        elif ch.isspace() and not quoted:
            if word:
                words.append(word)
            word = ""
        else:
            word += ch
    if word:
        words.append(word)
    for w in words:
        key, _, value = w.partition("=")
        args.setdefault(key, []).append(value)
    return args


@dataclass(frozen=True)
class KernelArgs:
    args: dict[str, list[str]]
    problems: list[str] = field(default_factory=list)

    @classmethod
    def from_cmdline(cls, cmdline: str) -> KernelArgs:
        args = parse(cmdline)
        problems = [
            f"unknown kernel argument {key}={','.join(values)} ignored"
            for key, values in sorted(args.items())
            if key.startswith("talos.") and key not in KNOWN_TALOS_ARGS
        ]
        for value in args.get("ip", []):
            try:
                parse_ip(value)
            except ValueError as err:
                problems.append(f"kernel argument ip={value} ignored: {err}")
        return cls(args, problems)

    def first(self, key: str) -> str | None:
        """The first value given for ``key`` (Talos's ``ProcCmdline().Get(key).First()``)."""
        values = self.args.get(key)
        return values[0] if values else None

    def last(self, key: str) -> str | None:
        values = self.args.get(key)
        return values[-1] if values else None

    @property
    def platform(self) -> str | None:
        return self.last("talos.platform")

    @property
    def config_url(self) -> str | None:
        return self.last("talos.config")

    @property
    def environment(self) -> dict[str, str]:
        """``talos.environment=K=V`` arguments: the process environment Talos gives machined and
        passes on (the imager puts ``INSTALLER_META_BASE64`` there for outputs without META)."""
        return dict(v.partition("=")[::2] for v in self.args.get("talos.environment", []) if "=" in v)

    @property
    def consoles(self) -> list[str]:
        return self.args.get("console", [])

    @property
    def hostname(self) -> str | None:
        return self.last("talos.hostname")

    @property
    def halt_on_shutdown(self) -> bool:
        return self.last("talos.shutdown") == "halt"

    @property
    def ip(self) -> IPArg | None:
        for value in reversed(self.args.get("ip", [])):
            try:
                parsed = parse_ip(value)
            except ValueError:
                continue
            if parsed is not None:
                return parsed
        return None

    @property
    def unknown(self) -> list[str]:
        return sorted(k for k in self.args if k.startswith("talos.") and k not in KNOWN_TALOS_ARGS)
