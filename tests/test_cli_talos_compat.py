"""Small talosctl commands Talos 1.7 has: the hidden deprecated ones, ``images``, ``machineconfig gen``,
``inject serviceaccount``, ``ls -r`` / ``list --recurse=false``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode

from ichor.api.gen.machine import machine_pb2
from ichor.machined.platform import Layout
from ichor.machined.server import _files
from ichor.machinery.inject import inject_service_account
from ichor.machinery.yamlio import load_documents, to_plain

pytestmark = pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["crashdump", "--control-plane-nodes", "10.5.0.2"],
         "`talosctl crashdump` is deprecated, please use `talosctl support` instead"),
        (["interfaces"],
         "`talosctl interfaces` is deprecated, please use `talosctl get addresses` and `talosctl get links` instead"),
        (["routes"], "`talosctl routes` is deprecated, please use `talosctl get routes` instead"),
        (["route"], "`talosctl routes` is deprecated, please use `talosctl get routes` instead"),
    ],
)  # fmt: skip
def test_deprecated_commands_point_to_their_replacements(talosctl: Any, args: list[str], text: str) -> None:
    r = talosctl(*args)
    assert (r.exit_code, r.stdout, r.stderr) == (1, "", f"error: {text}\n")


def test_hidden_commands_are_not_listed(talosctl: Any) -> None:
    from ichor.cli._root import cli, root_group

    listed = {name for name, _ in cli.short_helps()}
    assert {"usage", "time", "upgrade", "rollback", "meta", "inject", "image"} <= listed
    assert not {"crashdump", "interfaces", "routes", "images"} & listed
    import click

    with click.Context(root_group()) as ctx:
        assert "crashdump" not in ctx.command.list_commands(ctx)  # type: ignore[attr-defined]


def test_images_prints_the_default_list_and_image_its_help(talosctl: Any) -> None:
    default = talosctl("image", "default")
    listed = talosctl("images")
    assert listed.exit_code == 0 and listed.stdout == default.stdout
    assert "gcr.io/etcd-development/etcd:v3.5.13" in listed.stdout.splitlines()
    assert talosctl("images", "default", "--kubernetes-version", "1.29.0").stdout.count(":v1.29.0") >= 4
    group = talosctl("image")
    assert group.exit_code == 0 and "Commands:" in group.stdout and "default" in group.stdout


def test_machineconfig_gen_is_gen_config(talosctl: Any, tmp_path: Path) -> None:
    r = talosctl(
        "machineconfig", "gen", "lab", "https://10.5.0.2:6443", "--output-types", "controlplane", cwd=tmp_path
    )
    assert r.exit_code == 0, r.stderr
    (doc,) = load_documents((tmp_path / "controlplane.yaml").read_text())
    assert doc["cluster"]["clusterName"] == "lab" and doc["machine"]["type"] == "controlplane"
    assert talosctl("mc", "gen", "--help").stdout.startswith("Usage: talosctl machineconfig gen")


DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: tools
spec:
  template:
    spec:
      initContainers:
        - name: init
          image: busybox
      containers:
        - name: main
          image: busybox
          volumeMounts:
            - name: talos-secrets
              mountPath: /old
            - name: data
              mountPath: /data
      volumes:
        - name: data
          emptyDir: {}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  a: b
"""


def test_inject_service_account_rewrites_pod_specs_once() -> None:
    out = inject_service_account(DEPLOYMENT, ["os:admin", "os:etcd:backup"])
    assert out.count("---\n") == 3 and out.endswith("---\n")
    deployment, account, configmap = (to_plain(d) for d in load_documents(out))
    pod = deployment["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"emptyDir": {}, "name": "data"},
                              {"name": "talos-secrets", "secret": {"secretName": "app-talos-secrets"}}]  # fmt: skip
    mount = {"mountPath": "/var/run/secrets/talos.dev", "name": "talos-secrets"}
    assert pod["initContainers"][0]["volumeMounts"] == [mount]
    assert pod["containers"][0]["volumeMounts"] == [{"mountPath": "/data", "name": "data"}, mount]
    assert configmap == {
        "apiVersion": "v1",
        "data": {"a": "b"},
        "kind": "ConfigMap",
        "metadata": {"name": "settings"},
    }
    assert account == {"apiVersion": "talos.dev/v1alpha1", "kind": "ServiceAccount",
                       "metadata": {"name": "app-talos-secrets", "namespace": "tools"},
                       "spec": {"roles": ["os:admin", "os:etcd:backup"]}}  # fmt: skip
    # Running it again changes nothing: its own ServiceAccount is recognised and not doubled.
    assert inject_service_account(out, ["os:admin", "os:etcd:backup"]) == out


def test_inject_cli_reads_a_file_or_stdin(talosctl: Any, tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: [{name: c}]\n"
    )
    r = talosctl("inject", "serviceaccount", "-f", "pod.yaml", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    docs = [to_plain(d) for d in load_documents(r.stdout)]
    assert docs[1]["spec"]["roles"] == ["os:reader"] and docs[1]["metadata"] == {"name": "p-talos-secrets"}
    piped = talosctl(
        "inject", "tsa", "--roles", "os:admin,os:reader", "-f", "-", stdin=(tmp_path / "pod.yaml").read_text()
    )
    assert [to_plain(d) for d in load_documents(piped.stdout)][1]["spec"]["roles"] == [
        "os:admin",
        "os:reader",
    ]
    assert talosctl("inject", "serviceaccount").stdout.startswith("Usage: ")
    unnamed = talosctl("inject", "serviceaccount", "-f", "-", stdin="apiVersion: v1\nkind: Pod\nspec: {}\n")
    assert unnamed.exit_code == 1 and "object has no name" in unnamed.stderr


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[FakeNode, list[machine_pb2.ListRequest]]]:
    """A double whose List answers from a real tree with machined's walk, recording each request."""
    layout = Layout(root=tmp_path / "root", address="127.77.9.5")
    (layout.path("/var/a/b/c")).mkdir(parents=True)
    (layout.path("/var/a/b/c/deep.txt")).write_text("x")
    seen: list[machine_pb2.ListRequest] = []

    async def list_handler(stream: Any) -> None:
        request = await stream.recv_message()
        seen.append(request)
        for info in _files.list_files(layout, request):
            await stream.send_message(info)

    fake = FakeNode(tmp_path, "127.77.9.5")
    fake.handlers["List"] = list_handler
    with fake.serving():
        yield fake, seen


def test_ls_recurse_lists_everything_as_talos(
    node: tuple[FakeNode, list[machine_pb2.ListRequest]], talosctl: Any
) -> None:
    fake, seen = node
    r = talosctl(*fake.args(), "ls", "-r", "/var")
    assert r.exit_code == 0, r.stderr
    assert (seen[-1].recurse, seen[-1].recursion_depth) == (True, -1)  # what Talos's client sends
    names = [line.split()[-1] for line in r.stdout.splitlines()[1:]]
    assert names == [".", "a", "a/b", "a/b/c", "a/b/c/deep.txt"]
    r = talosctl(*fake.args(), "list", "--recurse=false", "/var")
    assert r.exit_code == 0, r.stderr
    assert [line.split()[-1] for line in r.stdout.splitlines()[1:]] == [".", "a"]
    r = talosctl(*fake.args(), "ls", "--recurse=true", "-t", "f", "/var")
    assert [line.split()[-1] for line in r.stdout.splitlines()[1:]] == ["a/b/c/deep.txt"]
    r = talosctl(*fake.args(), "ls", "-d", "2", "/var")
    assert [line.split()[-1] for line in r.stdout.splitlines()[1:]] == [".", "a", "a/b"]
    r = talosctl(*fake.args(), "ls", "-r", "-d", "3", "/var")
    assert (
        r.exit_code == 1
        and "only one of flags --recurse and --depth can be specified at the same time" in r.stderr
    )


@pytest.mark.parametrize("group", ["meta", "inject", "gen", "config", "image"])
def test_a_group_without_a_sub_command_prints_its_help_and_succeeds(talosctl: Any, group: str) -> None:
    r = talosctl(group)
    assert r.exit_code == 0 and r.stdout.startswith(f"Usage: talosctl {group} ") and "Commands:" in r.stdout
