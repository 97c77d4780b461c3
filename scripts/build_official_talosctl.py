"""Build the official talosctl v1.7.6 and Talos's own COSI decoder check from Talos's source.

    python scripts/build_official_talosctl.py [--talos <a siderolabs/talos v1.7.6 tree>]

Without ``--talos`` the tree comes from the Go module proxy, as every other Go source here does:
``github.com/siderolabs/talos@v1.7.6`` with its nested module ``pkg/machinery@v1.7.6`` put back
where Talos's ``replace`` expects it (a module's zip leaves nested modules out). Writes
``~/.cache/ichor/talosctl-official/talosctl`` and ``talos-cosi-check`` (``scripts/talos_cosi_check.go``
built inside the tree), which the ``official`` tests drive against Ichor clusters; does nothing when
both are there and the check's source is the one they were built from (``--force`` builds again). The first build took 135 s on two cores here (its modules downloaded), a rebuild 18 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from ichor.machinery import proc  # noqa: E402

CACHE = Path.home() / ".cache" / "ichor" / "talosctl-official"


TALOS_MODULE = "github.com/siderolabs/talos"
TALOS_TAG = "v1.7.6"


def _module_dir(module: str, env: dict[str, str]) -> Path:
    """``module@TALOS_TAG`` downloaded through the Go module proxy; its directory in the module cache."""
    done = proc.run(["go", "mod", "download", "-json", f"{module}@{TALOS_TAG}"], env=env, timeout=1800)
    return Path(json.loads(done.stdout)["Dir"])


def talos_tree(work: Path, env: dict[str, str]) -> Path:
    """A writable Talos v1.7.6 tree from the module proxy, ``pkg/machinery`` included."""
    tree = work / f"talos-{TALOS_TAG}"
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(_module_dir(TALOS_MODULE, env), tree)
    shutil.copytree(_module_dir(f"{TALOS_MODULE}/pkg/machinery", env), tree / "pkg" / "machinery")
    for path in (tree, *tree.rglob("*")):
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)  # the module cache's files are read-only
    return tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--talos", type=Path, help="a Talos v1.7.6 source tree (default: the module proxy's)")
    parser.add_argument("--force", action="store_true", help="build again even if both binaries are there")
    args = parser.parse_args(argv)
    check_source = ROOT / "scripts" / "talos_cosi_check.go"
    source_sum = hashlib.sha256(check_source.read_bytes()).hexdigest()
    built_sum = CACHE / "talos-cosi-check.sha256"  # the check's source it was built from
    built = (CACHE / "talosctl").is_file() and (CACHE / "talos-cosi-check").is_file()
    if not args.force and built and built_sum.is_file() and built_sum.read_text() == source_sum:
        print(f"the official talosctl {TALOS_TAG} is built ({CACHE})")
        return 0
    CACHE.mkdir(parents=True, exist_ok=True)
    # GOWORK=off: the tree's go.work names hack/ modules a module zip does not carry
    env = {"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOWORK": "off"}
    made_tree = args.talos is None
    if made_tree:
        print(f"fetching {TALOS_MODULE}@{TALOS_TAG} from the Go module proxy", flush=True)
        args.talos = talos_tree(CACHE, env)
    print(f"building the official talosctl {TALOS_TAG} (first run: 2-5 min on 2 cores)", flush=True)
    tag = "-X github.com/siderolabs/talos/pkg/machinery/version.Tag=v1.7.6"
    proc.run(["go", "build", "-o", str(CACHE / "talosctl"), "-ldflags", tag, "./cmd/talosctl"],
             cwd=args.talos, env=env, timeout=3600)  # fmt: skip
    check = args.talos / "hack" / "ichor-cosicheck" / "main.go"
    check.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(check_source, check)
    proc.run(["go", "build", "-o", str(CACHE / "talos-cosi-check"), "./hack/ichor-cosicheck"],
             cwd=args.talos, env=env, timeout=3600)  # fmt: skip
    built_sum.write_text(source_sum)
    if made_tree:
        shutil.rmtree(args.talos)  # Go's caches keep what a rebuild needs
    print(f"built {CACHE / 'talosctl'} and {CACHE / 'talos-cosi-check'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
