"""``talosctl completion bash|zsh|fish``: the shell script that completes talosctl's commands and flags.

The scripts are click's: on TAB the shell runs ``talosctl`` again with ``_TALOSCTL_COMPLETE`` set
and the words typed so far. talosctl's persistent flags (``-n``, ``-e``, ``--talosconfig``, ...)
are taken off the command line before click parses it (see :mod:`ichor.cli._root`), so the
completion classes here drop them from the typed words the same way; without that,
``talosctl -n 10.5.0.2 get <TAB>`` would complete nothing. The root module imports this module
only when the completion variable is set, so normal start-up does not pay for it.
"""

from __future__ import annotations

import click
from click.shell_completion import (
    BashComplete,
    FishComplete,
    ShellComplete,
    ZshComplete,
    add_completion_class,
)

from ichor.cli._root import _GLOBAL_FLAGS

COMPLETE_VAR = "_TALOSCTL_COMPLETE"

USAGE = """Output shell completion code for the specified shell (bash, fish or zsh).
The shell code must be evaluated to provide interactive
completion of talosctl commands.  This can be done by sourcing it from
the .bash_profile.

\b
Note for zsh users: [1] zsh completions are only supported in versions of zsh >= 5.2

\b
Examples:
  # Installing bash completion on Linux
  ## If bash-completion is not installed on Linux, please install the 'bash-completion' package
  ## via your distribution's package manager.
  ## Load the talosctl completion code for bash into the current shell
  source <(talosctl completion bash)
  ## Write bash completion code to a file and source it from .bash_profile
  talosctl completion bash > ~/.talos/completion.bash.inc
  printf "
  # talosctl shell completion
  source '$HOME/.talos/completion.bash.inc'
  " >> $HOME/.bash_profile
  source $HOME/.bash_profile
  # Load the talosctl completion code for fish[1] into the current shell
  talosctl completion fish | source
  # Load the talosctl completion code for zsh[1] into the current shell
  source <(talosctl completion zsh)
  # Set the talosctl completion code for zsh[1] to autoload on startup
  talosctl completion zsh > "${fpath[1]}/_talosctl"
"""


def strip_global_flags(words: list[str]) -> list[str]:
    """The typed words without talosctl's persistent flags and their values (which click does not know)."""
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        name, eq, _ = word.partition("=")
        if name in _GLOBAL_FLAGS:
            skip = not eq
            continue
        out.append(word)
    return out


class _StripGlobals(ShellComplete):
    def get_completion_args(self) -> tuple[list[str], str]:
        args, incomplete = super().get_completion_args()
        return strip_global_flags(args), incomplete


class _Bash(_StripGlobals, BashComplete):
    pass


class _Zsh(_StripGlobals, ZshComplete):
    pass


class _Fish(_StripGlobals, FishComplete):
    pass


SHELLS: dict[str, type[ShellComplete]] = {"bash": _Bash, "zsh": _Zsh, "fish": _Fish}

for _cls in SHELLS.values():
    add_completion_class(_cls)


@click.command("completion", help=USAGE, short_help="Output shell completion code for the specified shell")
@click.argument("shell", type=click.Choice(sorted(SHELLS)), metavar="SHELL")
def completion(shell: str) -> None:
    from ichor.cli._root import root_group

    script = SHELLS[shell](root_group(), {}, "talosctl", COMPLETE_VAR).source()
    click.echo(script)
