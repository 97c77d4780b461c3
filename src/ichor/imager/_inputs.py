"""Pinned inputs: Debian packages by exact version and PyPI wheels by sha256, fetched into the cache.

A deb is fetched with ``apt-get download <package>=<version>`` and accepted only when its sha256 is
the one the apt index lists for that version; a wheel with ``pip download --require-hashes``
against :file:`pins/wheels.lock`. Nothing here decides what goes into which layer.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ichor.imager import InputError
from ichor.machinery import proc
from ichor.machinery.errors import ProcessError

__all__ = [
    "PINS",
    "Deb",
    "Wheel",
    "apt_records",
    "fetch_deb",
    "fetch_debs",
    "fetch_wheels",
    "read_deb_pins",
    "read_wheel_pins",
    "sha256_file",
]

PINS = Path(__file__).parent / "pins"

# The guest's Python: Debian bookworm's CPython 3.11 on x86_64 glibc 2.36.
WHEEL_PLATFORMS = (
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux1_x86_64",
    "any",
)


@dataclass(frozen=True)
class Deb:
    """One pinned Debian package (``debs.lock``: ``<package> <version> <layer>``)."""

    package: str
    version: str
    layer: str

    @property
    def spec(self) -> str:
        return f"{self.package}={self.version}"


@dataclass(frozen=True)
class Wheel:
    """One pinned wheel (``wheels.lock``: ``name==version --hash=sha256:<hex>``)."""

    name: str
    version: str
    sha256: str

    @property
    def line(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _lines(path: Path) -> list[tuple[int, str]]:
    try:
        text = path.read_text()
    except OSError as err:
        raise InputError(f"cannot read the pin file {path}: {err.strerror}") from None
    return [
        (n, line.strip())
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


def read_deb_pins(path: Path | None = None) -> list[Deb]:
    path = path or PINS / "debs.lock"
    debs = []
    for n, line in _lines(path):
        fields = line.split()
        if len(fields) != 3:
            raise InputError(f"{path}:{n}: expected '<package> <version> <layer>', got {line!r}")
        debs.append(Deb(*fields))
    return debs


_WHEEL_LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)(?P<rest>.*)$")
_HASH = re.compile(r"--hash=sha256:(?P<hex>[0-9a-f]{64})\b")


def read_wheel_pins(path: Path | None = None) -> list[Wheel]:
    """The lock file's wheels; a line without an exact version or a sha256 is refused, naming it."""
    path = path or PINS / "wheels.lock"
    wheels = []
    for n, line in _lines(path):
        match = _WHEEL_LINE.match(line)
        if match is None:
            raise InputError(
                f"{path}:{n}: wheel {line.split()[0]!r} is not pinned to one version",
                hint="pin it as name==version --hash=sha256:<hex>",
            )
        digest = _HASH.search(match["rest"])
        if digest is None:
            raise InputError(
                f"{path}:{n}: wheel {match['name']}=={match['version']} has no --hash=sha256",
                hint="every wheel of the image is pinned by hash; add the sha256 of its .whl",
            )
        wheels.append(Wheel(match["name"], match["version"], digest["hex"]))
    return wheels


def _records(text: str) -> dict[tuple[str, str], dict[str, str]]:
    """``apt-cache show`` output -> ``{(package, version): {field: value}}``."""
    records: dict[tuple[str, str], dict[str, str]] = {}
    for block in text.split("\n\n"):
        record: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep and not line.startswith(" "):
                record[key] = value.strip()
        if "Package" in record and "Version" in record:
            records.setdefault((record["Package"], record["Version"]), record)
    return records


def _missing(deb: Deb) -> InputError:
    madison = proc.run(["apt-cache", "madison", deb.package], check=False).stdout
    available = sorted({line.split("|")[1].strip() for line in madison.splitlines() if "|" in line})
    return InputError(
        f"Debian package {deb.spec} is not in the apt index"
        + (f" (available: {', '.join(available)})" if available else " (no version of it is)"),
        hint="run apt-get update, or pin a version the index has in ichor/imager/pins/debs.lock",
    )


def apt_records(debs: list[Deb]) -> dict[Deb, dict[str, str]]:
    """The apt index's record (Filename, SHA256, ...) of exactly each pinned version, in one query."""
    if not debs:
        return {}
    try:
        shown = proc.run(["apt-cache", "show", *(d.spec for d in debs)], check=False, timeout=300)
    except ProcessError as err:
        raise InputError(f"cannot ask apt about the pinned packages: {err}") from None
    records = _records(shown.stdout)
    out = {}
    for deb in debs:
        record = records.get((deb.package, deb.version))
        if record is None:
            raise _missing(deb)
        if "SHA256" not in record or "Filename" not in record:
            raise InputError(f"the apt index lists no SHA256 for {deb.spec}")
        out[deb] = record
    return out


def fetch_debs(records: dict[Deb, dict[str, str]], cache: Path) -> dict[Deb, tuple[Path, str]]:
    """The verified ``.deb`` file of each pin in ``cache/debs`` and its sha256; what is missing is
    downloaded in one ``apt-get download`` and kept only if its sha256 is the index's."""
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    out: dict[Deb, tuple[Path, str]] = {}
    missing = []
    for deb, record in records.items():
        target = debs / Path(record["Filename"]).name
        if target.is_file() and sha256_file(target) == record["SHA256"]:
            out[deb] = (target, record["SHA256"])
        else:
            missing.append(deb)
    if not missing:
        return out
    with tempfile.TemporaryDirectory(dir=debs, prefix=".download-") as scratch:
        try:
            proc.run(
                ["apt-get", "download", "-q", *(d.spec for d in missing)], cwd=Path(scratch), timeout=900
            )
        except ProcessError as err:
            names = ", ".join(d.spec for d in missing)
            raise InputError(f"cannot download the Debian packages {names}: {err}") from None
        got = {p.name: p for p in Path(scratch).iterdir() if p.suffix == ".deb"}
        for deb in missing:
            record = records[deb]
            name = Path(record["Filename"]).name
            # apt-get names it <package>_<version, ':' escaped>_<arch>.deb: match by package.
            candidates = [p for n, p in got.items() if n.split("_", 1)[0] == deb.package]
            if len(candidates) != 1:
                raise InputError(f"apt-get download {deb.spec} gave {len(candidates)} files, expected one")
            have = sha256_file(candidates[0])
            if have != record["SHA256"]:
                raise InputError(
                    f"Debian package {deb.spec}: sha256 {have} does not match the apt index's {record['SHA256']}"
                )
            os.replace(candidates[0], debs / name)
            out[deb] = (debs / name, have)
    return out


def fetch_deb(deb: Deb, cache: Path, record: dict[str, str] | None = None) -> tuple[Path, str]:
    """One pin's verified ``.deb`` (see :func:`fetch_debs`)."""
    return fetch_debs({deb: record or apt_records([deb])[deb]}, cache)[deb]


def fetch_wheels(wheels: list[Wheel], cache: Path, lock: Path) -> list[Path]:
    """Every pinned wheel in ``cache/wheels``, hash-checked; downloads only what is missing."""
    directory = cache / "wheels"
    directory.mkdir(parents=True, exist_ok=True)
    by_hash = {sha256_file(p): p for p in directory.glob("*.whl")}
    missing = [w for w in wheels if w.sha256 not in by_hash]
    if missing:
        with tempfile.TemporaryDirectory(dir=directory, prefix=".download-") as scratch:
            requirements = Path(scratch) / "requirements.txt"
            requirements.write_text("".join(w.line + "\n" for w in missing))
            platforms = [arg for p in WHEEL_PLATFORMS for arg in ("--platform", p)]
            try:
                proc.run(
                    [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                     "--no-deps", "--only-binary=:all:", "--require-hashes", "--implementation", "cp",
                     "--python-version", "3.11", "--abi", "cp311", "--abi", "abi3", "--abi", "none",
                     *platforms, "--dest", scratch, "--requirement", str(requirements)],
                    timeout=900,
                )  # fmt: skip
            except ProcessError as err:
                raise InputError(f"cannot fetch the wheels pinned in {lock}: {err}") from None
            for path in Path(scratch).glob("*.whl"):
                digest = sha256_file(path)
                os.replace(path, directory / path.name)
                by_hash[digest] = directory / path.name
    out = []
    for wheel in wheels:
        if wheel.sha256 not in by_hash:
            raise InputError(f"wheel {wheel.name}=={wheel.version}: no file with sha256 {wheel.sha256}")
        out.append(by_hash[wheel.sha256])
    return out
