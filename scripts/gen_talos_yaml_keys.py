"""Regenerate ``tests/data/talos_resource_yaml_keys.txt``: every YAML key Talos's resource types use.

Go's YAML is case-sensitive (``serviceHostDNSAddress`` is not ``serviceHostDnsAddress``) while the
protobuf form matches fields by number, so a key that only differs in case passes every protobuf
check and still reaches Talos's clients as an unknown field. This collects the ``yaml:"<key>"`` tags
of Talos's resource definitions (``pkg/machinery/resources``) from a Talos v1.7.6 source tree::

    python scripts/gen_talos_yaml_keys.py --talos ~/.cache/ichor/talosctl-official/src

One key a line, sorted, so a rerun on the same tree gives the same file.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "talos_resource_yaml_keys.txt"
_TAG = re.compile(r'yaml:"([A-Za-z0-9_-]+)')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--talos", type=Path, required=True, help="a Talos v1.7.6 source tree")
    args = parser.parse_args(argv)
    keys = {
        key
        for path in sorted((args.talos / "pkg" / "machinery" / "resources").rglob("*.go"))
        if not path.name.endswith("_test.go")
        for key in _TAG.findall(path.read_text())
    }
    OUT.write_text("".join(f"{key}\n" for key in sorted(keys)))
    print(f"wrote {len(keys)} keys to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
