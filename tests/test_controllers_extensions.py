"""Controllers of system extensions and ExtensionServiceConfig documents."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_helpers import apply, config, run, running

from ichor.machined.controllers import extensions
from ichor.machined.cosi import WAIT_STATUSES, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    EXTENSION_SERVICE_CONFIG_STATUSES,
    EXTENSION_SERVICE_CONFIGS,
    EXTENSION_STATUSES,
)
from ichor.machinery.errors import YAMLError

NUT = """\
---
apiVersion: v1alpha1
kind: ExtensionServiceConfig
name: nut-client
configFiles:
  - content: MONITOR ${upsmonHost} 1 remote pass password
    mountPath: /usr/local/etc/nut/upsmon.conf
environment:
  - UPS_NAME=ups
"""

LAYERS = """\
layers:
  - image: hello
    metadata:
      name: hello
      version: 1.0.0
      author: Ichor tests
      description: says hello
      compatibility:
        talos:
          version: ">= v1.7.0"
  - image: second
    metadata: {name: second, version: "2"}
"""


def test_installed_extensions_are_listed_in_layer_order(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.9")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/extensions.yaml").write_text(LAYERS)

    async def main() -> None:
        async with running(extensions.extension_status_controller(layout)) as state:
            first = await assert_resource(state, EXTENSION_STATUSES, "0")
            second = await assert_resource(state, EXTENSION_STATUSES, "1")
            assert first.spec.metadata.name == "hello"
            assert first.spec.metadata.compatibility.talos.version == ">= v1.7.0"
            assert second.spec.metadata.version == "2"
            assert EXTENSION_STATUSES.print_columns[0].name == "Name"

    run(main)


def test_a_node_without_extensions_lists_none(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.9")

    async def main() -> None:
        async with running(extensions.extension_status_controller(layout)) as state:
            await assert_no_resource(state, EXTENSION_STATUSES, "0")

    run(main)


def test_a_broken_extensions_file_is_a_visible_wait(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.9")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/extensions.yaml").write_text("layers: {name: x}\n")

    async def main() -> None:
        async with running(extensions.extension_status_controller(layout)) as state:
            wait = await assert_resource(state, WAIT_STATUSES, "runtime.ExtensionStatusController")
            assert "expected `layers:`" in wait.spec.reason

    run(main)


@pytest.mark.parametrize(
    "text", ["layers: [x]\n", "layers: [{image: a}]\n", "layers: [\n", "- a\n", "layers: &a [*a]\n"]
)
def test_extension_layers_sent_wrong_are_refused(text: str) -> None:
    with pytest.raises(YAMLError):
        extensions.read_extension_layers(text)


def test_extension_service_configs_become_resources_and_files(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.9")
    base = tmp_path / "system/overlays/extensions"
    stale = base / "gone"
    stale.mkdir(parents=True)
    (stale / "old.conf").write_text("x")

    async def main() -> None:
        async with running(
            extensions.extension_service_config_controller(),
            extensions.ExtensionServiceConfigFilesController(layout),
        ) as state:
            apply(state, config() + NUT)
            cfg = await assert_resource(state, EXTENSION_SERVICE_CONFIGS, "nut-client")
            assert cfg.spec.environment == ("UPS_NAME=ups",)
            assert cfg.spec.files[0].mount_path == "/usr/local/etc/nut/upsmon.conf"
            assert EXTENSION_SERVICE_CONFIGS.sensitive
            status = await assert_resource(state, EXTENSION_SERVICE_CONFIG_STATUSES, "nut-client")
            file = base / "nut-client/usr-local-etc-nut-upsmon.conf"
            assert file.read_text() == "MONITOR ${upsmonHost} 1 remote pass password"
            assert not stale.exists()
            first_version = status.spec.spec_version

            # A change is a new version: the signal that restarts ext-nut-client.
            apply(
                state, config() + NUT.replace("UPS_NAME=ups", "UPS_NAME=other").replace("pass password", "p2")
            )
            await assert_resource(
                state,
                EXTENSION_SERVICE_CONFIG_STATUSES,
                "nut-client",
                lambda r: r.spec.spec_version != first_version,
            )
            assert file.read_text() == "MONITOR ${upsmonHost} 1 remote p2"

            # Removing the document removes its resource, status and files.
            apply(state, config())
            await assert_no_resource(state, EXTENSION_SERVICE_CONFIG_STATUSES, "nut-client")
            assert not (base / "nut-client").exists()

    run(main)


def test_a_config_whose_name_or_mount_path_would_escape_is_refused_visibly(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.5.0.9")
    bad = NUT.replace("name: nut-client", "name: ../../etc").replace("/usr/local/etc/nut/upsmon.conf", "..")

    async def main() -> None:
        async with running(
            extensions.extension_service_config_controller(),
            extensions.ExtensionServiceConfigFilesController(layout),
        ) as state:
            apply(state, config() + bad + NUT.replace("name: nut-client", "name: dots").replace(
                "/usr/local/etc/nut/upsmon.conf", "/.."))  # fmt: skip
            wait = await assert_resource(
                state, WAIT_STATUSES, "runtime.ExtensionServiceConfigFilesController"
            )
            assert "is not an extension service name" in wait.spec.reason
            assert "names no file" in wait.spec.reason
            await assert_no_resource(state, EXTENSION_SERVICE_CONFIG_STATUSES, "../../etc")
            assert not (tmp_path / "etc").exists()
            assert sorted(p.name for p in tmp_path.rglob("*")) == ["extensions", "overlays", "system"]

    run(main)
