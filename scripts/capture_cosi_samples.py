"""Record a real node's resources as the samples ``tests/test_resource_protos.py`` encodes.

Creates a process cluster (one control plane, one worker) in a throwaway HOME, reads every resource
of every registered type from both nodes with Ichor's ``talosctl get -o yaml`` (default namespace,
plus ``network-config`` for the network types), keeps one resource per (type, namespace) that has
the most to show, destroys the cluster and writes ``tests/data/cosi_samples.yaml``. Types no
process node fills (the kubelet's, the CRI's) are added by hand in the test. Run it holding the
heavy lock: ``flock /tmp/ichor-heavy.lock python scripts/capture_cosi_samples.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from ichor.machinery import proc  # noqa: E402
from ichor.machinery.yamlio import dump_documents, from_plain, load_documents, to_plain  # noqa: E402

OUT = ROOT / "tests" / "data" / "cosi_samples.yaml"


def _talosctl(home: Path, *args: str, timeout: float = 300) -> proc.Completed:
    env = {"HOME": str(home), "TALOSCONFIG": str(home / ".talos/config"), "PYTHONPATH": str(ROOT / "src")}
    return proc.run([sys.executable, "-m", "ichor", *args], env=env, cwd=home, check=False, timeout=timeout)


def _size(value: Any) -> int:
    return len(json.dumps(value, default=str))


def capture(home: Path, nodes: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """One sample per (type, namespace) from ``nodes``: the resource with the most to show."""
    rds = _talosctl(home, "-n", nodes[0], "get", "rd", "-o", "json")
    types = sorted({json.loads(line)["spec"]["type"] for line in _json_lines(rds.stdout)})
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for rtype in types:
        namespaces = [""] + (["network-config"] if rtype.endswith(".net.talos.dev") else [])
        for node in nodes:
            for ns in namespaces:
                extra = ["--namespace", ns] if ns else []
                got = _talosctl(home, "-n", node, "get", rtype, *extra, "-o", "yaml")
                if got.exit_code != 0 or not got.stdout.strip():
                    print(f"{node} {rtype} {ns or '-'}: exit {got.exit_code} {got.stderr.strip()[-200:]}")
                    continue
                for doc in load_documents(got.stdout, source=rtype):
                    plain = to_plain(doc)
                    meta, spec = plain["metadata"], plain["spec"]
                    key = (meta["type"], meta["namespace"])
                    sample = {"type": meta["type"], "namespace": meta["namespace"], "id": meta["id"],
                              "spec": spec}  # fmt: skip
                    if key not in best or _size(spec) > _size(best[key]["spec"]):
                        best[key] = sample
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cidr", default="127.77.0.0/24")
    parser.add_argument(
        "--home", type=Path, help="read a running cluster of this HOME instead of creating one"
    )
    args = parser.parse_args(argv)
    prefix = args.cidr.rsplit(".", 1)[0]
    nodes = [f"{prefix}.2", f"{prefix}.3"]
    if args.home is not None:
        best = capture(args.home, nodes)
    else:
        home = Path(tempfile.mkdtemp(prefix="ichor-cosi-samples-"))
        created = _talosctl(home, "cluster", "create", "--provisioner", "process", "--name", "cosi-samples",
                            "--workers", "1", "--cidr", args.cidr, timeout=900)  # fmt: skip
        try:
            if created.exit_code != 0:
                raise SystemExit(f"cluster create failed:\n{created.stdout}\n{created.stderr}")
            best = capture(home, nodes)
        finally:
            _talosctl(home, "cluster", "destroy", "--name", "cosi-samples", timeout=300)
    OUT.write_text(dump_documents([from_plain(best[k]) for k in sorted(best)]))
    print(f"wrote {len(best)} samples of {len({k[0] for k in best})} types to {OUT}")
    return 0


def _json_lines(text: str) -> list[str]:
    # `get -o json` prints one JSON document per resource, possibly pretty-printed.
    decoder = json.JSONDecoder()
    out, index = [], 0
    text = text.strip()
    while index < len(text):
        value, end = decoder.raw_decode(text, index)
        out.append(json.dumps(value))
        index = end
        while index < len(text) and text[index].isspace():
            index += 1
    return out


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
