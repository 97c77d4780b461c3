from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from ichor.machined.platform import Layout


def test_talos_paths_map_into_the_root(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.2")
    assert layout.config_file == tmp_path / "system/state/config.yaml"
    assert layout.path("var/lib/etcd") == tmp_path / "var/lib/etcd"
    assert layout.path("/") == tmp_path
    assert layout.partition("EPHEMERAL") == tmp_path / "var"
    assert layout.talos_path(tmp_path / "var" / "log") == "/var/log"


@pytest.mark.parametrize("bad", ["/../etc/passwd", "/var/../../x", "../x"])
def test_paths_cannot_escape_the_root(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="escapes the node root"):
        Layout(root=tmp_path, address="127.5.0.2").path(bad)


def test_unknown_partition_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="STATE, EPHEMERAL, META"):
        Layout(root=tmp_path, address="127.5.0.2").partition("BOOT")


def test_ensure_creates_private_skeleton(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path / "node", address="127.5.0.2")
    layout.ensure()
    layout.ensure()
    assert layout.machined_socket.parent.is_dir()
    assert (layout.secrets_dir.stat().st_mode & 0o777) == 0o700


def test_long_socket_paths_get_a_short_private_stand_in(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    layout = Layout(root=deep, address="127.5.0.2")
    sock = layout.machined_socket
    assert len(str(sock)) < 100 and sock.name == "machine.sock"
    assert (sock.parent.stat().st_mode & 0o777) == 0o700
    assert Layout(root=deep, address="127.5.0.9").machined_socket == sock  # stable per root
    # A root short enough keeps its socket in place (pytest's tmp_path under xdist may not be).
    with tempfile.TemporaryDirectory(prefix="n-", dir="/tmp") as top:
        short = Layout(root=Path(top), address="127.5.0.2")
        assert short.machined_socket == Path(top) / "system/run/machined/machine.sock"
