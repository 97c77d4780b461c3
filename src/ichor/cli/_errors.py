"""The error edge: the one place exceptions become messages and exit codes.

A user sees ``error: <what went wrong>`` and, where we know the fix, ``hint: <what to do>``.
A stack trace is printed only when ``ICHOR_DEBUG=1``.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

import click

from ichor.machinery.errors import ConfigValidationError, MachineryError

EXIT_ERROR = 1
EXIT_USAGE = 2


def _print_error(message: str, hint: str | None) -> None:
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)


def run_with_error_edge(fn: Callable[[], int], *, debug: bool = False) -> int:
    try:
        return fn()
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return EXIT_ERROR
    except click.UsageError as exc:
        if debug:
            traceback.print_exc()
        exc.show()
        return exc.exit_code
    except click.ClickException as exc:
        if debug:
            traceback.print_exc()
        _print_error(exc.format_message(), None)
        return exc.exit_code
    except ConfigValidationError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"error: {exc}", err=True)
        for problem in exc.problems:
            click.echo(f"\t* {problem}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        return EXIT_ERROR
    except MachineryError as exc:
        if debug:
            traceback.print_exc()
        _print_error(str(exc), exc.hint)
        return EXIT_ERROR
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except BrokenPipeError:
        # `talosctl ... | head`: the reader left; that is not our error.
        sys.stderr.close()
        return 0
