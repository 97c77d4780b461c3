"""``talosctl rotate-ca``: Talos 1.7's rolling rotation of the Talos API CA and the Kubernetes API CA.

Both rotations are the same four steps, each one applied to every node (init, control planes, then
workers) as a machine config change with ``ApplyConfiguration`` mode ``no-reboot``, so no node loses
its API at any step:

1. the new CA is added to the accepted CAs (``.machine.acceptedCAs`` / ``.cluster.acceptedCAs``);
2. (Talos API) a client certificate from the new CA must work against the old server CA, through the
   endpoint and directly to each node;
3. the new CA becomes the issuing CA (``.machine.ca`` / ``.cluster.ca``: with its key on control
   planes, the certificate alone on workers) and the old one an accepted CA; the new talosconfig
   (new CA, new admin certificate) must work, through the endpoint and directly;
4. the old CA is removed from the accepted CAs and connectivity checked once more.

For Kubernetes each node's patch waits for its kubelet to restart and be healthy again (as Talos's
``PatchNodeConfigWithKubeletRestart``), connectivity is ``GET /api/v1/nodes`` with every Node Ready
(up to 3 minutes), with the admin kubeconfig the first control plane serves (fetched again after
step 3). With ``dry_run`` nothing is changed: every step prints what it would do.

The printed lines are Talos 1.7.6's (``pkg/rotate/pki/talos`` and ``kubernetes``), Go's ``%q`` and all.
This module never prints: lines go to ``printf`` and retried errors to ``log``.

Exceptions: :class:`RotateError` (a :class:`~ichor.client.ClientError`) names the step that failed;
errors of the Talos API client pass through.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from enum import StrEnum
from typing import Any, TypeVar

from ichor.client._client import Client
from ichor.client._errors import AllNodesFailedError, ClientError, ConnectionFailedError, RPCError
from ichor.client._types import NodeFailedError
from ichor.client.health import ClusterInfo
from ichor.machinery import goquote, pki
from ichor.machinery.clientconfig import Context, TalosConfig
from ichor.machinery.docident import is_v1alpha1
from ichor.machinery.generate import render_documents
from ichor.machinery.yamlio import load_documents, to_plain

__all__ = [
    "KUBERNETES_ROOT",
    "OS_ROOT",
    "Pace",
    "RotateError",
    "Section",
    "Step",
    "admin_context",
    "edit_config",
    "go_quoted",
    "rotate_kubernetes_ca",
    "rotate_talos_ca",
]

T = TypeVar("T")
Printf = Callable[[str], None]

OS_ROOT = ("OSRootSecrets.secrets.talos.dev", "os")
KUBERNETES_ROOT = ("KubernetesRootSecrets.secrets.talos.dev", "k8s")
MACHINE_CONFIG = ("MachineConfigs.config.talos.dev", "v1alpha1")
TALOS_API_CERT_TTL = timedelta(days=365)
"""Talos's ``TalosAPIDefaultCertificateValidityDuration``: the new talosconfig's certificate."""
_UNAVAILABLE, _CANCELED = 14, 1


class RotateError(ClientError):
    """A step of the rotation failed; the message names it (as Talos's ``error rotating ...``)."""


class Section(StrEnum):
    """Where a rotation's CAs live in the v1alpha1 document."""

    TALOS = "machine"
    KUBERNETES = "cluster"


class Step(StrEnum):
    ACCEPT = "accept"
    """Add the new CA to the accepted CAs."""
    SWAP = "swap"
    """Issue with the new CA, accept the old one."""
    DROP = "drop"
    """Remove the old CA from the accepted CAs."""


@dataclasses.dataclass(frozen=True)
class Pace:
    """Time for the retries (injectable, so tests do not sleep)."""

    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    monotonic: Callable[[], float] = time.monotonic


def go_quoted(values: Sequence[str]) -> str:
    """Go's ``%q`` of a ``[]string``: ``["a" "b"]``."""
    return "[" + " ".join(goquote.quote(v) for v in values) + "]"


def _b64(pem: bytes) -> str:
    return base64.b64encode(pem).decode("ascii")


def _pem(value: object) -> bytes:
    try:
        return base64.b64decode(str(value or ""), validate=True)
    except (binascii.Error, ValueError):
        return b""


def edit_config(
    text: str,
    section: Section,
    step: Step,
    *,
    new_ca: pki.CertKey,
    old_crt: bytes,
    control_plane: bool,
    with_docs: bool = True,
    with_examples: bool = True,
) -> str:
    """A node's machine config (every document) after ``step`` of the rotation of ``section``'s CA,
    re-encoded as Talos re-encodes it (``with_docs``/``with_examples``: its ``--with-docs`` and
    ``--with-examples``). CAs are compared by their certificate, whatever their base64 looks like."""
    docs = [to_plain(d) for d in load_documents(text, source="the node's machine config")]
    main = next((d for d in docs if isinstance(d, dict) and is_v1alpha1(d)), None)
    if main is None:
        raise RotateError("the node's machine config has no v1alpha1 document")
    part = main.setdefault(str(section), {})
    if not isinstance(part, dict):
        raise RotateError(f"the node's machine config has no .{section} section")
    accepted = [c for c in part.get("acceptedCAs") or [] if isinstance(c, dict)]

    if step is Step.ACCEPT:
        accepted.append({"crt": _b64(new_ca.crt)})
    elif step is Step.SWAP:
        accepted = [c for c in accepted if _pem(c.get("crt")) != new_ca.crt] + [{"crt": _b64(old_crt)}]
        part["ca"] = {"crt": _b64(new_ca.crt), "key": _b64(new_ca.key) if control_plane else ""}
    else:
        accepted = [c for c in accepted if _pem(c.get("crt")) != old_crt]
    if accepted:
        part["acceptedCAs"] = accepted
    else:
        part.pop("acceptedCAs", None)
    return render_documents(docs, with_docs=with_docs, with_examples=with_examples)


def admin_context(new_ca: pki.CertKey, endpoints: Sequence[str], *, server_ca: bytes) -> Context:
    """A talosconfig context with an ``os:admin`` certificate from ``new_ca``, trusting ``server_ca``
    (the old CA for step 2, the new one after step 3), as Talos's ``clientconfig.NewConfig``."""
    pair = pki.new_keypair(
        new_ca, organizations=["os:admin"], ttl=TALOS_API_CERT_TTL, server=False, client=True
    )
    return Context(endpoints=list(endpoints), ca=_b64(server_ca), crt=pair.crt_b64(), key=pair.key_b64())


def _unavailable(exc: BaseException, *, canceled: bool = False) -> bool:
    """Talos retries ``codes.Unavailable`` (a node whose API is restarting, a refused handshake)."""
    codes = {_UNAVAILABLE, _CANCELED} if canceled else {_UNAVAILABLE}
    if isinstance(exc, ConnectionFailedError):
        return True
    if isinstance(exc, RPCError | NodeFailedError):
        return exc.code in codes
    if isinstance(exc, AllNodesFailedError):
        return bool(exc.errors) and all(e.code in codes for e in exc.errors)
    return False


async def _retry(
    work: Callable[[], Awaitable[T]],
    *,
    limit: float,
    interval: float,
    retryable: Callable[[BaseException], bool],
    log: Printf,
    pace: Pace,
) -> T:
    """``work()`` again while it fails with a retryable error, for up to ``limit`` seconds (go-retry's
    ``Constant`` with error logging: each retried error is logged)."""
    start = pace.monotonic()
    while True:
        try:
            return await work()
        except (ClientError, OSError) as exc:
            if not retryable(exc) or pace.monotonic() - start >= limit:
                raise
            log(f"retrying error: {exc}")
        await pace.sleep(interval)


def _print_block(printf: Printf, yaml_text: str) -> None:
    for line in yaml_text.splitlines():
        printf(f"  {line}")


def _ca_yaml(crt: bytes, key: bytes) -> str:
    return f"crt: {_b64(crt)}\nkey: {_b64(key)}\n"


@dataclasses.dataclass
class _Rotation:
    """What both rotations share: the nodes, the patching, the dry run and the output."""

    cluster: ClusterInfo
    dry_run: bool
    printf: Printf
    log: Printf
    pace: Pace
    with_docs: bool
    with_examples: bool

    @property
    def control_planes(self) -> list[str]:
        return list(self.cluster.control_plane_nodes)

    @property
    def nodes(self) -> list[str]:
        return [*self.cluster.control_plane_nodes, *self.cluster.worker_nodes]

    def print_topology(self) -> None:
        self.printf("> Cluster topology:")
        self.printf(f"  - control plane nodes: {go_quoted(self.control_planes)}")
        self.printf(f"  - worker nodes: {go_quoted(self.cluster.worker_nodes)}")

    async def root_ca(self, client: Client, resource: tuple[str, str], what: str) -> bytes:
        """The issuing CA of the first control plane's root secrets, printed (certificate and key)."""
        from ichor.client._talos import Talos

        try:
            found = await Talos(client).with_node(self.control_planes[0]).get(resource[0], resource[1])
        except ClientError as exc:
            raise RotateError(f"error fetching current {what} CA: {exc}", hint=exc.hint) from None
        issuing = (found[0].spec or {}).get("issuingCA") or {} if found else {}
        crt, key = _pem(issuing.get("crt")), _pem(issuing.get("key"))
        if not crt:
            raise RotateError(f"error fetching current {what} CA: the node's {resource[0]} has no issuing CA")
        _print_block(self.printf, _ca_yaml(crt, key))
        return crt

    async def patch_all(
        self, client: Client, section: Section, step: Step, new_ca: pki.CertKey, old_crt: bytes,
        *, around: Callable[[Client, str, Callable[[], Awaitable[None]]], Awaitable[None]] | None = None,
    ) -> None:  # fmt: skip
        """Apply ``step`` to every node in Talos's order (control planes first), ``no-reboot``."""
        workers = set(self.cluster.worker_nodes)
        for node in self.nodes:
            if self.dry_run:
                self.printf(f"  - {node}: skipped (dry-run)")
                continue

            async def patch(node: str = node) -> None:
                await _retry(
                    lambda: self._patch_node(client, node, section, step, new_ca, old_crt, node not in workers),
                    limit=10, interval=0.1, retryable=lambda e: _unavailable(e, canceled=True), log=self.log,
                    pace=self.pace,
                )  # fmt: skip

            try:
                await (around(client, node, patch) if around is not None else patch())
            except ClientError as exc:
                raise RotateError(f"error patching all machine configs: error patching node {node}: {exc}",
                                  hint=exc.hint) from None  # fmt: skip
            self.printf(f"  - {node}: OK")

    async def _patch_node(
        self, client: Client, node: str, section: Section, step: Step, new_ca: pki.CertKey, old_crt: bytes,
        control_plane: bool,
    ) -> None:  # fmt: skip
        from ichor.client._talos import Talos

        talos = Talos(client).with_node(node)
        found = await talos.get(MACHINE_CONFIG[0], MACHINE_CONFIG[1])
        text = edit_config(
            found[0].yaml_spec, section, step, new_ca=new_ca, old_crt=old_crt, control_plane=control_plane,
            with_docs=self.with_docs, with_examples=self.with_examples,
        )  # fmt: skip
        await talos.apply_config(text, mode="no-reboot")


async def rotate_talos_ca(
    client: Client,
    *,
    cluster: ClusterInfo,
    new_ca: pki.CertKey,
    context_name: str,
    endpoints: Sequence[str],
    dry_run: bool = True,
    with_docs: bool = True,
    with_examples: bool = True,
    printf: Printf,
    log: Printf = lambda _line: None,
    pace: Pace = Pace(),
) -> TalosConfig:
    """Rotate the Talos API CA (Talos's ``pkg/rotate/pki/talos``); return the new talosconfig (one
    context, ``context_name``, with ``endpoints``), which the caller saves. In ``dry_run`` it is
    returned too, but nothing on the nodes changed and it is of no use."""
    run = _Rotation(cluster, dry_run, printf, log, pace, with_docs, with_examples)
    printf(f"> Starting Talos API PKI rotation, dry-run mode {str(dry_run).lower()}...")
    printf(f"> Using config context: {goquote.quote(context_name)}")
    printf(f"> Using Talos API endpoints: {go_quoted(endpoints)}")
    run.print_topology()
    printf("> Current Talos CA:")
    old_crt = await run.root_ca(client, OS_ROOT, "Talos")
    printf("> New Talos CA:")
    _print_block(printf, _ca_yaml(new_ca.crt, new_ca.key))

    printf("> Generating new talosconfig:")
    admin = admin_context(new_ca, endpoints, server_ca=new_ca.crt)
    intermediate_context = dataclasses.replace(admin, ca=_b64(old_crt))
    new_config = TalosConfig(context=context_name, contexts={context_name: admin})
    printf(new_config.to_yaml())

    def client_for(context: Context, *, direct_to: str | None = None) -> Client:
        return Client.from_context(
            context, name=context_name, endpoints=[direct_to] if direct_to else endpoints
        )

    intermediate = client_for(intermediate_context)
    new = client_for(admin)
    try:
        await _verify(run, client, "existing PKI")
        printf("> Adding new Talos CA as accepted...")
        await run.patch_all(client, Section.TALOS, Step.ACCEPT, new_ca, old_crt)
        await _verify(run, intermediate, "new client cert, but old server CA")
        await _verify(
            run, None, "new client cert, but old server CA", direct=intermediate_context, make=client_for
        )
        printf("> Making new Talos CA the issuing CA, old Talos CA the accepted CA...")
        await run.patch_all(intermediate, Section.TALOS, Step.SWAP, new_ca, old_crt)
        await _verify(run, new, "new PKI")
        await _verify(run, None, "new PKI", direct=admin, make=client_for)
        printf("> Removing old Talos CA from the accepted CAs...")
        await run.patch_all(new, Section.TALOS, Step.DROP, new_ca, old_crt)
        await _verify(run, new, "new PKI")
    finally:
        await intermediate.aclose()
        await new.aclose()
    return new_config


async def _verify(
    run: _Rotation,
    client: Client | None,
    label: str,
    *,
    direct: Context | None = None,
    make: Callable[..., Client] | None = None,
) -> None:
    """``Version`` from every node: through ``client``'s endpoint, or (``direct``) dialling each node."""
    from ichor.client._talos import Talos

    run.printf(f"> Verifying {'direct ' if direct is not None else ''}connectivity with {label}:")
    for node in run.nodes:
        if run.dry_run:
            run.printf(f"  - {node}: OK (dry-run)")
            continue
        own = make(direct, direct_to=node) if direct is not None and make is not None else None
        talos = (
            Talos(own) if own is not None else Talos(client).with_node(node) if client is not None else None
        )
        assert talos is not None
        try:
            versions = await _retry(
                talos.version, limit=10, interval=0.1, retryable=_unavailable, log=run.log, pace=run.pace
            )
        except ClientError as exc:
            raise RotateError(f"error calling version API on node {node}: {exc}", hint=exc.hint) from None
        finally:
            if own is not None:
                await own.aclose()
        run.printf(f"  - {node}: OK (version {versions[0].tag if versions else ''})")


# --- Kubernetes ------------------------------------------------------------------------------------


async def rotate_kubernetes_ca(
    client: Client,
    *,
    cluster: ClusterInfo,
    new_ca: pki.CertKey,
    k8s_endpoint: str = "",
    dry_run: bool = True,
    with_docs: bool = True,
    with_examples: bool = True,
    printf: Printf,
    log: Printf = lambda _line: None,
    pace: Pace = Pace(),
    ready_limit: float = 180.0,
    kubelet_limit: float = 300.0,
) -> None:
    """Rotate the Kubernetes API CA (Talos's ``pkg/rotate/pki/kubernetes``) over ``client`` (after a
    Talos CA rotation, the new talosconfig's client)."""
    run = _Rotation(cluster, dry_run, printf, log, pace, with_docs, with_examples)
    printf(f"> Starting Kubernetes API PKI rotation, dry-run mode {str(dry_run).lower()}...")
    run.print_topology()
    printf("> Building current Kubernetes client...")
    current = await _kube_client(client, run.control_planes[0], k8s_endpoint)
    printf("> Current Kubernetes CA:")
    old_crt = await run.root_ca(client, KUBERNETES_ROOT, "Kubernetes")
    printf("> New Kubernetes CA:")
    _print_block(printf, _ca_yaml(new_ca.crt, new_ca.key))

    async def around(c: Client, node: str, patch: Callable[[], Awaitable[None]]) -> None:
        await _with_kubelet_restart(c, node, patch, limit=kubelet_limit, pace=pace)

    await _nodes_ready(run, current, "existing PKI", limit=ready_limit)
    printf("> Adding new Kubernetes CA as accepted...")
    await run.patch_all(client, Section.KUBERNETES, Step.ACCEPT, new_ca, old_crt, around=around)
    printf("> Making new Kubernetes CA the issuing CA, old Kubernetes CA the accepted CA...")
    await run.patch_all(client, Section.KUBERNETES, Step.SWAP, new_ca, old_crt, around=around)
    printf("> Building new Kubernetes client...")
    new = await _kube_client(client, run.control_planes[0], k8s_endpoint)
    await _nodes_ready(run, new, "new PKI", limit=ready_limit)
    printf("> Removing old Kubernetes CA from the accepted CAs...")
    await run.patch_all(client, Section.KUBERNETES, Step.DROP, new_ca, old_crt, around=around)
    await _nodes_ready(run, new, "new PKI", limit=ready_limit)


async def _kube_client(client: Client, node: str, endpoint: str) -> Any:
    from ichor.client.health_k8s import _with_endpoint, fetch_kubeconfig
    from ichor.kubeapi import KubeAPIError, KubeClient, load_kubeconfig

    try:
        text = await fetch_kubeconfig(client.with_node(node))
        config = load_kubeconfig(text, source=f"kubeconfig from {node}")
        if endpoint:
            config = dataclasses.replace(config, server=_with_endpoint(config.server, endpoint))
        return KubeClient(config)
    except (ClientError, KubeAPIError) as exc:
        raise RotateError(f"error fetching kubeconfig: {exc}", hint=getattr(exc, "hint", None)) from None


async def _nodes_ready(run: _Rotation, kube: Any, label: str, *, limit: float) -> None:
    """Every Kubernetes Node Ready, retried each second for up to ``limit`` seconds."""
    from ichor.kubeapi import KubeAPIError

    run.printf(f"> Verifying connectivity with {label}...")
    if run.dry_run:
        run.printf(" - OK (dry-run mode)")
        return
    start = run.pace.monotonic()
    while True:
        try:
            listing = await kube.get("/api/v1/nodes")
            items = [i for i in (listing or {}).get("items") or [] if isinstance(i, dict)]
            not_ready = [
                str((i.get("metadata") or {}).get("name", ""))
                for i in items
                if not any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (i.get("status") or {}).get("conditions") or []
                )
            ]
            if not not_ready:
                run.printf(f" - OK ({len(items)} nodes ready)")
                return
            problem = f"nodes not ready: {go_quoted(not_ready)}"
        except KubeAPIError as exc:
            problem = str(exc)
        if run.pace.monotonic() - start >= limit:
            raise RotateError(f"Kubernetes API with {label}: {problem}")
        run.log(f"retrying error: {problem}")
        await run.pace.sleep(1.0)


async def _kubelet(client: Client, node: str) -> Any:
    from ichor.client._talos import Talos

    found = await Talos(client).with_node(node).services("kubelet")
    if not found:
        raise RotateError(f"{node}: the node has no kubelet service")
    return found[0]


async def _with_kubelet_restart(
    client: Client, node: str, patch: Callable[[], Awaitable[None]], *, limit: float, pace: Pace
) -> None:
    """Talos's ``PatchNodeConfigWithKubeletRestart``: the kubelet must be healthy, then ``patch()``,
    then the kubelet must go down and come back healthy (it restarts on every change of the CAs it
    trusts)."""
    before = await _kubelet(client, node)
    if not before.healthy:
        raise RotateError("kubelet is not healthy", hint=f"check `talosctl -n {node} service kubelet`")
    seen = len(before.events)
    last = before.events[-1].time if before.events else None
    await patch()
    start, restarted = pace.monotonic(), False
    while True:
        now = await _retry(lambda: _kubelet(client, node), limit=10, interval=0.5, retryable=_unavailable,
                           log=lambda _line: None, pace=pace)  # fmt: skip
        fresh = [e for e in now.events if last is None or (e.time is not None and e.time > last)] or list(
            now.events[seen:]
        )
        restarted = restarted or any(e.state != "Running" for e in fresh)
        if restarted and now.healthy:
            return
        if pace.monotonic() - start >= limit:
            what = "come back healthy" if restarted else "restart"
            raise RotateError(
                f"kubelet did not {what} within {limit:g}s of the config change",
                hint=f"check `talosctl -n {node} service kubelet` and `talosctl -n {node} logs kubelet`",
            )
        await pace.sleep(0.5)
