"""The one exception tree of :mod:`ichor.machinery`.

::

    MachineryError                  anything the machinery refuses; carries an optional ``hint``
    ├── YAMLError                   a document that is not readable YAML
    │   └── InputLimitError         input over a limit of :mod:`ichor.machinery.limits` (size, aliases, depth)
    ├── ConfigError                 machine configuration problems
    │   ├── ConfigDecodeError       unknown kind, missing kind, unknown keys, wrong types, duplicates
    │   └── ConfigValidationError   a decoded config that breaks Talos's validation rules
    ├── PatchError                  a patch that cannot be read or applied
    ├── DurationError               text that is not a Go duration (goduration)
    ├── CronError                   text that is not a cron schedule (cron)
    ├── SecretsError                a secrets bundle that cannot be generated, read or reused
    ├── PKIError                    certificate / key material that cannot be parsed or issued
    ├── ClientConfigError           talosconfig problems (missing file, unknown context, ...)
    ├── ProcessError                a child process that failed, timed out or could not start (proc)
    ├── ExtensionError              a system extension (manifest.yaml + rootfs/) that cannot be used
    ├── ExtensionServiceError       an extension service spec (/usr/local/etc/containers/*.yaml) Talos refuses
    ├── SubnetError                 a subnet list that cannot be parsed or picks no address (subnets)
    ├── OutputExistsError           refusing to overwrite a file without ``--force``
    ├── KubeSpanError               a MAC or key KubeSpan cannot use (kubespan)
    └── DiskError                   the OS disk: partition tables, META, boot files, slots, reset, installer
        ├── PartitionTableError     a GPT that cannot be read, or a layout that does not fit the disk (blockdev)
        ├── MetaError               META that cannot be read or written; "meta write failed" when full (meta)
        ├── BootloaderError         a grub.cfg/grubenv that cannot be rendered, read or rewritten in place
        ├── SlotError               an A/B transition refused: upgrade during a trial, rollback to nothing (slots)
        ├── ResetError              reset options Talos 1.7 refuses, with its texts (reset)
        ├── InstallError            the installer's disk step could not finish (installer)
        └── KexecError              the next boot's kernel could not be loaded for kexec (kexec)

Each error's ``str()`` is the message a user sees after ``error:``; ``hint`` says how to fix it.
"""

from __future__ import annotations

__all__ = [
    "BootloaderError",
    "ClientConfigError",
    "ConfigDecodeError",
    "ConfigError",
    "ConfigValidationError",
    "CronError",
    "DiskError",
    "DurationError",
    "ExtensionError",
    "ExtensionServiceError",
    "InputLimitError",
    "InstallError",
    "KexecError",
    "KubeSpanError",
    "MachineryError",
    "MetaError",
    "OutputExistsError",
    "PKIError",
    "PartitionTableError",
    "PatchError",
    "ProcessError",
    "ResetError",
    "SecretsError",
    "SlotError",
    "SubnetError",
    "YAMLError",
]


class MachineryError(Exception):
    """Base of every error the machinery raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class KubeSpanError(MachineryError):
    """A MAC or key KubeSpan cannot use."""


class YAMLError(MachineryError):
    """Text that is not valid YAML (or not the shape a document must have)."""


class InputLimitError(YAMLError):
    """Input refused for being over one of :data:`ichor.machinery.limits.INPUT_LIMITS` (YAML, patch copies).

    ``limit`` is the :class:`~ichor.machinery.limits.InputLimits` field that was exceeded.
    """

    def __init__(self, message: str, *, limit: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.limit = limit


class ConfigError(MachineryError):
    """Base for machine configuration errors."""


class ConfigDecodeError(ConfigError):
    """A document that cannot be decoded into a known config kind."""


class ConfigValidationError(ConfigError):
    """A decoded config that fails validation; ``problems`` lists every finding."""

    def __init__(self, message: str, problems: list[str], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.problems = problems


class PatchError(MachineryError):
    """A config patch that cannot be parsed or applied."""


class DurationError(MachineryError):
    """Text that is not a Go duration (``30s``, ``1h30m``, ``500ms``)."""


class CronError(MachineryError):
    """A cron schedule that cannot be parsed or never runs (:mod:`ichor.machinery.cron`)."""


class SecretsError(MachineryError):
    """A secrets bundle problem."""


class PKIError(MachineryError):
    """Certificate or key material that is malformed or cannot be issued."""


class ClientConfigError(MachineryError):
    """A talosconfig problem."""


class ProcessError(MachineryError):
    """A child process failed: ``exit_code`` (None: never started or timed out) and ``stderr_tail``."""

    def __init__(
        self,
        message: str,
        *,
        command: list[str],
        exit_code: int | None,
        stderr_tail: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.command = command
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail


class ExtensionError(MachineryError):
    """A system extension directory that is not one Talos would install (manifest, rootfs, paths)."""


class ExtensionServiceError(MachineryError):
    """An extension service spec that Talos would not load; ``problems`` lists every finding."""

    def __init__(self, message: str, problems: list[str], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.problems = problems


class SubnetError(MachineryError):
    """A subnet list (``advertisedSubnets``, ``validSubnets``) that cannot be parsed or picks no address."""


class OutputExistsError(MachineryError):
    """An output file exists and ``--force`` was not given."""


class DiskError(MachineryError):
    """Base for the OS disk: partition tables, META, boot files, A/B slots, reset and the installer."""


class PartitionTableError(DiskError):
    """A GPT that cannot be read (bad signature or CRC) or a partition layout that does not fit."""


class MetaError(DiskError):
    """The META partition cannot be read or written; ``meta write failed`` when a value does not fit."""


class BootloaderError(DiskError):
    """A grub.cfg or grubenv that cannot be rendered, parsed or rewritten in place."""


class SlotError(DiskError):
    """An A/B slot transition that is refused (upgrade while a trial is pending, rollback to an empty slot)."""


class ResetError(DiskError):
    """Reset options that Talos 1.7 refuses (wipe mode and label combinations), with Talos's texts."""


class InstallError(DiskError):
    """The installer's disk step could not finish (device too small, a tool failed, a file missing)."""


class KexecError(DiskError):
    """The next boot's kernel could not be loaded for kexec (the reboot goes through the firmware)."""
