"""Extension service specs (/usr/local/etc/containers/*.yaml) and the OCI spec they run with."""

from __future__ import annotations

from pathlib import Path

import pytest

from ichor.machinery.errors import ExtensionServiceError, InputLimitError
from ichor.machinery.extensions import (
    GRANTABLE_CAPABILITIES,
    Dependency,
    NetworkCheck,
    RestartKind,
    ServiceConfig,
    config_file_source,
    load_service_specs,
    parse_service_spec,
    runtime_spec,
)

HELLO = """\
name: hello-world
container:
  entrypoint: ./hello
  args:
    - --config
    - config.ini
  environment:
    - GREETING=hi
  environmentFile: /var/hello.env
  mounts:
    - source: /var/log/audit
      destination: /var/log/audit
      type: bind
      options: [rshared, bind, ro]
  security:
    writeableRootfs: false
    writeableSysfs: true
    maskedPaths: [/proc/kcore]
    readonlyPaths: []
    rootfsPropagation: shared
depends:
  - service: cri
  - path: /run/machined/machined.sock
  - network: [addresses, connectivity, hostname, etcfiles]
  - time: true
  - configuration: true
restart: always
"""


def test_the_guides_spec_reads_with_every_field() -> None:
    spec = parse_service_spec(HELLO)
    assert spec.name == "hello-world"
    assert spec.service_id == "ext-hello-world"
    assert spec.rootfs == "/usr/local/lib/containers/hello-world"
    assert spec.container.args == ("--config", "config.ini")
    assert spec.container.environment == ("GREETING=hi",)
    assert spec.container.environment_file == "/var/hello.env"
    (mount,) = spec.container.mounts
    assert mount.to_oci() == {"destination": "/var/log/audit", "type": "bind", "source": "/var/log/audit",
                              "options": ["rshared", "bind", "ro"]}  # fmt: skip
    security = spec.container.security
    assert (security.writeable_rootfs, security.writeable_sysfs) == (False, True)
    assert security.masked_paths == ("/proc/kcore",)
    assert security.readonly_paths == ()
    assert security.rootfs_propagation == "shared"
    assert spec.depends == (
        Dependency(service="cri"),
        Dependency(path="/run/machined/machined.sock"),
        Dependency(network=tuple(NetworkCheck)),
        Dependency(time=True),
        Dependency(configuration=True),
    )
    assert spec.depends_on_services == ("containerd", "cri")
    assert spec.restart is RestartKind.ALWAYS


@pytest.mark.parametrize(("text", "restart"), [("never", RestartKind.NEVER), ("untilSuccess", RestartKind.UNTIL_SUCCESS),
                                               ("UntilSuccess", RestartKind.UNTIL_SUCCESS), ("Always", RestartKind.ALWAYS)])  # fmt: skip
def test_restart_kinds_read_case_insensitively_as_talos(text: str, restart: RestartKind) -> None:
    spec = parse_service_spec(f"name: a\ncontainer: {{entrypoint: ./a}}\nrestart: {text}\n")
    assert spec.restart is restart


def _problems(text: str) -> list[str]:
    with pytest.raises(ExtensionServiceError) as info:
        parse_service_spec(text, source="/usr/local/etc/containers/x.yaml")
    assert info.value.hint
    assert str(info.value).startswith("/usr/local/etc/containers/x.yaml: ")
    return info.value.problems


MINIMAL = "name: a\ncontainer:\n  entrypoint: ./a\nrestart: never\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: Hello\ncontainer: {entrypoint: ./a}\nrestart: never\n", 'name: name "Hello" is invalid'),
        ("name: a/b\ncontainer: {entrypoint: ./a}\nrestart: never\n", 'name: name "a/b" is invalid'),
        ("container: {entrypoint: ./a}\nrestart: never\n", 'name: name "" is invalid'),
        ("name: a\nrestart: never\n", "container.entrypoint: container endpoint can't be empty"),
        ("name: a\ncontainer: {args: [x]}\nrestart: never\n", "container.entrypoint: container endpoint can't be empty"),
        ("name: a\ncontainer: {entrypoint: ./a}\n", "restart: restart kind is invalid: RestartKind(0)"),
        ("name: a\ncontainer: {entrypoint: ./a}\nrestart: sometimes\n",
         "restart: sometimes does not belong to RestartKind values"),
        (MINIMAL + "depends: [{}]\n", "depends[0]: no dependency specified"),
        (MINIMAL + "depends: [{network: []}]\n", "depends[0]: no dependency specified"),
        (MINIMAL + "depends: [{time: false}]\n", "depends[0]: no dependency specified"),
        (MINIMAL + "depends: [{service: cri, time: true}]\n", "depends[0]: more than a single dependency is set"),
        (MINIMAL + "depends: [{path: run/x}]\n", "depends[0].path: path is not absolute: 'run/x'"),
        (MINIMAL + "depends: [{network: [addresses, wifi]}]\n", "depends[0].network[1]: invalid network dependency: wifi"),
        (MINIMAL + "depends: [{wait: forever}]\n", "depends[0].wait: unknown key (known: service, path, network, time, configuration)"),
        (MINIMAL + "depends: [{time: yes please}]\n", "depends[0].time: expected true or false, got 'yes please'"),
        (MINIMAL + "depends: {service: cri}\n", "depends: expected a list, got a mapping"),
        (MINIMAL + "depends: [cri]\n", "depends[0]: expected a mapping, got 'cri'"),
        (MINIMAL + "extra: 1\n", "extra: unknown key (known: name, container, depends, restart)"),
        ("name: a\ncontainer: {entrypoint: ./a, entrypiont: x}\nrestart: never\n",
         "container.entrypiont: unknown key (known: entrypoint, args, environment, environmentFile, mounts, security)"),
        ("name: a\ncontainer: {entrypoint: [./a]}\nrestart: never\n", "container.entrypoint: expected a string, got a list"),
        ("name: a\ncontainer: {entrypoint: ./a, args: -f}\nrestart: never\n",
         "container.args: expected a list of strings, got '-f'"),
        ("name: a\ncontainer: {entrypoint: ./a, environment: [{A: b}]}\nrestart: never\n",
         "container.environment[0]: expected a string, got a mapping"),
        ("name: a\ncontainer: {entrypoint: ./a, mounts: [{source: /x}]}\nrestart: never\n",
         "container.mounts[0].destination: a mount needs a destination"),
        ("name: a\ncontainer: {entrypoint: ./a, mounts: [{destination: /x, options: ro}]}\nrestart: never\n",
         "container.mounts[0].options: expected a list of strings, got 'ro'"),
        ("name: a\ncontainer: {entrypoint: ./a, mounts: /x}\nrestart: never\n", "container.mounts: expected a list, got '/x'"),
        ("name: a\ncontainer: {entrypoint: ./a, mounts: [{destination: /x, uidMappings: []}]}\nrestart: never\n",
         "container.mounts[0]: uidMappings/gidMappings are not supported for extension service mounts"),
        ("name: a\ncontainer: {entrypoint: ./a, security: {writeableRootfs: 1}}\nrestart: never\n",
         "container.security.writeableRootfs: expected true or false, got 1"),
        ("name: a\ncontainer: {entrypoint: ./a, security: {maskedPaths: /proc}}\nrestart: never\n",
         "container.security.maskedPaths: expected a list of strings, got '/proc'"),
        ("name: a\ncontainer: {entrypoint: ./a, security: {rootfsPropagation: sideways}}\nrestart: never\n",
         "container.security.rootfsPropagation: unknown propagation 'sideways' (one of shared, slave, private, "
         "rshared, rslave, rprivate, unbindable, runbindable)"),
        ("name: a\ncontainer: {entrypoint: ./a, security: {privileged: true}}\nrestart: never\n",
         "container.security.privileged: unknown key (known: writeableRootfs, writeableSysfs, maskedPaths, "
         "readonlyPaths, rootfsPropagation)"),
        ("- name: a\n", "expected a mapping, got a list"),
    ],
)  # fmt: skip
def test_each_field_sent_wrong_is_refused_with_its_path(text: str, expected: str) -> None:
    assert expected in "\n".join(_problems(text))


def test_every_problem_of_a_file_is_reported_at_once_as_talos_multierror() -> None:
    with pytest.raises(ExtensionServiceError) as info:
        parse_service_spec("name: BAD\ncontainer: {}\nrestart: maybe\n", source="s.yaml")
    assert len(info.value.problems) == 3
    assert str(info.value).splitlines()[0] == "s.yaml: 3 errors occurred:"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("name: a\n---\nname: b\n", "the file holds 2 YAML documents, not one"),
        ("name: [a\n", "invalid YAML"),
    ],
)
def test_text_that_is_not_one_spec_is_refused(text: str, expected: str) -> None:
    with pytest.raises(ExtensionServiceError, match=expected):
        parse_service_spec(text)


def test_oversized_and_alias_bomb_specs_are_refused_before_expansion() -> None:
    with pytest.raises(ExtensionServiceError) as info:
        parse_service_spec("name: a\n" + "# pad\n" * 60_000)
    assert "max_bytes" in str(info.value)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)
    )
    with pytest.raises(ExtensionServiceError) as info:
        parse_service_spec(bomb)
    assert "limit max_nodes" in str(info.value) or "limit max_aliases" in str(info.value)
    deep = "name: " + "[" * 40 + "]" * 40 + "\n"
    with pytest.raises(ExtensionServiceError, match="max_depth"):
        parse_service_spec(deep)
    assert InputLimitError  # the loader's own error class is what the message came from


def _spec_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    specs = tmp_path / "containers"
    specs.mkdir()
    for name, text in files.items():
        (specs / name).write_text(text)
    return specs


def test_a_directory_loads_good_specs_and_refuses_bad_ones_with_reasons(tmp_path: Path) -> None:
    specs = _spec_dir(tmp_path, {
        "a.yaml": MINIMAL,
        "b.yaml": "name: b\ncontainer: {entrypoint: ./b}\nrestart: always\n",
        "c.yaml": "name: C\n",
        "d.yaml": MINIMAL,  # same name as a.yaml
        "notes.txt": "not a spec",
    })  # fmt: skip
    have = {"/usr/local/lib/containers/a"}
    loaded, refused = load_service_specs(specs, rootfs_exists=lambda path: path in have)
    assert [s.name for s in loaded] == ["a"]
    reasons = {r.file: str(r.error) for r in refused}
    assert set(reasons) == {f"/usr/local/etc/containers/{f}" for f in ("b.yaml", "c.yaml", "d.yaml")}
    assert (
        "container rootfs /usr/local/lib/containers/b is missing"
        in reasons["/usr/local/etc/containers/b.yaml"]
    )
    assert 'name "C" is invalid' in reasons["/usr/local/etc/containers/c.yaml"]
    assert "duplicate service spec" in reasons["/usr/local/etc/containers/d.yaml"]
    assert all(r.error.hint for r in refused)


def test_no_specs_directory_means_no_services(tmp_path: Path) -> None:
    assert load_service_specs(tmp_path / "absent", rootfs_exists=lambda _: True) == ([], [])


def test_an_oversized_spec_file_is_refused_unread(tmp_path: Path) -> None:
    specs = _spec_dir(tmp_path, {"big.yaml": "#" * 300_000})
    loaded, (refusal,) = load_service_specs(specs, rootfs_exists=lambda _: True)
    assert loaded == []
    assert "over the 262,144-byte limit" in str(refusal.error)


# --- the OCI runtime spec -------------------------------------------------------------------------


def test_runtime_spec_has_talos_defaults() -> None:
    spec = parse_service_spec(MINIMAL)
    oci = runtime_spec(spec)
    assert oci["root"] == {"path": "/usr/local/lib/containers/a", "readonly": True}
    assert oci["process"]["args"] == ["./a"]
    assert oci["process"]["oomScoreAdj"] == -600
    namespaces = [ns["type"] for ns in oci["linux"]["namespaces"]]
    assert "network" not in namespaces  # host network
    assert "pid" in namespaces  # but its own PIDs
    assert oci["linux"]["cgroupsPath"] == "/system/extensions/a"
    assert oci["linux"]["resources"]["devices"] == [{"allow": True, "access": "rwm"}]
    caps = oci["process"]["capabilities"]["bounding"]
    assert "CAP_SYS_ADMIN" in caps and "CAP_NET_ADMIN" in caps
    assert "CAP_SYS_BOOT" not in caps and "CAP_SYS_MODULE" not in caps
    assert caps == list(GRANTABLE_CAPABILITIES)
    sysfs = next(m for m in oci["mounts"] if m["destination"] == "/sys")
    assert "ro" in sysfs["options"]
    assert "/proc/kcore" in oci["linux"]["maskedPaths"]
    assert "rootfsPropagation" not in oci["linux"]


def test_runtime_spec_follows_the_security_options_and_mounts() -> None:
    oci = runtime_spec(parse_service_spec(HELLO))
    assert oci["root"]["readonly"] is True
    sysfs = next(m for m in oci["mounts"] if m["destination"] == "/sys")
    assert "ro" not in sysfs["options"]
    assert oci["linux"]["maskedPaths"] == ["/proc/kcore"]
    assert oci["linux"]["readonlyPaths"] == []
    assert oci["linux"]["rootfsPropagation"] == "shared"
    assert {"destination": "/var/log/audit", "type": "bind", "source": "/var/log/audit",
            "options": ["rshared", "bind", "ro"]} in oci["mounts"]  # fmt: skip
    writeable = parse_service_spec(MINIMAL.replace("./a\n", "./a\n  security: {writeableRootfs: true}\n"))
    assert runtime_spec(writeable)["root"]["readonly"] is False


def test_extension_service_config_files_are_bound_read_only_and_env_appended() -> None:
    spec = parse_service_spec(HELLO)
    config = ServiceConfig(mount_paths=("/usr/local/etc/nut/upsmon.conf",), environment=("UPS_NAME=ups",))
    oci = runtime_spec(spec, config, environment=("MACHINE=1",))
    assert oci["mounts"][-1] == {
        "destination": "/usr/local/etc/nut/upsmon.conf",
        "type": "bind",
        "source": "/system/overlays/extensions/hello-world/usr-local-etc-nut-upsmon.conf",
        "options": ["ro", "bind"],
    }
    env = oci["process"]["env"]
    assert env[0].startswith("PATH=")
    assert env[1:] == ["MACHINE=1", "GREETING=hi", "UPS_NAME=ups"]


def test_config_file_source_flattens_the_mount_path() -> None:
    assert config_file_source("nut", "/etc/a/b.conf") == "/system/overlays/extensions/nut/etc-a-b.conf"
