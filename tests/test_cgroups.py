"""A container node's own cgroup subtree: which hierarchies, where, made, joined and removed."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from ichor.machinery.errors import MachineryError
from ichor.provision import _cgroups as cgroups

MOUNTINFO = """\
30 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:4 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 cgroup2 rw,nsdelegate
32 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid shared:6 - cgroup cgroup rw,xattr,release_agent=/lib/x,name=systemd
35 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct
36 30 0:32 / /sys/fs/cgroup/memory rw,nosuid shared:10 - cgroup cgroup rw,memory
37 30 0:33 /outer /sys/fs/cgroup/pids rw,nosuid shared:11 - cgroup cgroup rw,pids
38 30 0:33 / /mnt/again rw,nosuid shared:11 - cgroup cgroup rw,memory
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
"""
PROC_CGROUP = """\
9:name=systemd:/
8:net_cls,net_prio:/
5:pids:/outer/job
4:memory:/sandbox/job1
2:cpuacct,cpu:/
0::/
"""


def test_hierarchies_are_the_mounted_ones_with_the_callers_cgroup_in_each() -> None:
    found = {h.name: h for h in cgroups.hierarchies(MOUNTINFO, PROC_CGROUP)}
    # net_cls is not mounted: neither joined nor shown to the node. memory's second mount is ignored.
    assert sorted(found) == ["cpu,cpuacct", "memory", "pids", "systemd", "unified"]
    assert found["unified"].version == 2 and found["unified"].own == ""
    assert found["systemd"].options == "name=systemd"
    assert found["cpu,cpuacct"].options == "cpu,cpuacct"
    assert found["memory"].own == "sandbox/job1"
    assert found["pids"].own == "job"  # the mount shows /outer as its root

    dirs = cgroups.node_dirs(found.values(), "c1", "c1-worker-1")
    assert Path("/sys/fs/cgroup/memory/sandbox/job1/ichor/c1/c1-worker-1") in dirs
    assert Path("/sys/fs/cgroup/unified/ichor/c1/c1-worker-1") in dirs
    assert Path("/sys/fs/cgroup/cpu,cpuacct/ichor/c1") in cgroups.cluster_dirs(found.values(), "c1")


def test_a_hierarchy_mounted_outside_our_cgroup_is_left_out() -> None:
    found = cgroups.hierarchies(MOUNTINFO, "5:pids:/elsewhere\n")
    assert found == []


@pytest.mark.parametrize(("cluster", "node"), [("", "n"), ("c", "../x"), ("c", ".."), ("a/b", "n")])
def test_a_name_that_cannot_be_a_directory_is_refused(cluster: str, node: str) -> None:
    with pytest.raises(MachineryError, match="cannot name a cgroup") as raised:
        cgroups.node_dirs(cgroups.hierarchies(MOUNTINFO, PROC_CGROUP), cluster, node)
    assert "--name" in (raised.value.hint or "")


def test_a_hierarchy_that_is_not_there_says_which(tmp_path: Path) -> None:
    gone = cgroups.Hierarchy(tmp_path / "not-mounted", "pids", "")
    with pytest.raises(MachineryError, match=r"cannot make cgroup .*not-mounted/ichor"):
        cgroups.create([gone], "c", "n")


def test_a_directory_that_will_not_go_is_named(tmp_path: Path) -> None:
    stuck = tmp_path / "ichor/c/n"
    stuck.mkdir(parents=True)
    (stuck / "not-a-cgroup-file").write_text("")
    with pytest.raises(MachineryError, match=f"cannot remove cgroup {stuck}") as raised:
        cgroups.remove([tmp_path / "ichor/c"], sleep=lambda _: None)
    assert "cgroup.procs" in (raised.value.hint or "")


def test_leftover_tasks_are_killed_by_pid_before_removal(tmp_path: Path) -> None:
    node = tmp_path / "ichor/c/n"
    node.mkdir(parents=True)
    (node / "cgroup.procs").write_text("4242\n")
    killed: list[int] = []

    def kill(pid: int, sig: int) -> None:
        killed.append(pid)
        (node / "cgroup.procs").unlink()  # the task has gone: what the kernel shows next

    done = cgroups.remove([tmp_path / "ichor/c"], kill=kill, sleep=lambda _: None)
    assert killed == [4242]
    assert done == [f"killed leftover PID(s) 4242 in {node}"]
    assert not (tmp_path / "ichor").exists()  # the shared parent too, once empty


REAL = pytest.mark.skipif(
    os.geteuid() != 0 or not cgroups.current(), reason="needs root and mounted cgroup hierarchies"
)


@REAL
def test_real_hierarchies_made_joined_and_removed_with_a_leftover_task() -> None:
    found = cgroups.current()
    cluster = f"t{uuid.uuid4().hex[:8]}"
    made = cgroups.create(found, cluster, "node-1")
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        # cpuset takes a task only once its cpus and mems were copied down.
        cgroups.join(made, sleeper.pid)
        for directory in made:
            assert str(sleeper.pid) in (directory / "cgroup.procs").read_text().split()
        done = cgroups.remove(cgroups.cluster_dirs(found, cluster))
        assert sleeper.wait(timeout=10) == -9
        assert any(str(sleeper.pid) in line for line in done), done
        for directory in cgroups.cluster_dirs(found, cluster):
            assert not directory.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
        cgroups.remove(cgroups.cluster_dirs(found, cluster))


def test_destroy_removes_the_network_even_when_a_cgroup_will_not_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ichor.provision import _container
    from ichor.provision._record import ClusterRecord

    stuck = tmp_path / "ichor/c/n"
    stuck.mkdir(parents=True)
    (stuck / "not-a-cgroup-file").write_text("")
    removed: list[str] = []
    monkeypatch.setattr(_container.net, "delete_link", lambda name: removed.append(name) or True)
    monkeypatch.setattr(_container.net, "remove_firewall", lambda name: removed.append(name) or True)
    monkeypatch.setattr(_container.net, "remove_blackhole", lambda cidr: removed.append(cidr))
    record = ClusterRecord(name="c", cidr="10.9.9.0/24", state_dir=str(tmp_path), provisioner="container",
                           bridge="talosx", firewall="ichor-talosx", blackhole="10.9.9.0/24",
                           cgroups=[str(tmp_path / "ichor/c")])  # fmt: skip
    said: list[str] = []
    with pytest.raises(MachineryError, match="cannot remove cgroup"):
        _container.remove_network(record, said.append)
    assert removed == ["talosx", "ichor-talosx", "10.9.9.0/24"]  # the blackhole last
    assert said[-1] == "removed the blackhole route for 10.9.9.0/24"
