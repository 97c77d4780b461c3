"""controllers/cri.py and machined/cri: ``machine.registries`` as containerd's host files, and the
containerd configuration Talos lays out (``/etc/cri/containerd.toml``, merged ``conf.d/*.part``)."""

from __future__ import annotations

import asyncio
import base64
import tomllib
from pathlib import Path

import pytest
from controller_helpers import ADDRESS, apply, config, run, running

from ichor.machined import cri
from ichor.machined.controllers import cri as cri_area
from ichor.machined.cosi import WAIT_STATUSES, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import REGISTRIES_CONFIGS
from ichor.machinery.config import Mode, load_config, validate
from ichor.machinery.config._models import RegistriesConfig

HOSTS = "/etc/cri/conf.d/hosts"
PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _render(value: dict[str, object]) -> cri.HostFiles:
    return cri.render_registries(RegistriesConfig.model_validate(value), HOSTS)


def test_mirrors_become_hosts_toml_per_registry_in_order() -> None:
    files = _render({"mirrors": {
        "docker.io": {"endpoints": ["http://10.5.0.1:5000", "https://mirror.local"]},
        "*": {"endpoints": ["http://10.5.0.1:5001"], "overridePath": True},
    }})  # fmt: skip
    docker = tomllib.loads(files.files["docker.io/hosts.toml"])
    assert list(docker["host"]) == ["http://10.5.0.1:5000", "https://mirror.local"]
    assert docker["host"]["http://10.5.0.1:5000"] == {"capabilities": ["pull", "resolve"]}
    default = tomllib.loads(files.files["_default/hosts.toml"])
    assert default["host"]["http://10.5.0.1:5001"]["override_path"] is True
    assert files.registries_part == ""


def test_tls_and_auth_of_a_mirror_endpoint() -> None:
    files = _render({
        "mirrors": {"ghcr.io": {"endpoints": ["https://reg.lab:5443"]}},
        "config": {"reg.lab:5443": {
            "tls": {"ca": _b64(PEM), "clientIdentity": {"crt": _b64("CRT"), "key": _b64("KEY")}, "insecureSkipVerify": True},
            "auth": {"username": "u", "password": "p"},
        }},
    })  # fmt: skip
    host = tomllib.loads(files.files["ghcr.io/hosts.toml"])["host"]["https://reg.lab:5443"]
    assert host["ca"] == f"{HOSTS}/ghcr.io/reg.lab_5443-ca.crt"
    assert host["client"] == [
        [f"{HOSTS}/ghcr.io/reg.lab_5443-client.crt", f"{HOSTS}/ghcr.io/reg.lab_5443-client.key"]
    ]
    assert host["skip_verify"] is True
    assert files.files["ghcr.io/reg.lab_5443-ca.crt"] == PEM
    assert files.files["ghcr.io/reg.lab_5443-client.key"] == "KEY"
    part = tomllib.loads(files.registries_part)
    auth = part["plugins"]["io.containerd.grpc.v1.cri"]["registry"]["configs"]["reg.lab:5443"]["auth"]
    assert auth == {"username": "u", "password": "p"}


def test_a_registry_with_tls_but_no_mirror_gets_its_own_host() -> None:
    files = _render({"config": {"reg.lab": {"tls": {"insecureSkipVerify": True}}}})
    assert tomllib.loads(files.files["reg.lab/hosts.toml"]) == {
        "host": {"https://reg.lab": {"capabilities": ["pull", "resolve"], "skip_verify": True}}
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"mirrors": {"docker.io": {"endpoints": ["https://ok", "registry.local:5000"]}}},
         'machine.registries.mirrors["docker.io"].endpoints[1]'),
        ({"mirrors": {"docker.io": {"endpoints": ["ftp://x"]}}}, 'machine.registries.mirrors["docker.io"].endpoints[0]'),
        ({"config": {"reg.lab": {"tls": {"ca": "not base64!"}}}}, 'machine.registries.config["reg.lab"].tls.ca'),
        ({"config": {"reg.lab": {"tls": {"clientIdentity": {"crt": _b64("C")}}}}}, "needs both crt and key"),
        ({"mirrors": {"a/b": {"endpoints": ["https://x"]}}}, "is not a host[:port]"),
    ],
)  # fmt: skip
def test_bad_registry_entries_are_refused_naming_the_key(value: dict[str, object], message: str) -> None:
    with pytest.raises(cri.CRIConfigError) as caught:
        _render(value)
    assert message in str(caught.value)
    assert caught.value.hint


def test_validation_names_a_mirror_endpoint_that_is_not_a_url() -> None:
    text = config(
        extra_machine="  registries: {mirrors: {docker.io: {endpoints: ['http://ok:5000', 'not a url']}}}\n"
    )
    errors = validate(load_config(text), Mode.CONTAINER).errors
    assert any(
        e.startswith('machine.registries.mirrors["docker.io"].endpoints[1]: invalid mirror endpoint')
        for e in errors
    ), errors
    assert not any("endpoints[0]" in e for e in errors)


def test_parts_merge_in_name_order_and_a_bad_part_is_named(tmp_path: Path) -> None:
    (tmp_path / "00-base.part").write_text(cri.cri_base_part())
    (tmp_path / "20-customization.part").write_text(
        '[plugins."io.containerd.grpc.v1.cri"]\n  enable_unprivileged_ports = false\n'
    )
    merged = tomllib.loads(cri.merge_parts(tmp_path))["plugins"]["io.containerd.grpc.v1.cri"]
    assert merged["enable_unprivileged_ports"] is False  # the later part wins
    assert merged["restrict_oom_score_adj"] is True  # this host has no CAP_SYS_RESOURCE
    assert merged["registry"]["config_path"] == HOSTS
    assert tomllib.loads(cri.cri_config())["imports"] == ["/etc/cri/conf.d/cri.toml"]
    (tmp_path / "30-broken.part").write_text("[plugins\n")
    with pytest.raises(cri.CRIConfigError, match=r"30-broken\.part is not valid TOML"):
        cri.merge_parts(tmp_path)


def test_registry_files_follow_the_config_and_a_bad_entry_is_a_wait(tmp_path: Path) -> None:
    layout = Layout(tmp_path, ADDRESS)
    hosts = layout.path(HOSTS)

    async def until(predicate: object) -> None:
        for _ in range(200):
            if predicate():  # type: ignore[operator]
                return
            await asyncio.sleep(0.02)
        raise AssertionError("timed out")

    async def main() -> None:
        async with running(
            cri_area.registries_config_controller(), cri_area.RegistryFilesController(layout)
        ) as state:
            mirrors = "  registries: {mirrors: {docker.io: {endpoints: ['http://10.5.0.1:5000']}, ghcr.io: {endpoints: ['http://10.5.0.1:5001']}}}\n"
            apply(state, config(extra_machine=mirrors))
            await assert_resource(
                state, REGISTRIES_CONFIGS, "registries", lambda r: "ghcr.io" in r.spec.mirrors
            )
            await until(
                lambda: (
                    (hosts / "ghcr.io/hosts.toml").is_file() and (hosts / "docker.io/hosts.toml").is_file()
                )
            )
            assert "http://10.5.0.1:5001" in (hosts / "ghcr.io/hosts.toml").read_text()
            assert (layout.path("/etc/cri/conf.d/cri.toml")).is_file()

            # a change rewrites: ghcr.io goes, docker.io's endpoint changes, credentials appear
            changed = ("  registries: {mirrors: {docker.io: {endpoints: ['http://10.5.0.1:6000']}},"
                       " config: {docker.io: {auth: {username: u, password: p}}}}\n")  # fmt: skip
            apply(state, config(extra_machine=changed))
            await until(lambda: not (hosts / "ghcr.io").exists())
            assert "http://10.5.0.1:6000" in (hosts / "docker.io/hosts.toml").read_text()
            part = layout.path("/etc/cri/conf.d/01-registries.part").read_text()
            assert 'username = "u"' in part

            # an entry the validator would refuse still reaches no file: a wait names the key
            apply(
                state, config(extra_machine="  registries: {mirrors: {docker.io: {endpoints: ['nope']}}}\n")
            )
            await assert_resource(state, WAIT_STATUSES, "files.CRIRegistryConfigController",
                                  lambda r: "endpoints[0]" in r.spec.reason)  # fmt: skip
            assert "http://10.5.0.1:6000" in (hosts / "docker.io/hosts.toml").read_text()

    run(main)


def test_ctr_tables_are_read_back() -> None:
    from ichor.machined.cri._ctr import parse_containers, parse_images, parse_size

    images = parse_images(
        "REF                TYPE                                        DIGEST        SIZE    PLATFORMS   LABELS\n"
        "docker.io/l/bb:1   application/vnd.oci.image.manifest.v1+json  sha256:ab12   1.1 MiB linux/amd64 -\n"
    )
    assert [(i.name, i.digest, i.size) for i in images] == [
        ("docker.io/l/bb:1", "sha256:ab12", int(1.1 * 2**20))
    ]
    assert parse_images("REF TYPE DIGEST SIZE PLATFORMS LABELS\n") == []
    found = parse_containers(
        "CONTAINER    IMAGE              RUNTIME\nt1   docker.io/l/bb:1   io.containerd.runc.v2\nt2 x io.containerd.runc.v2\n",
        "TASK    PID     STATUS\nt1      4242    running\n",
    )
    assert [(c.id, c.pid, c.status) for c in found] == [("t1", 4242, "RUNNING"), ("t2", 0, "CREATED")]
    with pytest.raises(cri.CRIError, match="cannot be read back"):
        parse_size("lots")


def test_image_sizes_print_as_talos_prints_them() -> None:
    from ichor.cli._image import _bytes

    assert [_bytes(n) for n in (0, 9, 999, 1_100_000, 12_345_678)] == [
        "0 B",
        "9 B",
        "999 B",
        "1.1 MB",
        "12 MB",
    ]
