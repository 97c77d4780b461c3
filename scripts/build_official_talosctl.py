"""Build the official talosctl v1.7.6 and Talos's own COSI decoder check from Talos's source.

    python scripts/build_official_talosctl.py --talos <a siderolabs/talos v1.7.6 tree>

(``git archive v1.7.6`` of siderolabs/talos; Go modules come from the module proxy). Writes
``~/.cache/ichor/talosctl-official/talosctl`` and ``talos-cosi-check`` (``scripts/talos_cosi_check.go``
built inside the tree), which ``tests/test_e2e_official_talosctl.py`` drives against an Ichor
cluster. The first build takes many minutes on two cores; later ones reuse Go's cache.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from ichor.machinery import proc  # noqa: E402

CACHE = Path.home() / ".cache" / "ichor" / "talosctl-official"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--talos", type=Path, required=True, help="a Talos v1.7.6 source tree")
    args = parser.parse_args(argv)
    CACHE.mkdir(parents=True, exist_ok=True)
    env = {"GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    tag = "-X github.com/siderolabs/talos/pkg/machinery/version.Tag=v1.7.6"
    proc.run(["go", "build", "-o", str(CACHE / "talosctl"), "-ldflags", tag, "./cmd/talosctl"],
             cwd=args.talos, env=env, timeout=3600)  # fmt: skip
    check = args.talos / "hack" / "ichor-cosicheck" / "main.go"
    check.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "scripts" / "talos_cosi_check.go", check)
    proc.run(["go", "build", "-o", str(CACHE / "talos-cosi-check"), "./hack/ichor-cosicheck"],
             cwd=args.talos, env=env, timeout=3600)  # fmt: skip
    print(f"built {CACHE / 'talosctl'} and {CACHE / 'talos-cosi-check'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
