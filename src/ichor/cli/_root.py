"""The root ``talosctl`` group, global flags and the error edge.

The sub-commands are a click-free table (:class:`CommandTable`), so ``talosctl --help`` and
``talosctl version --client`` are answered (:mod:`ichor.cli._fast`) without importing click; the
click group is built from the table for everything else.
"""

from __future__ import annotations

import os
import sys

# Not `typing.TYPE_CHECKING`: importing typing is a measurable part of start-up (mypy knows this name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import click

    from ichor.machinery.clientconfig import GlobalOptions

_CLI = "ichor.cli"


class CommandTable:
    """talosctl's sub-commands as data: ``name -> ("module:attribute", one-line help)`` and aliases."""

    def __init__(self) -> None:
        self.lazy: dict[str, tuple[str, str]] = {}
        self.aliases: dict[str, str] = {}
        self.hidden: set[str] = set()

    def add_lazy(
        self, name: str, target: str, short_help: str, aliases: tuple[str, ...] = (), *, hidden: bool = False
    ) -> None:
        """``hidden``: runs but is not listed in help (Talos's deprecated commands)."""
        self.lazy[name] = (target, short_help)
        for alias in aliases:
            self.aliases[alias] = name
        if hidden:
            self.hidden.add(name)

    def short_helps(self) -> list[tuple[str, str]]:
        return [(name, short) for name, (_, short) in self.lazy.items() if name not in self.hidden]


def __getattr__(name: str) -> Any:
    # GlobalOptions lives in the machinery; it is re-exported here (callers import it from the CLI)
    # without importing it, and what it pulls in, on every start.
    if name == "GlobalOptions":
        from ichor.machinery.clientconfig import GlobalOptions

        return GlobalOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# flag spelling -> (attribute, is a comma-separated list)
_GLOBAL_FLAGS: dict[str, tuple[str, bool]] = {
    "--talosconfig": ("talosconfig", False),
    "--context": ("context", False),
    "-e": ("endpoints", True),
    "--endpoints": ("endpoints", True),
    "-n": ("nodes", True),
    "--nodes": ("nodes", True),
    "--cluster": ("cluster", False),
}


def extract_global_options(argv: list[str]) -> tuple[GlobalOptions, list[str]]:
    """Pull the persistent flags out of ``argv`` wherever they stand (before a ``--``)."""
    import click

    from ichor.machinery.clientconfig import GlobalOptions

    opts = GlobalOptions()
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        name, eq, inline = arg.partition("=")
        if name in _GLOBAL_FLAGS:
            if eq:
                value = inline
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                raise click.UsageError(f"flag needs an argument: {name}")
            attr, is_list = _GLOBAL_FLAGS[name]
            if is_list:
                getattr(opts, attr).extend(v.strip() for v in value.split(",") if v.strip())
            else:
                setattr(opts, attr, value)
        else:
            rest.append(arg)
        i += 1
    return opts, rest


ROOT_HELP = """A CLI for out-of-band management of Kubernetes nodes created by Talos (Ichor).

\b
Global flags (accepted anywhere on the command line):
  --talosconfig PATH    path to the Talos configuration file (default
                        $TALOSCONFIG, $XDG_CONFIG_HOME/talos/config.yaml,
                        then ~/.talos/config)
  --context NAME        context to be used in command
  -e, --endpoints LIST  override default endpoints in Talos configuration
  -n, --nodes LIST      target the specified nodes
  --cluster NAME        cluster to connect to if a proxy endpoint is used
"""


cli = CommandTable()
cli.add_lazy("gen", f"{_CLI}._gen:gen", "Generate CAs, certificates, and private keys")
cli.add_lazy("version", f"{_CLI}._version:version", "Prints the version")
cli.add_lazy("validate", f"{_CLI}._validate:validate", "Validate config")
cli.add_lazy(
    "machineconfig", f"{_CLI}._machineconfig:machineconfig", "Machine config related commands", ("mc",)
)
cli.add_lazy("config", f"{_CLI}._config:config", "Manage the client configuration file (talosconfig)")
cli.add_lazy("image", f"{_CLI}._image:image", "Manage CRI container images")
cli.add_lazy("images", f"{_CLI}._image:images", "List the default images used by Talos", hidden=True)
cli.add_lazy("cluster", f"{_CLI}._cluster:cluster", "A collection of commands for managing local clusters")
cli.add_lazy("get", f"{_CLI}._get:get", "Get a specific resource or list of resources", ("g",))
_NODE = f"{_CLI}._node_basic"
_NODE_INFO = f"{_CLI}._node_info"
cli.add_lazy("apply-config", f"{_NODE}:apply_config", "Apply a new configuration to a node", ("apply",))
cli.add_lazy(
    "service",
    f"{_NODE}:service",
    "Retrieve the state of a service (or all services), control service state",
    ("services",),
)
cli.add_lazy("logs", f"{_NODE_INFO}:logs", "Retrieve logs for a service")
cli.add_lazy("dmesg", f"{_NODE_INFO}:dmesg", "Retrieve kernel logs")
cli.add_lazy("list", f"{_NODE_INFO}:list_", "Retrieve a directory listing", ("ls",))
cli.add_lazy("read", f"{_NODE_INFO}:read", "Read a file on the machine", ("cat",))
cli.add_lazy("mounts", f"{_NODE_INFO}:mounts", "List mounts")
cli.add_lazy("memory", f"{_NODE_INFO}:memory", "Show memory usage", ("free",))
cli.add_lazy("processes", f"{_NODE_INFO}:processes", "List running processes", ("ps",))
cli.add_lazy("reboot", f"{_NODE}:reboot", "Reboot a node")
cli.add_lazy("shutdown", f"{_NODE}:shutdown", "Shutdown a node")
cli.add_lazy("reset", f"{_NODE}:reset", "Reset a node")
cli.add_lazy("disks", f"{_CLI}._node_more:disks", "Get the list of disks from /sys/block on the machine")
cli.add_lazy("events", f"{_CLI}._node_more:events", "Stream runtime events")
cli.add_lazy("copy", f"{_CLI}._node_more:copy", "Copy data out from the node", ("cp",))
cli.add_lazy("etcd", f"{_CLI}._etcd:etcd", "Manage etcd")
cli.add_lazy("bootstrap", f"{_CLI}._bootstrap:bootstrap", "Bootstrap the etcd cluster on the specified node.")
cli.add_lazy("kubeconfig", f"{_CLI}._kubeconfig:kubeconfig", "Download the admin kubeconfig from the node")
cli.add_lazy("health", f"{_CLI}._health:health", "Check cluster health")
cli.add_lazy("inspect", f"{_CLI}._inspect:inspect", "Inspect internals of Talos")
cli.add_lazy("why", f"{_CLI}._why:why", "Explain why a service, resource or health stage is not up (Ichor)")
cli.add_lazy("edit", f"{_CLI}._edit:edit", "Edit a resource from the default editor.")
cli.add_lazy("patch", f"{_CLI}._patch:patch", "Update field(s) of a resource using a JSON patch.")
cli.add_lazy("netstat", f"{_CLI}._netstat:netstat", "Show network connections and sockets", ("ss",))
cli.add_lazy("pcap", f"{_CLI}._pcap:pcap", "Capture the network packets from the node")
cli.add_lazy("stats", f"{_CLI}._netstat:stats", "Get container stats")
cli.add_lazy("cgroups", f"{_CLI}._netstat:cgroups", "Retrieve cgroups usage information", ("cg",))
cli.add_lazy("containers", f"{_CLI}._containers:containers", "List containers", ("c",))
cli.add_lazy("restart", f"{_CLI}._containers:restart", "Restart a process")
cli.add_lazy("support", f"{_CLI}._support:support", "Dump debug information about the cluster")
cli.add_lazy(
    "completion", f"{_CLI}._completion:completion", "Output shell completion code for the specified shell"
)
_OPS = f"{_CLI}._node_ops"
cli.add_lazy("usage", f"{_OPS}:usage", "Retrieve a disk usage", ("du",))
cli.add_lazy("time", f"{_OPS}:time_", "Gets current server time")
cli.add_lazy("upgrade", f"{_OPS}:upgrade", "Upgrade Talos on the target node")
cli.add_lazy("rollback", f"{_OPS}:rollback", "Rollback a node to the previous installation")
cli.add_lazy("meta", f"{_OPS}:meta", "Write and delete keys in the META partition")
cli.add_lazy("inject", f"{_CLI}._inject:inject", "Inject Talos API resources into Kubernetes manifests")
cli.add_lazy("rotate-ca", f"{_CLI}._rotate_ca:rotate_ca", "Rotate cluster CAs (Talos and Kubernetes APIs).")
cli.add_lazy(
    "upgrade-k8s",
    f"{_CLI}._upgrade_k8s:upgrade_k8s",
    "Upgrade Kubernetes control plane in the Talos cluster.",
)
_OLD = f"{_CLI}._deprecated"
cli.add_lazy("crashdump", f"{_OLD}:crashdump", "Dump debug information about the cluster", hidden=True)
cli.add_lazy("interfaces", f"{_OLD}:interfaces", "List network interfaces", hidden=True)
cli.add_lazy("routes", f"{_OLD}:routes", "List network routes", ("route",), hidden=True)
cli.add_lazy("dashboard", f"{_CLI}._dashboard:dashboard", "Cluster dashboard with real-time metrics")


def root_group() -> click.Group:
    """The click group of every sub-command in :data:`cli` (built on each call; cheap)."""
    from ichor.cli._lazy import LazyGroup

    group = LazyGroup(
        name="talosctl", help=ROOT_HELP, context_settings={"help_option_names": ["-h", "--help"]}
    )
    for name, (target, short_help) in cli.lazy.items():
        aliases = tuple(a for a, n in cli.aliases.items() if n == name)
        group.add_lazy(name, target, short_help, aliases, hidden=name in cli.hidden)
    return group


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``talosctl`` console script."""
    from ichor.cli import _fast

    args = list(sys.argv[1:] if argv is None else argv)
    if "_TALOSCTL_COMPLETE" in os.environ:  # a TAB from `talosctl completion`'s script
        import ichor.cli._completion  # noqa: F401
    elif _fast.answer(args, ROOT_HELP, cli.short_helps()):
        sys.exit(0)
    from ichor.cli._errors import run_with_error_edge

    sys.exit(run_with_error_edge(lambda: _invoke(args), debug=bool(os.environ.get("ICHOR_DEBUG"))))


def _invoke(args: list[str]) -> int:
    opts, rest = extract_global_options(args)
    return int(root_group().main(rest, prog_name="talosctl", obj=opts, standalone_mode=False) or 0)
