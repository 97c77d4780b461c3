"""The suite's tiers, enforced: imported by ``conftest.py`` for its hooks.

- ``pytest`` with no arguments is the **fast tier**: every test not marked ``e2e``, ``fuzz``, ``vm``
  or ``slow`` (run.sh runs the slow ones with the end-to-end tier), on two xdist workers (``--dist loadfile``: a file's module fixtures stay on one worker).
  Naming files or a ``-m`` expression runs what was asked, serially, unless ``-n`` says otherwise.
- As root each fast-tier worker runs in a network namespace of its own (``unshare(CLONE_NEWNET)``,
  loopback up): the fast tests bind fixed loopback addresses, and two workers would otherwise meet on
  them. Nothing a worker sends can leave the machine: its namespace has no route but loopback.
- ``-n 3 --dist loadgroup`` (run.sh's end-to-end tier, VM tests included) runs each file as one unit,
  the files on the shared Kubernetes cluster (:data:`K8S_ORDER`) as one unit, first, and the files
  that boot VMs (:data:`VM_FILES`) as one unit, second, so one VM runs at a time: one worker creates
  the Kubernetes cluster and runs its files, one boots the VMs, one runs the end-to-end files, which
  wait on their clusters far more than they compute. (:func:`pytest_xdist_make_scheduler` does the grouping: xdist 3.8's own
  ``xdist_group`` marks are lost under pytest 9.2, whose node ids no longer read ``item._nodeid``.) Each
  cluster has a name, a random CIDR and a state directory of its own, and the leftovers checks look
  only at their own cluster's processes, links, routes, tables and cgroups, so the two never meet.
  The shared cluster is destroyed after its last test, not at the worker's end
  (:data:`EARLY_CLOSE`).
- Files say what they cost: a test marked ``e2e``/``k8s``/``vm`` lives in a ``test_e2e_*`` file and
  every test there is marked ``e2e``; ``fuzz`` tests live in ``test_fuzz_*`` files. A misplaced test
  fails collection.
- A fast-tier test that takes over ``ICHOR_FAST_TEST_LIMIT`` seconds (5; setup + call + teardown)
  fails the run naming it: a slow test must carry a marker and live with its kind.
- The tests on the session's shared Kubernetes cluster run last, in :data:`K8S_ORDER`.
- Under ``CI=true`` as root a skipped test fails the run (a skip there means a missing install step),
  unless its reason names a device this machine lacks (``needs a device:``).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import socket
import struct
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

FAST_EXCLUDED = ("e2e", "fuzz", "vm", "slow", "official")
"""Markers that keep a test out of the fast tier."""

K8S_ORDER = (
    "test_e2e_official_container.py",
    "test_e2e_kubernetes.py",
    "test_e2e_k8s_workloads.py",
    "test_e2e_k8s_health.py",
    "test_e2e_k8s_upgrade_checks.py",
    "test_e2e_k8s_troubleshooting.py",
    "test_e2e_k8s_faults.py",
    "test_e2e_rotate_ca.py",
)
"""The files sharing the session's Kubernetes cluster (``k8s_cluster``), in the order they run, after
every other test (the cluster goes when the session ends): the official talosctl's sweep first (it
reads the boot's events before the others add theirs), the ones that read it next, then the
ones that break it on purpose and repair it (a rejected apiserver flag, a rebooted worker, a wiped
control plane recovered from a snapshot), and last ``rotate-ca``, which changes both CAs of the cluster
for good (it leaves the new talosconfig and kubeconfig where the others look)."""

EARLY_CLOSE: dict[str, Callable[[], None]] = {}
"""Shared fixtures' early teardowns, by fixture name (conftest registers them): called after the
last test that uses the fixture when the next test does not, so a worker that goes on to other files
does not keep a whole Kubernetes cluster running beside them."""

VM_FILES = (
    "test_e2e_installer_boot.py",
    "test_e2e_metal_image_boot.py",
    "test_e2e_metal_install.py",
    "test_e2e_qemu_cluster.py",
    "test_e2e_vm_extensions.py",
    "test_e2e_vm_upgrade.py",
)
"""The files whose tests boot virtual machines (marked ``vm``): one unit of work under ``--dist
loadgroup``, so their VMs boot one at a time (TCG on 2 cores), but for :data:`VM_ALONE`."""

VM_ALONE = ("test_e2e_vm_upgrade.py",)
"""VM files long enough to be a unit of their own (``vm-long``: the upgrade scenario, ~16 min alone,
one VM rebooted a dozen times), beside the ``vm`` unit: at most two VMs at once, as the machine
allows, so that neither unit is the tier's tail by itself."""

LONG_FIRST = ("test_e2e_upgrade_k8s.py",)
"""Files of the remaining units that go out right after the VM units, before the others (which
keep their order): the longest one (its own 1+1 Kubernetes cluster, ~2 min) would otherwise start
last and run alone at the tier's end (1 min 46 s alone in a run that took 17 min 39 s)."""

DEVICE_SKIP = "needs a device:"
"""A skip reason starting with this names hardware this machine lacks: allowed under CI."""

_CLONE_NEWNET = 0x40000000
_SIOCSIFFLAGS = 0x8914
_IFF_UP, _IFF_LOOPBACK, _IFF_RUNNING = 0x1, 0x8, 0x40

_over_limit: list[tuple[str, float]] = []
_skipped: list[tuple[str, str]] = []
_durations: dict[str, float] = {}
_spans: dict[str, list[Any]] = {}
"""nodeid -> [xdist worker, first phase's start, last phase's stop] (epoch seconds), for the timeline."""

TIMELINE_ENV = "ICHOR_TIMELINE"
"""Where the controller writes each test's worker, unit and span as JSON lines when the session ends
(run.sh sets it per tier; ``scripts/test_summary.py`` prints the units per worker from it)."""


def fast_tier(config: pytest.Config) -> bool:
    """No ``-m`` expression and no paths named: the default ``pytest`` run."""
    return not config.option.markexpr and config.args_source != pytest.Config.ArgsSource.ARGS


def _fast_limit() -> float:
    return float(os.environ.get("ICHOR_FAST_TEST_LIMIT", "5"))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): two workers for the fast tier as root, none otherwise."""
    if not fast_tier(config) or os.geteuid() != 0:
        return 0
    return max(1, min(2, len(os.sched_getaffinity(0))))


def _own_network_namespace() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) for an xdist worker")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = _IFF_UP | _IFF_LOOPBACK | _IFF_RUNNING
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist's controller tells each worker whether it runs the fast tier (own network namespace)."""
    node.workerinput["ichor_fast_tier"] = fast_tier(node.config)


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get("ichor_fast_tier") and os.geteuid() == 0:
        _own_network_namespace()


def _grouped(config: pytest.Config) -> bool:
    """``--dist loadgroup``: asked on the controller, or the worker's copy of it."""
    return config.getoption("dist", "no") == "loadgroup" or bool(getattr(config.option, "loadgroup", False))


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to under ``--dist loadgroup``: ``k8s`` for the files on the
    shared Kubernetes cluster, ``vm-long`` and ``vm`` for the files that boot VMs, else its file."""
    path = nodeid.split("::", 1)[0]
    name = Path(path).name
    if name in K8S_ORDER:
        return "k8s"
    if name in VM_FILES:
        return "vm-long" if name in VM_ALONE else "vm"
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup``: xdist's scope scheduler over :func:`unit_of`'s units."""
    if config.getoption("dist", "no") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return Units(config, log)  # type: ignore[arg-type]


def grouped_rank(name: str, k8s_rank: int = -1) -> int:
    """Where file ``name``'s tests go under ``--dist loadgroup`` (run.sh's ``--no-loadscope-reorder``
    keeps this order): the Kubernetes unit first (``k8s_rank``: the file's place in :data:`K8S_ORDER`,
    -1 for a file not on the shared cluster), then the VM units, the longest first, then
    :data:`LONG_FIRST`, then the rest (a stable sort keeps their order)."""
    if k8s_rank >= 0:
        return k8s_rank
    rank = 1 if name in VM_ALONE else 2 if name in VM_FILES else 3 if name in LONG_FIRST else 4
    return len(K8S_ORDER) + rank


def _kinds(item: pytest.Item) -> set[str]:
    return {m.name for m in item.iter_markers()}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    misplaced = []
    for item in items:
        kinds, name = _kinds(item), Path(str(item.fspath)).name
        if name.startswith("test_e2e_") != ("e2e" in kinds):
            misplaced.append(f"{item.nodeid}: e2e tests live in test_e2e_* files, and only they")
        if "k8s_cluster" in getattr(item, "fixturenames", ()) and "k8s" not in kinds:
            misplaced.append(f"{item.nodeid}: a test on the shared Kubernetes cluster is marked k8s")
        if "k8s_cluster" in getattr(item, "fixturenames", ()) and name not in K8S_ORDER:
            misplaced.append(
                f"{item.nodeid}: a file on the shared Kubernetes cluster is listed in tiers.K8S_ORDER"
            )
        if ("vm" in kinds) != (name in VM_FILES) and name.startswith("test_e2e_"):
            misplaced.append(f"{item.nodeid}: vm tests live in the files tiers.VM_FILES lists, and only they")
        if {"k8s", "vm"} & kinds and "e2e" not in kinds:
            misplaced.append(f"{item.nodeid}: a k8s or vm test is an e2e test too")
        if name.startswith("test_fuzz_") != ("fuzz" in kinds):
            misplaced.append(f"{item.nodeid}: fuzz tests live in test_fuzz_* files, and only they")
    if misplaced:
        raise pytest.UsageError("tests in the wrong tier:\n  " + "\n  ".join(misplaced))

    def k8s_rank(item: pytest.Item) -> int:
        if "k8s_cluster" not in getattr(item, "fixturenames", ()):
            return -1
        name = Path(str(item.fspath)).name
        return K8S_ORDER.index(name) if name in K8S_ORDER else len(K8S_ORDER)

    if _grouped(config):
        items.sort(key=lambda item: grouped_rank(Path(str(item.fspath)).name, k8s_rank(item)))
    else:
        items.sort(key=k8s_rank)  # stable: everything else keeps its order
    if fast_tier(config):
        kept = [i for i in items if not _kinds(i) & set(FAST_EXCLUDED)]
        dropped = [i for i in items if _kinds(i) & set(FAST_EXCLUDED)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    yield
    for name in [n for n in EARLY_CLOSE if n in getattr(item, "fixturenames", ())]:
        if nextitem is None or name not in getattr(nextitem, "fixturenames", ()):
            EARLY_CLOSE.pop(name)()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    span = _spans.setdefault(report.nodeid, [str(getattr(gateway, "id", "main")), report.start, report.stop])
    span[1], span[2] = min(span[1], report.start), max(span[2], report.stop)
    if report.skipped and report.when in ("setup", "call"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append((report.nodeid, reason.removeprefix("Skipped: ")))
    if report.when == "teardown":
        kinds = set(report.keywords)
        if not kinds & set(FAST_EXCLUDED) and _durations[report.nodeid] > _fast_limit() > 0:
            _over_limit.append((report.nodeid, _durations[report.nodeid]))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput"):
        return
    if os.environ.get(TIMELINE_ENV):
        with open(os.environ[TIMELINE_ENV], "w") as out:
            for nodeid, (worker, start, stop) in sorted(_spans.items(), key=lambda kv: kv[1][1]):
                record = {
                    "nodeid": nodeid,
                    "unit": unit_of(nodeid),
                    "worker": worker,
                    "start": start,
                    "stop": stop,
                }
                out.write(json.dumps(record) + "\n")
    failures = []
    if _over_limit:
        failures.append(
            f"fast-tier tests over {_fast_limit():g} s (mark them e2e/slow and move them to their kind's "
            "file, or make them faster):\n"
            + "\n".join(f"  {nodeid}: {took:.1f} s" for nodeid, took in sorted(_over_limit))
        )
    if os.environ.get("CI") == "true" and os.geteuid() == 0:
        bad = [(n, r) for n, r in _skipped if not r.startswith(DEVICE_SKIP)]
        if bad:
            failures.append(
                "skipped under CI as root (a missing install step?):\n"
                + "\n".join(f"  {nodeid}: {reason}" for nodeid, reason in bad)
            )
    if failures:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        for text in failures:
            if reporter is not None:
                reporter.write_line("tiers: " + text, red=True, bold=True)
        if session.exitstatus == 0:
            session.exitstatus = 1
