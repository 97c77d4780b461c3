"""The suite's own tier rules (tests/tiers.py): how the end-to-end tier splits its work between two
xdist workers, and what collection refuses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tiers import K8S_ORDER, LONG_FIRST, VM_ALONE, VM_FILES, grouped_rank, unit_of

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent


def test_the_kubernetes_files_are_one_unit_the_vm_files_another_and_every_other_file_its_own() -> None:
    units = {unit_of(f"tests/{name}::test_x") for name in K8S_ORDER}
    assert units == {"k8s"}
    assert {unit_of(f"tests/{name}::test_boot") for name in VM_FILES if name not in VM_ALONE} == {"vm"}
    assert {unit_of(f"tests/{name}::test_boot") for name in VM_ALONE} == {"vm-long"}
    assert set(VM_ALONE) < set(VM_FILES)
    assert unit_of("tests/test_e2e_vip.py::test_a[1]") == "tests/test_e2e_vip.py"
    assert unit_of("tests/test_e2e_vip.py::Class::test_b") == "tests/test_e2e_vip.py"


def _suite(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from tiers import (pytest_collection_modifyitems, pytest_configure, pytest_configure_node,
                   pytest_xdist_make_scheduler)
import pytest

@pytest.fixture(scope="session")
def k8s_cluster():
    return "cluster"
"""
    )
    pytester.makeini("[pytest]\nmarkers =\n  e2e\n  k8s\n")
    for name in K8S_ORDER[:3]:
        pytester.makepyfile(
            **{
                name.removesuffix(".py"): "import pytest\npytestmark = [pytest.mark.e2e, pytest.mark.k8s]\n"
                + "".join(f"def test_{i}(k8s_cluster):\n    pass\n" for i in range(3))
            }
        )
    for name in ("test_e2e_one", "test_e2e_two"):
        pytester.makepyfile(
            **{name: "import pytest\npytestmark = pytest.mark.e2e\n" + "def test_a():\n    pass\n" * 1}
        )


@pytest.mark.slow  # two xdist workers in a subprocess: 5-11 s
def test_two_workers_give_the_kubernetes_files_to_one_worker_first(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    result = pytester.runpytest_subprocess(
        "-m", "e2e", "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", "-v"
    )
    result.assert_outcomes(passed=11)
    ran = re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED (\S+)::", result.stdout.str())
    k8s_workers = {worker for worker, path in ran if path in K8S_ORDER}
    assert len(k8s_workers) == 1, ran
    # The Kubernetes unit went out first: its worker's first test is one of its files.
    (worker,) = k8s_workers
    assert next(path for w, path in ran if w == worker) in K8S_ORDER


@pytest.mark.slow  # a pytest subprocess: 3 s at idle
def test_a_test_on_the_shared_cluster_outside_the_listed_files_is_refused(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    pytester.makepyfile(
        test_e2e_stray="import pytest\npytestmark = [pytest.mark.e2e, pytest.mark.k8s]\n"
        "def test_x(k8s_cluster):\n    pass\n"
    )
    result = pytester.runpytest_subprocess("-m", "e2e", "-p", "no:xdist")
    assert "is listed in tiers.K8S_ORDER" in result.stdout.str() + result.stderr.str()
    assert result.ret != 0


def test_the_long_files_go_out_after_the_kubernetes_and_vm_units_before_the_rest() -> None:
    names = [
        "test_e2e_a.py",
        *LONG_FIRST,
        VM_FILES[0],
        *VM_ALONE,
        "test_e2e_b.py",
        K8S_ORDER[1],
        K8S_ORDER[0],
    ]
    ranked = sorted(names, key=lambda n: grouped_rank(n, K8S_ORDER.index(n) if n in K8S_ORDER else -1))
    assert ranked == [
        K8S_ORDER[0],
        K8S_ORDER[1],
        *VM_ALONE,
        VM_FILES[0],
        *LONG_FIRST,
        "test_e2e_a.py",
        "test_e2e_b.py",
    ]
