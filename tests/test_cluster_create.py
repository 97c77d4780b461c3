"""``cluster create``'s refusals and its clean-up, in-process, with no node started (the clean-up of
real node processes is in ``test_e2e_cluster_create.py``)."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ichor.machinery.errors import MachineryError
from ichor.provision import _cluster
from ichor.provision._processes import find
from ichor.provision._record import ClusterRecord


def _cidr() -> str:
    return f"127.{random.randint(60, 99)}.{random.randint(0, 255)}.0/24"


@pytest.fixture
def listening() -> Iterator[list[socket.socket]]:
    """Sockets a test holds open (a port in use), closed afterwards."""
    held: list[socket.socket] = []
    yield held
    for s in held:
        s.close()


def _listen(held: list[socket.socket], address: str, port: int) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, port))
    s.listen()
    held.append(s)


def _create(tmp_path: Path, cidr: str, lines: list[str], **kw: object) -> ClusterRecord:
    args: dict[str, object] = dict(name="c", cidr=cidr, controlplanes=1, workers=1, state=tmp_path / "clusters",
                                   talosconfig=tmp_path / "talosconfig", progress=lines.append)  # fmt: skip
    args.update(kw)
    return _cluster.create(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(("host", "port", "what"), [(1, 3000, "discovery service"), (3, 50000, "apid")])
def test_an_address_in_use_is_refused_before_anything_starts(
    tmp_path: Path, listening: list[socket.socket], host: int, port: int, what: str
) -> None:
    cidr = _cidr()
    address = cidr.rsplit(".", 1)[0] + f".{host}"
    _listen(listening, address, port)
    lines: list[str] = []
    with pytest.raises(MachineryError) as failed:
        _create(tmp_path, cidr, lines)
    assert f"{address}:{port}" in str(failed.value) and what in str(failed.value)
    assert "--cidr" in (failed.value.hint or "")
    assert not any("done" in line or "listening" in line for line in lines), lines
    assert not (tmp_path / "clusters/c").exists()
    assert find((tmp_path / "clusters/c").resolve()) == []


def test_the_address_in_use_names_the_cluster_that_holds_it(
    tmp_path: Path, listening: list[socket.socket]
) -> None:
    cidr = _cidr()
    _listen(listening, cidr.rsplit(".", 1)[0] + ".1", 3000)
    other = tmp_path / "clusters/other"
    other.mkdir(parents=True)
    ClusterRecord(name="other", cidr=cidr, state_dir=str(other)).save()
    with pytest.raises(MachineryError) as failed:
        _create(tmp_path, cidr, [])
    assert f"cluster 'other' uses --cidr {cidr}" in (failed.value.hint or ""), failed.value.hint


def test_already_exists_names_the_state_directory_in_its_hint(tmp_path: Path) -> None:
    state_dir = tmp_path / "clusters/c"
    state_dir.mkdir(parents=True)
    ClusterRecord(name="c", cidr="127.5.0.0/24", state_dir=str(state_dir)).save()
    with pytest.raises(MachineryError) as failed:
        _create(tmp_path, _cidr(), [])
    assert "already exists" in str(failed.value)
    assert (
        failed.value.hint
        == f"destroy it first: talosctl cluster destroy --name c --state {tmp_path / 'clusters'}"
    )


def test_a_bad_patch_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(MachineryError):
        _create(tmp_path, _cidr(), [], config_patches=["[{not yaml"])
    assert not (tmp_path / "clusters/c").exists()


@pytest.mark.parametrize(
    ("ca", "current", "previous", "contexts", "now_current"),
    [
        ("CA", "c", "other", ["other"], "other"),  # current: the one current before create is again
        ("CA", "c", "gone", ["other"], None),  # ... unless it has gone since: none is
        ("CA", "other", "other", ["other"], "other"),  # not current: the current one stays
        ("ANOTHER CA", "c", "other", ["c", "other"], "c"),  # replaced since create: not its any more
    ],
)
def test_destroy_takes_out_only_the_context_create_merged(
    tmp_path: Path, ca: str, current: str, previous: str, contexts: list[str], now_current: str | None
) -> None:
    from ichor.machinery.clientconfig import Context, TalosConfig
    from ichor.provision._teardown import context_digest, forget_context

    path = tmp_path / "talosconfig"
    defined = {"c": Context(endpoints=["127.0.0.1"], ca=ca), "other": Context(endpoints=["127.0.0.2"])}
    TalosConfig(context=current, contexts=defined).save(path)
    record = ClusterRecord(name="c", cidr="127.5.0.0/24", state_dir=str(tmp_path), talosconfig=str(path),
                           context="c", context_ca=context_digest("CA"), previous_context=previous)  # fmt: skip
    forget_context(record, lambda _: None)
    after = TalosConfig.load(path)
    assert sorted(after.contexts) == contexts and after.context == now_current


def test_cluster_help_says_what_the_provisioner_is(talosctl) -> None:  # type: ignore[no-untyped-def]
    shown = talosctl("cluster", "--help")
    assert shown.exit_code == 0
    assert "docker" not in shown.stdout.lower() and "qemu" not in shown.stdout.lower()
    assert "processes on this machine" in shown.stdout and "'process'" in shown.stdout


@pytest.mark.parametrize(
    ("version", "why"),
    [("1.99.0", "too new"), ("banana", "is not a Kubernetes version"), ("1.24.0", "too old")],
)
def test_a_kubernetes_version_talos_17_does_not_run_is_refused_naming_the_flag(
    tmp_path: Path,
    talosctl,
    version: str,
    why: str,  # type: ignore[no-untyped-def]
) -> None:
    result = talosctl("--talosconfig", str(tmp_path / "tc"), "cluster", "create", "--provisioner", "process",
                      "--state", str(tmp_path / "clusters"), "--kubernetes-version", version)  # fmt: skip
    assert result.exit_code != 0
    assert "error: --kubernetes-version: " in result.stderr and why in result.stderr, result.stderr
    assert "hint: pass --kubernetes-version 1.25.0 to 1.30.x (default 1.30.3)" in result.stderr
    assert not (tmp_path / "clusters").exists()


def test_local_images_are_of_the_built_version_only(tmp_path: Path) -> None:
    from ichor.provision._configs import check_kubernetes_version_flag

    with pytest.raises(
        MachineryError, match=r"--kubernetes-images local builds and serves Kubernetes 1\.30\.3 only"
    ) as err:
        check_kubernetes_version_flag("v1.29.2", local=True)
    assert "--kubernetes-images upstream" in (err.value.hint or "")
    assert check_kubernetes_version_flag("v1.30.3", local=True) == "1.30.3"
    assert check_kubernetes_version_flag("v1.29.2", local=False) == "1.29.2"


def test_the_chosen_kubernetes_version_tags_every_nodes_kubernetes_images(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ichor.machinery.secrets import SecretsBundle
    from ichor.machinery.yamlio import load_documents, to_plain
    from ichor.provision._configs import Patches, node_configs

    seen: list[ClusterRecord] = []
    monkeypatch.setattr(_cluster, "_bring_up", lambda record, *rest: seen.append(record))
    _create(tmp_path, _cidr(), [], kubernetes_version="v1.29.2")
    (record,) = seen
    assert record.kubernetes_version == "1.29.2"
    assert ClusterRecord.load(tmp_path / "clusters", "c").kubernetes_version == "1.29.2"
    configs = node_configs(record, SecretsBundle.generate(), [], Patches([], [], []))
    cp, worker = (to_plain(load_documents(configs[n.name], source=n.name)[0]) for n in record.nodes)
    assert (
        cp["machine"]["kubelet"]["image"]
        == worker["machine"]["kubelet"]["image"]
        == ("ghcr.io/siderolabs/kubelet:v1.29.2")
    )
    images = {
        key: cp["cluster"][key]["image"] for key in ("apiServer", "controllerManager", "scheduler", "proxy")
    }
    assert images == {
        "apiServer": "registry.k8s.io/kube-apiserver:v1.29.2",
        "controllerManager": "registry.k8s.io/kube-controller-manager:v1.29.2",
        "scheduler": "registry.k8s.io/kube-scheduler:v1.29.2",
        "proxy": "registry.k8s.io/kube-proxy:v1.29.2",
    }
