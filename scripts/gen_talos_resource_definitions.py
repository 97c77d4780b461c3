"""Regenerate ``tests/data/talos_resource_definitions.json``: every resource type Talos 1.7 defines,
with its explicit aliases, print columns and sensitivity, as its ``ResourceDefinition()`` says.

``talosctl get <alias>`` must resolve and print as against a Talos node, so
``tests/test_resource_definitions_talos.py`` compares Ichor's registered types with this file. It
reads the ``ResourceDefinitionSpec`` literals of Talos's resource definitions
(``pkg/machinery/resources``) from a Talos v1.7.6 source tree::

    python scripts/gen_talos_resource_definitions.py --talos ~/.cache/ichor/talosctl-official/src

Sorted by type, so a rerun on the same tree gives the same file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "talos_resource_definitions.json"
_SPEC = re.compile(r"ResourceDefinitionSpec\{(.*?)\n\t\}\n", re.S)
_ALIASES = re.compile(r"Aliases:\s+\[\]resource\.Type\{([^}]*)\}")
_COLUMN = re.compile(r'Name:\s+"([^"]+)",\s*JSONPath:\s+(`[^`]*`|"(?:[^"\\]|\\.)*")')


def _definitions(source: str) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for match in _SPEC.finditer(source):
        body = match.group(1)
        const = re.search(r"Type:\s+(\w+)", body)
        if const is None:
            continue
        name = re.search(re.escape(const.group(1)) + r'\s*=\s*resource\.Type\("([^"]+)"\)', source)
        if name is None:
            continue
        aliases = _ALIASES.search(body)
        out[name.group(1)] = {
            "aliases": re.findall(r'"([^"]+)"', aliases.group(1)) if aliases else [],
            "columns": [
                [n, json.loads(p) if p.startswith('"') else p[1:-1]] for n, p in _COLUMN.findall(body)
            ],
            "sensitive": "meta.Sensitive" in body,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--talos", type=Path, required=True, help="a Talos v1.7.6 source tree")
    args = parser.parse_args(argv)
    found: dict[str, dict[str, object]] = {}
    for path in sorted((args.talos / "pkg" / "machinery" / "resources").glob("*/*.go")):
        if not path.name.endswith("_test.go"):
            found.update(_definitions(path.read_text()))
    if not found:
        print(f"no resource definitions under {args.talos}", file=sys.stderr)
        return 1
    OUT.write_text(json.dumps(dict(sorted(found.items())), indent=1) + "\n")
    print(f"{len(found)} types -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
