"""``talosctl stats``: containerd's task metrics read back in Talos's units."""

from __future__ import annotations

import pytest

from ichor.machined.cri import CRIError, parse_metrics

# ``ctr tasks metrics --format json`` on a cgroup v2 node (containerd 1.6's v2 ``Metrics``), trimmed
V2 = (
    '{"pids":{"current":1},"cpu":{"usage_usec":5231,"user_usec":2100,"system_usec":3131},'
    '"memory":{"usage":1245184,"usage_limit":18446744073709551615,"inactive_file":45056,"file":90112}}'
)
V1 = '{"memory":{"usage":{"usage":2097152},"total_inactive_file":1048576},"cpu":{"usage":{"total":77}}}'


def test_v2_metrics_are_memory_less_inactive_file_and_cpu_in_nanoseconds() -> None:
    metrics = parse_metrics(V2)
    assert metrics.memory_usage == 1245184 - 45056
    assert metrics.cpu_usage == 5231 * 1000


def test_v1_metrics_as_talos_reads_them() -> None:
    metrics = parse_metrics(V1)
    assert (metrics.memory_usage, metrics.cpu_usage) == (1048576, 77)


def test_inactive_file_above_usage_shows_zero_not_a_negative() -> None:
    assert parse_metrics('{"memory":{"usage":10,"inactive_file":20}}').memory_usage == 0


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]"])
def test_metrics_ctr_did_not_print_as_json_are_refused(text: str) -> None:
    with pytest.raises(CRIError, match="task metrics"):
        parse_metrics(text)
