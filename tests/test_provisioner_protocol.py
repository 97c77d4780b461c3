"""The Provisioner protocol: every ``--provisioner`` name has one module implementing it, and create's
flow asks it instead of branching on the name (a fourth platform is one module and one line)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from ichor.machinery.errors import MachineryError
from ichor.provision._provisioner import Provisioner, ProvisionerName, provisioner_for

_SRC = Path(__file__).resolve().parents[1] / "src" / "ichor"


@pytest.mark.parametrize("name", list(ProvisionerName))
def test_every_provisioner_name_has_an_implementation_with_every_member(name: ProvisionerName) -> None:
    provider = provisioner_for(name)
    assert provider.name is name and provisioner_for(str(name)) is provider
    for member, declared in inspect.getmembers(Provisioner):
        if member.startswith("_"):
            continue
        ours = getattr(provider, member)
        if callable(declared):
            assert (
                list(inspect.signature(ours).parameters) == list(inspect.signature(declared).parameters)[1:]
            )
    for attribute in ("nodes_noun", "owns_network", "node_limits", "runs_kubernetes", "maintenance_timeout"):
        assert hasattr(provider, attribute)


def test_an_unknown_provisioner_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(MachineryError, match="unknown provisioner 'vbox'") as caught:
        provisioner_for("vbox")
    assert caught.value.hint == "pass --provisioner process or container or qemu"


def test_the_create_and_destroy_flow_does_not_branch_on_a_provisioner_name() -> None:
    for module in ("_cluster.py", "_configs.py", "_teardown.py", "_remains.py"):
        text = (_SRC / "provision" / module).read_text()
        for branch in ('provisioner == "container"', "provisioner == CONTAINER", 'provisioner != "container"',
                       "provisioner != CONTAINER", "if container:"):  # fmt: skip
            assert branch not in text, f"{module}: {branch}"
