"""``talosctl rotate-ca``'s pieces (``ichor.client.rotate_ca``): each step's machine config edit as
Talos 1.7.6's rotation makes it, the new talosconfig, Go's ``%q`` of the node lists, the retries of
``codes.Unavailable``, and the wait for the kubelet's restart around a Kubernetes step."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ichor.client import ConnectionFailedError, RPCError
from ichor.client import rotate_ca as rotate
from ichor.client._types import Service, ServiceEvent, ServiceHealth
from ichor.client.rotate_ca import Pace, RotateError, Section, Step, edit_config
from ichor.machinery import pki
from ichor.machinery.config import load_config
from ichor.machinery.yamlio import load_documents, to_plain

OLD_TALOS = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
NEW_TALOS = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
OLD_K8S = pki.new_ecdsa_ca(organization="kubernetes", ttl=timedelta(days=1))
NEW_K8S = pki.new_ecdsa_ca(organization="kubernetes", ttl=timedelta(days=1))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _config(machine_type: str, *, with_keys: bool) -> str:
    key = _b64(OLD_TALOS.key) if with_keys else ""
    k8s_key = _b64(OLD_K8S.key) if with_keys else ""
    return (
        f"version: v1alpha1\nmachine:\n  type: {machine_type}\n  token: abcdef.0123456789abcdef\n"
        f"  ca:\n    crt: {_b64(OLD_TALOS.crt)}\n    key: '{key}'\n"
        "  certSANs: [10.5.0.2]\n"
        "cluster:\n  controlPlane: {endpoint: 'https://10.5.0.2:6443'}\n  clusterName: c1\n"
        f"  token: abcdef.0123456789abcdef\n  ca:\n    crt: {_b64(OLD_K8S.crt)}\n    key: '{k8s_key}'\n"
        "---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: nut-client\n"
        "configFiles:\n  - content: MONITOR upsmonHost 1 remote pass password\n    mountPath: /usr/local/etc/nut/upsmon.conf\n"
    )


def _docs(text: str) -> list[dict[str, Any]]:
    return [to_plain(d) for d in load_documents(text, source="test")]


def _crts(part: dict[str, Any]) -> list[bytes]:
    return [base64.b64decode(c["crt"]) for c in part.get("acceptedCAs") or []]


@pytest.mark.parametrize(
    ("section", "old", "new"), [(Section.TALOS, OLD_TALOS, NEW_TALOS), (Section.KUBERNETES, OLD_K8S, NEW_K8S)]
)
def test_each_step_edits_the_section_as_talos_and_nothing_else(
    section: Section, old: pki.CertKey, new: pki.CertKey
) -> None:
    before = _config("controlplane", with_keys=True)
    steps = {}
    text = before
    for step in Step:
        text = edit_config(text, section, step, new_ca=new, old_crt=old.crt, control_plane=True, with_docs=False,
                           with_examples=False)  # fmt: skip
        load_config(text)  # every step's config is one a node takes
        steps[step] = _docs(text)
    part = str(section)
    assert _crts(steps[Step.ACCEPT][0][part]) == [new.crt]
    assert base64.b64decode(steps[Step.ACCEPT][0][part]["ca"]["crt"]) == old.crt
    swapped = steps[Step.SWAP][0][part]
    assert _crts(swapped) == [old.crt]
    assert swapped["ca"] == {"crt": _b64(new.crt), "key": _b64(new.key)}
    dropped = steps[Step.DROP][0][part]
    assert "acceptedCAs" not in dropped and dropped["ca"] == swapped["ca"]
    # Only that section's CAs changed: the other documents and every other field are as they were.
    final, original = steps[Step.DROP], _docs(before)
    assert final[1] == original[1]
    other = str(Section.KUBERNETES if section is Section.TALOS else Section.TALOS)
    assert final[0][other] == original[0][other]
    final[0][part].pop("ca"), original[0][part].pop("ca")
    assert final[0] == original[0]


def test_a_worker_gets_the_new_ca_without_its_key_and_other_accepted_cas_stay() -> None:
    extra = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    text = _config("worker", with_keys=False).replace(
        "  certSANs:", f"  acceptedCAs:\n    - crt: {_b64(extra.crt)}\n  certSANs:"
    )
    for step in Step:
        text = edit_config(
            text, Section.TALOS, step, new_ca=NEW_TALOS, old_crt=OLD_TALOS.crt, control_plane=False
        )
        if step is Step.SWAP:
            machine = _docs(text)[0]["machine"]
            assert machine["ca"] == {"crt": _b64(NEW_TALOS.crt), "key": ""}
            assert _crts(machine) == [extra.crt, OLD_TALOS.crt]
    assert _crts(_docs(text)[0]["machine"]) == [extra.crt]
    assert "# " in text  # re-encoded with the docs, as Talos's --with-docs (the default)


def test_a_config_without_the_main_document_is_refused() -> None:
    with pytest.raises(RotateError, match="no v1alpha1 document"):
        edit_config("apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: x\n", Section.TALOS, Step.ACCEPT,
                    new_ca=NEW_TALOS, old_crt=OLD_TALOS.crt, control_plane=True)  # fmt: skip


def test_the_new_talosconfig_has_an_admin_certificate_from_the_new_ca() -> None:
    context = rotate.admin_context(NEW_TALOS, ["10.5.0.2"], server_ca=OLD_TALOS.crt)
    assert context.endpoints == ["10.5.0.2"] and base64.b64decode(context.ca) == OLD_TALOS.crt
    crt = base64.b64decode(context.crt)
    assert pki.issued_by_any(crt, NEW_TALOS.crt) and not pki.issued_by_any(crt, OLD_TALOS.crt)
    assert context.client_certificate().subject.rfc4514_string() == "O=os:admin"


def test_node_lists_print_as_gos_q() -> None:
    assert rotate.go_quoted(["10.5.0.2", "10.5.0.3"]) == '["10.5.0.2" "10.5.0.3"]'
    assert rotate.go_quoted([]) == "[]"


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    async def sleep(self, seconds: float) -> None:
        self.now += seconds

    def pace(self) -> Pace:
        return Pace(sleep=self.sleep, monotonic=lambda: self.now)


def test_unavailable_is_retried_for_ten_seconds_and_other_errors_are_not() -> None:
    clock, logged, calls = _Clock(), [], []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionFailedError("tls: unknown certificate authority", [])
        return "ok"

    async def refused() -> str:
        raise RPCError(7, "not allowed")

    async def down() -> str:
        raise RPCError(14, "connection refused")

    async def go() -> None:
        retry = {"limit": 10, "interval": 0.1, "retryable": rotate._unavailable, "log": logged.append,
                 "pace": clock.pace()}  # fmt: skip
        assert await rotate._retry(flaky, **retry) == "ok"
        assert logged == ["retrying error: tls: unknown certificate authority"] * 2
        with pytest.raises(RPCError, match="not allowed"):
            await rotate._retry(refused, **retry)
        start = clock.now
        with pytest.raises(RPCError, match="connection refused"):
            await rotate._retry(down, **retry)
        assert 10 <= clock.now - start < 10.2

    asyncio.run(go())


def _kubelet(state: str, healthy: bool, *events: tuple[str, int]) -> Service:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    return Service(
        node="10.5.0.3", id="kubelet", state=state,
        health=ServiceHealth(unknown=False, healthy=healthy, last_message="", last_change=None),
        events=tuple(ServiceEvent(s, "", base + timedelta(seconds=t)) for s, t in events),
    )  # fmt: skip


def test_a_kubernetes_step_waits_for_the_kubelet_to_restart_and_be_healthy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running = [("Preparing", 0), ("Running", 1)]
    seen = [
        _kubelet("Running", True, *running),  # before the patch
        _kubelet("Running", True, *running),  # not restarted yet
        _kubelet("Preparing", False, *running, ("Finished", 5), ("Preparing", 6)),
        _kubelet("Running", False, *running, ("Finished", 5), ("Preparing", 6), ("Running", 7)),
        _kubelet("Running", True, *running, ("Finished", 5), ("Preparing", 6), ("Running", 7)),
    ]
    asked: list[int] = []
    patched: list[int] = []

    async def kubelet(_client: Any, _node: str) -> Service:
        asked.append(1)
        return seen[min(len(asked), len(seen)) - 1]

    async def patch() -> None:
        patched.append(len(asked))

    monkeypatch.setattr(rotate, "_kubelet", kubelet)
    clock = _Clock()
    asyncio.run(rotate._with_kubelet_restart(None, "10.5.0.3", patch, limit=60, pace=clock.pace()))  # type: ignore[arg-type]
    assert patched == [1] and len(asked) == 5

    # A kubelet that never restarts is an error naming what it waited for, after the limit.
    asked.clear()
    seen[:] = [_kubelet("Running", True, *running)]
    with pytest.raises(RotateError, match="did not restart within 5s"):
        asyncio.run(rotate._with_kubelet_restart(None, "10.5.0.3", patch, limit=5, pace=clock.pace()))  # type: ignore[arg-type]
    seen[:] = [_kubelet("Waiting", False, *running)]
    with pytest.raises(RotateError, match="kubelet is not healthy"):
        asyncio.run(rotate._with_kubelet_restart(None, "10.5.0.3", patch, limit=5, pace=clock.pace()))  # type: ignore[arg-type]


def test_the_command_takes_talos_flags_and_is_a_dry_run_unless_told(talosctl: Any) -> None:
    shown = talosctl("rotate-ca", "--help")
    assert shown.exit_code == 0
    for flag in ("--init-node", "--control-plane-nodes", "--worker-nodes", "--k8s-endpoint", "--with-docs",
                 "--with-examples", "--output", "--talos", "--kubernetes"):  # fmt: skip
        assert flag in shown.stdout
    assert "[default: dry-run]" in shown.stdout
    wrong = talosctl("rotate-ca", "--dry-run=maybe")
    assert wrong.exit_code == 2 and 'invalid argument "maybe" for "--dry-run" flag' in wrong.stderr
