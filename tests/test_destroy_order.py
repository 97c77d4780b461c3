"""``cluster destroy``'s order against a fake host: what the cluster holds on the host goes before
the record that names it, the blackhole route last; a rerun after an interrupted destroy removes
whatever is left, from the record or, without it, from the cluster's name; and destroy never says
"destroyed" while something is left."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ichor.machinery.errors import MachineryError
from ichor.provision import _network as net
from ichor.provision import _teardown
from ichor.provision._record import ClusterRecord, NodeRecord

NAME = "c"
CIDR = "10.9.9.0/24"
EXTRA = "10.9.8.0/24"
BRIDGE, EXTRA_BRIDGE = net.bridge_name(NAME), net.extra_bridge_name(NAME)
TABLE = net.firewall_table(BRIDGE)
NODE = f"{NAME}-controlplane-1"
VETH, VETH2 = net.veth_name(NAME, NODE), net.veth_name(NAME, NODE, 2)


@dataclass
class FakeHost:
    """The host's parts of one cluster as sets; every removal is logged with whether the cluster's
    record existed at that moment."""

    record: Path
    cgroups: set[Path] = field(default_factory=set)
    links: dict[str, str] = field(default_factory=dict)
    """Link name to the network of its address ("" for a veth)."""
    firewalls: set[str] = field(default_factory=set)
    blackholes: set[str] = field(default_factory=set)
    removed: list[tuple[str, bool]] = field(default_factory=list)
    stuck: set[str] = field(default_factory=set)
    """Parts whose removal silently does nothing."""
    on_remove: dict[str, object] = field(default_factory=dict)

    def _log(self, part: str) -> bool:
        action = self.on_remove.pop(part, None)
        if isinstance(action, BaseException):
            raise action
        if callable(action):
            action()
        self.removed.append((part, self.record.exists()))
        return part not in self.stuck

    def cgroup_dirs(self, cluster: str) -> list[Path]:
        return [Path(f"/cg/{h}/ichor/{cluster}") for h in ("cpu", "memory")]

    def cgroup_exists(self, directory: Path) -> bool:
        return directory in self.cgroups

    def remove_cgroups(self, dirs: list[Path]) -> list[str]:
        for d in dirs:
            if self._log(str(d)):
                self.cgroups.discard(d)
        return []

    def link_exists(self, name: str) -> bool:
        return name in self.links

    def link_network(self, name: str) -> str:
        return self.links[name]

    def delete_link(self, name: str) -> bool:
        if name not in self.links:
            return False
        if self._log(name):
            del self.links[name]
        return True

    def has_firewall(self, table: str) -> bool:
        return table in self.firewalls

    def remove_firewall(self, table: str) -> bool:
        if table not in self.firewalls:
            return False
        if self._log(table):
            self.firewalls.discard(table)
        return True

    def has_blackhole(self, cidr: str) -> bool:
        return cidr in self.blackholes

    def remove_blackhole(self, cidr: str) -> None:
        if cidr in self.blackholes and self._log(cidr):
            self.blackholes.discard(cidr)

    def everything(self) -> list[object]:
        return [*self.cgroups, *self.links, *self.firewalls, *self.blackholes]


def _cluster(tmp_path: Path) -> tuple[Path, FakeHost]:
    """A recorded two-network container cluster whose nodes have stopped, and the host holding all of it."""
    state_dir = (tmp_path / "clusters" / NAME).resolve()
    state_dir.mkdir(parents=True)
    (state_dir / NODE).mkdir()
    (state_dir / NODE / "etcd").write_text("data")
    (state_dir / f"{NODE}.launcher.log").write_text("")
    cgroups = FakeHost(Path()).cgroup_dirs(NAME)
    ClusterRecord(
        name=NAME, cidr=CIDR, state_dir=str(state_dir), provisioner="container", extra_cidr=EXTRA,
        nodes=[NodeRecord(NODE, "controlplane", "10.9.9.2", str(state_dir / NODE))],
        blackhole=CIDR, extra_blackhole=EXTRA, bridge=BRIDGE, extra_bridge=EXTRA_BRIDGE, firewall=TABLE,
        cgroups=[str(d) for d in cgroups],
    ).save()  # fmt: skip
    host = FakeHost(
        state_dir / "cluster.yaml",
        cgroups=set(cgroups),
        links={VETH: "", VETH2: "", BRIDGE: CIDR, EXTRA_BRIDGE: EXTRA},
        firewalls={TABLE},
        blackholes={CIDR, EXTRA},
    )
    return state_dir, host


def _destroy(tmp_path: Path, host: FakeHost, lines: list[str]) -> None:
    _teardown.destroy(tmp_path / "clusters", NAME, progress=lines.append, host=host)


def test_destroy_removes_the_host_parts_before_the_record_and_the_blackhole_routes_last(
    tmp_path: Path,
) -> None:
    state_dir, host = _cluster(tmp_path)
    lines: list[str] = []
    _destroy(tmp_path, host, lines)
    order = [part for part, _ in host.removed]
    assert order == [
        "/cg/cpu/ichor/c",
        "/cg/memory/ichor/c",
        VETH,
        VETH2,
        EXTRA_BRIDGE,
        BRIDGE,
        TABLE,
        EXTRA,
        CIDR,
    ]
    assert all(record_there for _, record_there in host.removed), host.removed
    assert host.everything() == [] and not state_dir.exists()
    assert lines[-3:] == [
        f"removed the blackhole route for {EXTRA} (--extra-cidr)",
        f"removed the blackhole route for {CIDR}",
        f"destroyed cluster {NAME!r}",
    ]


def test_a_destroy_killed_midway_is_completed_by_a_rerun(tmp_path: Path) -> None:
    state_dir, host = _cluster(tmp_path)
    host.on_remove[BRIDGE] = SystemExit(1)  # as if killed right after the extra bridge went
    with pytest.raises(SystemExit):
        _destroy(tmp_path, host, [])
    assert (state_dir / "cluster.yaml").exists() and host.blackholes == {CIDR, EXTRA}
    lines: list[str] = []
    _destroy(tmp_path, host, lines)
    assert host.everything() == [] and not state_dir.exists()
    assert [part for part, _ in host.removed][-2:] == [EXTRA, CIDR]
    assert lines[-1] == f"destroyed cluster {NAME!r}"


def test_a_rerun_without_the_record_removes_what_the_clusters_name_derives(tmp_path: Path) -> None:
    # What an interrupted destroy of an older Ichor left: the record gone, the host's parts not.
    state_dir, host = _cluster(tmp_path)
    (state_dir / "cluster.yaml").unlink()
    lines: list[str] = []
    _destroy(tmp_path, host, lines)
    assert host.everything() == [] and not state_dir.exists()
    order = [part for part, _ in host.removed]
    assert order[-2:] == [EXTRA, CIDR] and order.index(TABLE) < order.index(EXTRA), order
    assert order.index(VETH) < order.index(BRIDGE), order
    assert lines[-1] == f"destroyed cluster {NAME!r}"


def test_destroy_never_says_destroyed_while_something_is_left(tmp_path: Path) -> None:
    state_dir, host = _cluster(tmp_path)
    host.stuck = {TABLE}
    lines: list[str] = []
    with pytest.raises(MachineryError) as failed:
        _destroy(tmp_path, host, lines)
    assert f"nftables table inet {TABLE} (nft delete table inet {TABLE})" in str(failed.value)
    assert "kept its state directory" in str(failed.value)
    assert f"talosctl cluster destroy --name {NAME} --state {tmp_path / 'clusters'}" in (
        failed.value.hint or ""
    )
    assert not any(line.startswith("destroyed") for line in lines), lines
    assert (state_dir / "cluster.yaml").exists() and host.firewalls == {TABLE}
    host.stuck = set()
    _destroy(tmp_path, host, lines)
    assert host.everything() == [] and not state_dir.exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_destroy_lets_it_finish_and_a_second_stops_it_for_a_rerun(
    tmp_path: Path, signum: int
) -> None:
    state_dir, host = _cluster(tmp_path)
    host.on_remove[VETH] = lambda: os.kill(os.getpid(), signum)
    before = signal.getsignal(signum)
    lines: list[str] = []
    _destroy(tmp_path, host, lines)
    assert any(
        line.startswith(f"{signal.Signals(signum).name}: finishing the destroy first") for line in lines
    )
    assert host.everything() == [] and not state_dir.exists() and lines[-1] == f"destroyed cluster {NAME!r}"
    assert signal.getsignal(signum) == before  # the handlers destroy found are back

    state_dir, host = _cluster(tmp_path / "again")
    twice = [lambda: os.kill(os.getpid(), signum), lambda: os.kill(os.getpid(), signum)]
    host.on_remove[VETH], host.on_remove[TABLE] = twice
    with pytest.raises(KeyboardInterrupt):
        _destroy(tmp_path / "again", host, [])
    assert (state_dir / "cluster.yaml").exists() and CIDR in host.blackholes
    _destroy(tmp_path / "again", host, lines)
    assert host.everything() == [] and not state_dir.exists()
