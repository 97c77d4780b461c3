"""An image pull through the cluster's mirror (``talosctl image pull``) as a ratio to ``skopeo copy``
of the same image from the same registry, in one run.

One container control plane with ``--with-registry docker.io``. Each run builds a fresh image
(busybox plus ``--padding-mb`` of random bytes, so its layer is new and neither side has any of it
cached) and pushes it to the registry as ``docker.io/library/bench:run-<i>``; then, in alternating
order, ``skopeo copy docker://<gateway>:5000/library/bench:run-<i> oci:<fresh dir>`` from the host
and ``talosctl -n <node> image pull docker.io/library/bench:run-<i>`` (the node's CRI containerd
resolving docker.io through its ``hosts.toml`` mirror, fetching and unpacking). ``talosctl image
ls`` is timed too: the fixed cost of one talosctl round trip (interpreter start, TLS, ``ctr``).
Reported: the medians and the ratio pull / skopeo.

Measured (2 CPUs shared with other helpers' work, 5 runs each):

    padding     talosctl image pull   skopeo copy   ratio   talosctl image ls
    0 (1 MB)    0.46 s                0.06 s        8.2x    0.35 s
    16 MiB      0.81 s                0.18 s        4.4x    0.36 s
    64 MiB      1.74 s                0.59 s        3.0x    0.38 s

For a small image the pull is the fixed cost of one talosctl round trip (``image ls`` alone is
0.35 s: interpreter start, TLS, one ``ctr`` process on the node). Per extra MiB the pull costs 19 ms
and skopeo 8.5 ms (2.3x): containerd writes each layer into its content store and unpacks it again
into a snapshot, skopeo only stores the blob.

Root only (container nodes). The cluster is destroyed in a ``finally``. Run:
``.venv/bin/python benchmarks/images.py [--runs N] [--padding-mb M]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from provisioners import _free_cidr, _talosctl  # this directory's: the same cluster helpers

from ichor.images import ImageSpec, build_layout, busybox_rootfs, parse_reference, push

NAME = "imgbench"


def _timed(run: object) -> float:
    start = time.perf_counter()
    done = run()  # type: ignore[operator]
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(done.args)} failed:\n{done.stdout}{done.stderr}")
    return elapsed


def _publish(work: Path, registry: str, run: int, padding_mb: int) -> str:
    root = busybox_rootfs(work / f"rootfs-{run}")
    (root / "etc/padding").write_bytes(os.urandom(padding_mb << 20) if padding_mb else f"{run}\n".encode())
    built = build_layout(
        root, work / f"layout-{run}", tag=f"run-{run}", spec=ImageSpec(entrypoint=["/bin/sh"])
    )
    name = f"docker.io/library/bench:run-{run}"
    push(built, registry, parse_reference(name))
    return name


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--padding-mb", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ichor-bench-images-") as tmp:
        work = Path(tmp)
        home, state = work / "home", work / "clusters"
        home.mkdir()
        cidr = _free_cidr("container", 0)
        gateway, node = cidr.replace("0/24", "1"), cidr.replace("0/24", "2")
        registry = f"{gateway}:5000"
        try:
            created = _talosctl(home, "cluster", "create", "--provisioner", "container", "--name", NAME,
                                "--state", str(state), "--cidr", cidr, "--workers", "0",
                                "--with-registry", "docker.io", "--wait-timeout", "5m")  # fmt: skip
            if created.returncode != 0:
                raise SystemExit(f"cluster create failed:\n{created.stdout}{created.stderr}")
            samples: dict[str, list[float]] = {
                "talosctl image pull": [],
                "skopeo copy": [],
                "talosctl image ls": [],
            }
            for run in range(args.runs):
                name = _publish(work, registry, run, args.padding_mb)
                source = f"docker://{registry}/{parse_reference(name).repository}:run-{run}"

                def pull(name: str = name) -> subprocess.CompletedProcess[str]:
                    return _talosctl(home, "-n", node, "image", "pull", name)

                def copy(source: str = source, run: int = run) -> subprocess.CompletedProcess[str]:
                    target = f"oci:{work / f'skopeo-{run}'}:bench"
                    return subprocess.run(["skopeo", "copy", "--quiet", "--src-tls-verify=false", source, target],
                                          capture_output=True, text=True, timeout=600)  # fmt: skip

                order = [("talosctl image pull", pull), ("skopeo copy", copy)]
                for label, action in order if run % 2 == 0 else order[::-1]:
                    samples[label].append(_timed(action))
                samples["talosctl image ls"].append(
                    _timed(lambda: _talosctl(home, "-n", node, "image", "ls"))
                )
        finally:
            _talosctl(home, "cluster", "destroy", "--name", NAME, "--state", str(state), "--force")
    medians = {label: statistics.median(values) for label, values in samples.items()}
    print(f"{args.runs} runs, image = busybox + {args.padding_mb} MiB of random bytes, medians:")
    for label, value in medians.items():
        print(f"  {label:22} {value:6.2f} s   (all: {', '.join(f'{v:.2f}' for v in samples[label])})")
    print(
        f"ratio talosctl image pull / skopeo copy: {medians['talosctl image pull'] / medians['skopeo copy']:.1f}x"
    )


if __name__ == "__main__":
    main()
