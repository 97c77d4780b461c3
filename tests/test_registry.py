"""A cluster's own registry on a loopback address: started with the cluster's marks, an image built
here pushed to it under the names a mirror serves, its HTTP API and access log read, and stopped by
PID by the cluster's teardown. Plus the ``--registry-mirror``/``--with-registry`` flags refused
when wrong, and turned into every node's ``machine.registries.mirrors``."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from cluster_helpers import talosctl_in

from ichor.machinery.errors import MachineryError
from ichor.provision._cluster import create
from ichor.provision._configs import registry_mirror_options
from ichor.provision._processes import find
from ichor.provision._record import ClusterRecord
from ichor.provision._registry import mirrors_for, start_registry


def _loopback() -> str:
    return f"127.{random.randint(100, 199)}.{random.randint(0, 255)}.1"


def test_no_docker_registry_installed_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MachineryError, match=r"docker-registry \(.*\) is not installed") as caught:
        start_registry(tmp_path, "127.0.0.1")
    assert "apt-get install -y docker-registry" in (caught.value.hint or "")
    assert find(tmp_path) == []


def test_with_registry_and_no_docker_registry_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "shutil.which", lambda name: None if name == "docker-registry" else "/usr/bin/" + name
    )
    with pytest.raises(MachineryError, match=r"docker-registry \(.*\) is not installed"):
        create(name="c", cidr="127.78.0.0/24", controlplanes=1, workers=0, state=tmp_path / "s",
               talosconfig=tmp_path / "talosconfig", provisioner="process", with_registry="docker.io",
               progress=lambda _: None)  # fmt: skip
    assert not (tmp_path / "s").exists()


def test_with_registry_mirrors_each_host_to_the_gateway() -> None:
    mirrors = mirrors_for("docker.io, ghcr.io", "10.5.0.1")
    assert [(m.registry, m.endpoint) for m in mirrors] == [
        ("docker.io", "http://10.5.0.1:5000"),
        ("ghcr.io", "http://10.5.0.1:5000"),
    ]
    for bad, message in ((" , ", "names no registry"), ("bad host", "is not a registry host")):
        with pytest.raises(MachineryError, match=message) as caught:
            mirrors_for(bad, "10.5.0.1")
        assert str(caught.value).startswith("--with-registry ") and caught.value.hint


def test_mirrors_become_generation_options_in_order() -> None:
    record = ClusterRecord(name="c", cidr="10.5.0.0/24", state_dir="/nowhere", registry_mirrors=[
        "docker.io=http://10.5.0.1:5000", "docker.io=https://mirror.lan", "ghcr.io=http://10.5.0.1:5000",
    ])  # fmt: skip
    assert registry_mirror_options(record) == (
        ("docker.io", "http://10.5.0.1:5000"),
        ("docker.io", "https://mirror.lan"),
        ("ghcr.io", "http://10.5.0.1:5000"),
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--registry-mirror", "foo"], "error: --registry-mirror 'foo' is not <registry>=<endpoint>"),
        (["--registry-mirror", "docker.io=10.5.0.1:5000"], "is not an http:// or https:// URL"),
        (["--with-registry", ","], "error: --with-registry ',' names no registry"),
    ],
)
def test_bad_registry_flags_are_refused_before_anything_starts(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    state = tmp_path / "clusters"
    created = talosctl_in(tmp_path, "cluster", "create", "--provisioner", "process", "--state", str(state),
                          "--cidr", "127.77.0.0/24", *flags, timeout=60)  # fmt: skip
    assert created.exit_code != 0
    assert message in created.stderr and "hint: " in created.stderr
    assert not (state / "talos-default").exists()
