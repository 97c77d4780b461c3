"""The redacted machine config: every secret field replaced, everything else (comments too) kept."""

from __future__ import annotations

import pytest

from ichor.machinery.redact import REDACTED, SECRET_PATHS, redact_config, secret_values
from ichor.machinery.yamlio import load_documents


@pytest.fixture(scope="module")
def controlplane(tmp_path_factory: pytest.TempPathFactory) -> str:
    from ichor.cli._errors import run_with_error_edge
    from ichor.cli._root import _invoke

    out = tmp_path_factory.mktemp("gen")
    assert (
        run_with_error_edge(lambda: _invoke(["gen", "config", "r", "https://10.0.0.1:6443", "-o", str(out)]))
        == 0
    )
    return (out / "controlplane.yaml").read_text()


def test_every_secret_is_replaced_and_nothing_else(controlplane: str) -> None:
    secrets = secret_values(controlplane)
    assert len(secrets) == 9  # all of SECRET_PATHS but aescbcEncryptionSecret, which gen config leaves unset
    redacted = redact_config(controlplane)
    assert not any(secret in redacted for secret in secrets)
    assert secret_values(redacted) == [REDACTED] * 9
    before, after = load_documents(controlplane)[0], load_documents(redacted)[0]
    assert after["cluster"]["ca"]["crt"] == before["cluster"]["ca"]["crt"]  # certificates are public
    assert after["cluster"]["clusterName"] == "r"
    assert "# The `token` is used by a machine to join the PKI of the cluster." in redacted
    assert redacted.count("\n") == controlplane.count("\n")


def test_paths_absent_or_empty_are_left_alone() -> None:
    text = (
        "version: v1alpha1\nmachine:\n    type: worker\n    token: ''\ncluster:\n    ca:\n        crt: abc\n"
    )
    assert redact_config(text) == text
    assert secret_values(text) == []
    extra = text + "---\napiVersion: v1alpha1\nkind: SideroLinkConfig\napiUrl: https://x\n"
    assert redact_config(extra).endswith("kind: SideroLinkConfig\napiUrl: https://x\n")
    assert len(SECRET_PATHS) == 10
