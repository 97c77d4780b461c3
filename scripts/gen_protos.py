"""Regenerate the Python protobuf and grpclib stubs in ``src/ichor/api/gen/`` from ``src/ichor/api/protos/``.

How to regenerate (after editing a ``.proto``)::

    .venv/bin/pip install -e '.[test]'        # brings grpcio-tools (dev/test only)
    .venv/bin/python scripts/gen_protos.py    # rewrites src/ichor/api/gen/
    .venv/bin/pytest tests/test_api_protos.py # the no-diff test must pass; commit protos + gen together

``--out DIR`` writes the tree somewhere else (the test uses it to check that the checked-in code
is what the protos produce).

What it does: runs grpcio-tools' bundled ``protoc`` with ``--python_out``, ``--pyi_out`` and
grpclib's ``protoc-gen-grpclib_python`` plugin, then rewrites the generated absolute imports
(``from common import common_pb2``, ``import machine.machine_pb2``) into the ``ichor.api.gen``
package, drops the empty ``*_grpc.py`` files of protos without services, and writes an
``__init__.py`` per directory. ``google/rpc/status.proto`` is only an import here: at runtime
``google.rpc.status_pb2`` comes from googleapis-common-protos, so it is not generated.

What it must not do: depend on anything but its inputs. Inputs are sorted, nothing time- or
host-dependent is written, so a rerun gives byte-identical output. The output does depend on the
tool versions: grpcio-tools is pinned exactly in the ``test`` extra (its bundled protoc sets the
gencode version, which the protobuf runtime checks on import), and grpclib's plugin is the one of
the installed runtime grpclib.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "src" / "ichor" / "api" / "protos"
GEN_DIR = ROOT / "src" / "ichor" / "api" / "gen"
GEN_PACKAGE = "ichor.api.gen"

_MARKER = "Generated protobuf and grpclib stubs of the Talos 1.7 API; do not edit."
_INIT_DOC = f'"""{_MARKER}"""\n'
_ROOT_INIT = f'''"""{_MARKER}

Produced by ``scripts/gen_protos.py`` from ``src/ichor/api/protos/`` (see its docstring to
regenerate). Import modules directly, e.g. ``from ichor.api.gen.machine import machine_pb2``.
"""
'''


def _proto_files(proto_dir: Path) -> list[str]:
    return sorted(p.relative_to(proto_dir).as_posix() for p in proto_dir.rglob("*.proto"))


def _status_proto_include(tmp: Path) -> Path:
    """An include root holding only google/rpc/status.proto, taken from googleapis-common-protos.

    Only that one file is exposed so nothing else from site-packages can be imported by accident.
    """
    from google.rpc import status_pb2

    source = Path(status_pb2.__file__).with_name("status.proto")
    if not source.is_file():
        raise SystemExit(f"googleapis-common-protos does not ship {source}; reinstall it")
    target = tmp / "include" / "google" / "rpc" / "status.proto"
    target.parent.mkdir(parents=True)
    shutil.copyfile(source, target)
    return tmp / "include"


def _grpclib_plugin() -> Path:
    plugin = Path(sys.executable).parent / "protoc-gen-grpclib_python"
    found = plugin if plugin.is_file() else shutil.which("protoc-gen-grpclib_python")
    if not found:
        raise SystemExit("protoc-gen-grpclib_python not found; install grpclib into this environment")
    return Path(found)


def _run_protoc(proto_dir: Path, include: Path, raw_out: Path, files: list[str]) -> None:
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"--proto_path={proto_dir}",
        f"--proto_path={include}",
        f"--proto_path={well_known}",
        f"--plugin=protoc-gen-grpclib_python={_grpclib_plugin()}",
        f"--python_out={raw_out}",
        f"--pyi_out={raw_out}",
        f"--grpclib_python_out={raw_out}",
        *files,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed (see its messages above)")


def _rewrite_imports(text: str, packages: list[str]) -> str:
    """Point the generated absolute imports of our own protos into ``ichor.api.gen``."""
    alternatives = "|".join(re.escape(p) for p in packages)
    # protoc's style: `from common import common_pb2 as ...`
    text = re.sub(
        rf"^from ({alternatives})((?:\.\w+)*) import ", rf"from {GEN_PACKAGE}.\1\2 import ", text, flags=re.M
    )
    # grpclib's style: `import machine.machine_pb2`, then `machine.machine_pb2.Version` in the code.
    # The lookbehind keeps already-qualified names and '/machine.MachineService/...' paths alone.
    return re.sub(rf"(?<![\w./])({alternatives})\.(\w+_pb2)\b", rf"{GEN_PACKAGE}.\1.\2", text)


def _check_replaceable(out: Path) -> None:
    """Refuse to delete a directory that is not an earlier output of this script."""
    if not any(out.iterdir()):
        return
    init = out / "__init__.py"
    if not (init.is_file() and init.read_text().startswith(f'"""{_MARKER}')):
        raise SystemExit(f"{out} exists and is not a generated tree; refusing to replace it")


def generate(out: Path, proto_dir: Path = PROTO_DIR) -> list[Path]:
    """Write the generated package tree to ``out`` (replacing it) and return the files written."""
    files = _proto_files(proto_dir)
    if not files:
        raise SystemExit(f"no .proto files under {proto_dir}")
    packages = sorted({f.split("/", 1)[0] for f in files if "/" in f})
    with tempfile.TemporaryDirectory(prefix="ichor-gen-protos-") as tmp_name:
        tmp = Path(tmp_name)
        raw_out = tmp / "out"
        raw_out.mkdir()
        _run_protoc(proto_dir, _status_proto_include(tmp), raw_out, files)

        staged = tmp / "staged"
        staged.mkdir()
        (staged / "__init__.py").write_text(_ROOT_INIT)
        for source in sorted(raw_out.rglob("*")):
            if not source.is_file():
                continue
            rel = source.relative_to(raw_out)
            text = source.read_text()
            # grpclib writes a module even for protos without services; it holds only a header.
            if rel.name.endswith("_grpc.py") and "class " not in text:
                continue
            target = staged / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_rewrite_imports(text, packages))
        for directory in sorted(p for p in staged.rglob("*") if p.is_dir()):
            (directory / "__init__.py").write_text(_INIT_DOC)

        if out.exists():
            _check_replaceable(out)
            shutil.rmtree(out)
        shutil.copytree(staged, out)
    return sorted(p for p in out.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=GEN_DIR, help="output directory (default: %(default)s)")
    args = parser.parse_args(argv)
    written = generate(args.out.resolve())
    print(f"wrote {len(written)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
