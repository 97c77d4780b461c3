"""What a node accepts as a bootable config: valid, and complete enough to serve its API."""

from __future__ import annotations

import pytest

from ichor.machined.configstore import load as _load
from ichor.machinery.errors import MachineryError
from ichor.machinery.generate import GenOptions, OutputType, generate
from ichor.machinery.secrets import SecretsBundle


@pytest.fixture(scope="module")
def controlplane() -> str:
    bundle = SecretsBundle.generate()
    opts = GenOptions(cluster_name="c", endpoint="https://127.0.0.1:6443")
    return generate(bundle, opts, output_types=[OutputType.CONTROLPLANE], with_docs=False).outputs[
        OutputType.CONTROLPLANE
    ]


def test_generated_config_is_bootable(controlplane: str) -> None:
    assert _load(controlplane, "test").v1alpha1["machine"]["type"] == "controlplane"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("    ca:\n        crt: LS0t", "    ca:\n        crt: AAAA", "incomplete config: machine.ca"),
        ("    token: ", "    token: ''\n    oldtoken: ", "unknown keys"),
    ],
)
def test_damaged_configs_are_refused(controlplane: str, old: str, new: str, message: str) -> None:
    with pytest.raises(MachineryError, match=message):
        _load(controlplane.replace(old, new, 1), "test")
