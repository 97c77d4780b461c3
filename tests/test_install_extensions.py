"""``machine.install.extensions`` (deprecated in Talos 1.7): Ichor refuses it at install and at
upgrade, naming the key and its images, and pulls nothing: the install plan (so ``apply-config
--insecure`` and its ``--dry-run`` reply with it), the Upgrade RPC (before the installer image is
fetched), and an upgrade staged before the key was added (it fails with the reason, is forgotten,
and the node boots its installed system). Config validation keeps Talos's deprecation warning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from controller_helpers import run
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from test_metal_install import _disk, _installation
from test_metal_upgrade import Lifecycle, Machine, Store, _upgrades

from ichor.api.gen.machine import machine_pb2
from ichor.images import InstallerAssets, MirrorEndpoints
from ichor.machined.configstore import LoadedConfig
from ichor.machined.cosi import State
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout, Platform
from ichor.machined.server._context import MachineContext
from ichor.machined.upgrade import StagedUpgrade, upgrade_inputs
from ichor.machinery.bootloader import BootDir
from ichor.machinery.config import load_config, validate
from ichor.machinery.errors import InstallError
from ichor.machinery.installdisk import refuse_install_extensions
from ichor.machinery.meta import MetaKey


def test_the_refusal_names_the_key_the_images_and_the_imager_flag() -> None:
    refuse_install_extensions(None, step="install")
    refuse_install_extensions([], step="upgrade")
    with pytest.raises(InstallError) as caught:
        refuse_install_extensions(["ghcr.io/a/b:1", None], step="upgrade")
    assert str(caught.value) == (
        "machine.install.extensions is not supported at upgrade: Ichor does not pull system extensions "
        "into the slot it writes (ghcr.io/a/b:1, (no image))"
    )
    assert "--system-extension-image" in str(caught.value.hint)
    assert "remove machine.install.extensions" in str(caught.value.hint)


def test_the_install_plan_refuses_it_before_looking_at_any_disk(tmp_path: Path) -> None:
    vda = tmp_path / "vda"
    vda.write_bytes(b"")
    looked: list[str] = []
    disks = _installation(tmp_path, [])
    disks.disks = lambda: looked.append("disks") or [_disk(vda)]  # type: ignore[method-assign,func-returns-value]
    loaded = _loaded(extensions=True)
    with pytest.raises(InstallError) as caught:
        disks.plan(loaded.config)
    assert str(caught.value).startswith("machine.install.extensions is not supported at install:")
    assert "ghcr.io/siderolabs/gvisor:20240606.0" in str(caught.value)
    assert looked == []
    # Without the key the plan goes on to the disks (and meets this node's missing /dev/vda).
    plain = _loaded(extensions=False)
    with pytest.raises(InstallError) as caught:
        disks.plan(plain.config)
    assert str(caught.value) == 'specified install disk does not exist: "/dev/vda"'
    assert looked == ["disks"]


def test_config_validation_keeps_talos_s_deprecation_warning() -> None:
    config = load_config(
        "version: v1alpha1\nmachine:\n  type: worker\n  install:\n    disk: /dev/vda\n"
        "    extensions:\n      - image: ghcr.io/siderolabs/gvisor:20240606.0\n"
    )
    result = validate(config, "metal")
    assert any(".machine.install.extensions is deprecated" in w for w in result.warnings), result.warnings
    with pytest.raises(InstallError):
        upgrade_inputs(config.v1alpha1.model)  # type: ignore[union-attr,arg-type]


def _loaded(extensions: bool) -> LoadedConfig:
    text = (
        "version: v1alpha1\nmachine:\n  type: worker\n  install:\n    disk: /dev/vda\n"
        + ("    extensions:\n      - image: ghcr.io/siderolabs/gvisor:20240606.0\n" if extensions else "")
        + "  registries:\n    mirrors:\n      ghcr.io:\n        endpoints: [http://10.5.0.1:5000]\n"
    )
    return LoadedConfig(load_config(text), text)


def test_the_upgrade_rpc_refuses_it_before_fetching_the_installer(tmp_path: Path) -> None:
    fetched: list[str] = []

    def fetch(image: str, mirrors: dict[str, MirrorEndpoints], work: Path, say: Any) -> InstallerAssets:
        fetched.append(image)
        raise AssertionError("the installer image must not be fetched")

    async def go() -> None:
        machine = Machine(tmp_path)
        up = _upgrades(machine, fetch=fetch)
        await up.start()
        lifecycle = Lifecycle()
        context = MachineContext(
            layout=Layout(tmp_path, "127.0.0.1", Platform.METAL), state=State(), supervisor=None,  # type: ignore[arg-type]
            events=EventBus(), store=Store(_loaded(extensions=True)),  # type: ignore[arg-type]
            lifecycle=lifecycle, etcd=None, clock=None, upgrades=up,  # type: ignore[arg-type]
        )  # fmt: skip
        for stage in (False, True):
            request = machine_pb2.UpgradeRequest(
                image="ghcr.io/siderolabs/installer:v2", preserve=True, stage=stage
            )
            with pytest.raises(GRPCError) as caught:
                await context.upgrade(request, "a1")
            assert caught.value.status is Status.FAILED_PRECONDITION
            assert caught.value.message is not None
            assert caught.value.message.startswith("machine.install.extensions is not supported at upgrade:")
            assert "ghcr.io/siderolabs/gvisor:20240606.0" in caught.value.message
            assert "--system-extension-image" in caught.value.message
        assert fetched == [] and lifecycle.upgrades == [] and lifecycle.reboots == []
        assert MetaKey.StagedUpgradeImageRef not in machine.meta_keys()

    run(go)


def test_a_staged_upgrade_under_a_config_with_it_fails_saying_why_and_is_forgotten(tmp_path: Path) -> None:
    from ichor.machined.node import _staged_upgrade

    async def go() -> None:
        machine = Machine(tmp_path)
        up = _upgrades(machine, fetch=lambda *a: (_ for _ in ()).throw(AssertionError("fetched")))
        await up.start()
        await up.stage(StagedUpgrade("ghcr.io/siderolabs/installer:v2", preserve=True, force=False))
        printed: list[str] = []
        assert not await _staged_upgrade(up)(_loaded(extensions=True), printed.append)
        assert MetaKey.StagedUpgradeImageRef not in machine.meta_keys()
        said = "\n".join(up.lines)  # type: ignore[attr-defined]
        assert "staged upgrade to ghcr.io/siderolabs/installer:v2 failed: machine.install.extensions" in said
        assert BootDir(machine.boot).state().trial is None
        assert not await _staged_upgrade(up)(_loaded(extensions=False), printed.append)  # forgotten
        assert upgrade_inputs(_loaded(extensions=False).config)[1].startswith("talos.platform=metal")

    run(go)
