"""``cluster create`` for process nodes (show and destroy are :mod:`._teardown`'s).

create knows a node's state only through its API, as a user would: a node is in maintenance mode
when its maintenance API answers with the maintenance stage, and the cluster is up and etcd healthy
when :mod:`ichor.client.health`'s stages (those of ``talosctl health``) pass. It never reads files
under a node's root for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ichor.images import parse_mirror
from ichor.machinery import proc
from ichor.machinery.clientconfig import GlobalOptions
from ichor.machinery.constants import DEFAULT_DNS_DOMAIN, DEFAULT_KUBERNETES_VERSION, KUBEPRISM_PORT
from ichor.machinery.errors import MachineryError
from ichor.machinery.files import write_atomic
from ichor.provision import _cgroups, _remains
from ichor.provision import _network as net
from ichor.provision._addresses import DISCOVERY_PORT, discovery_address
from ichor.provision._configs import (
    PROCESS,
    Patches,
    check_kubernetes_version_flag,
    check_talos_version_flag,
    contract_of,
    gen_options,
    load_input_dir,
    node_configs,
)
from ichor.provision._extension_images import fetch_extensions, plan_extensions
from ichor.provision._process import start_launcher  # noqa: F401 (the e2e tests start single nodes with it)
from ichor.provision._processes import tags
from ichor.provision._provisioner import ProvisionerName, provisioner_for
from ichor.provision._record import ClusterRecord, NodeRecord, cluster_flags
from ichor.provision._registry import check_installed as check_registry_installed
from ichor.provision._registry import mirrors_for, registry_log, start_registry
from ichor.provision._teardown import context_digest, forget_context, stop_all
from ichor.provision._wait import REACHABLE, WaitPlan, narrow, split_plan, wait_healthy, wait_plan

if TYPE_CHECKING:
    from ichor.client.health import ClusterInfo
    from ichor.machinery.patch import Patch

DEFAULT_CIDR = "127.5.0.0/24"
VIP_OFFSET = 50
"""``--use-vip``: the control planes share the CIDR's 50th address (Talos's ``vipOffset``)."""
DISCOVERY_TIMEOUT = 30.0
MAINTENANCE_TIMEOUT = timedelta(seconds=60)
"""How long a new node process may take to answer on its maintenance API."""


def create(
    *,
    name: str,
    cidr: str,
    controlplanes: int,
    workers: int,
    state: Path,
    talosconfig: Path,
    config_patches: Sequence[str] = (),
    cp_patches: Sequence[str] = (),
    worker_patches: Sequence[str] = (),
    wait_timeout: float = 600.0,
    bootstrap: bool = True,
    wait: bool = True,
    progress: Callable[[str], None] = print,
    provisioner: str = PROCESS,
    mtu: int = 1500,
    nameservers: Sequence[str] = (),
    registry_mirrors: Sequence[str] = (),
    static_addresses: bool = False,
    with_registry: str | None = None,
    extensions: Sequence[str] = (),
    extra_cidr: str = "",
    kubernetes_images: str = "upstream",
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
    talos_version: str = "",
    dns_domain: str = DEFAULT_DNS_DOMAIN,
    kube_prism_port: int = KUBEPRISM_PORT,
    custom_cni_url: str = "",
    discovery: bool = True,
    debug: bool = False,
    install_image: str = "",
    registry_insecure: Sequence[str] = (),
    use_vip: bool = False,
    endpoint: str = "",
    init_node_as_endpoint: bool = False,
    input_dir: str = "",
    cpus: dict[str, str] | None = None,
    memory_mb: dict[str, int] | None = None,
    kubeconfig: Path | None = None,
    skip_boot_phase_finished: bool = False,
    skip_node_readiness: bool = False,
    vm_flags: dict[str, object] | None = None,
) -> ClusterRecord:
    """Create a cluster of process nodes, as a user would: boot, apply configs, merge talosconfig,
    bootstrap; then (``wait``) wait until every node's API answers and the cluster passes
    ``talosctl health`` within ``wait_timeout`` seconds: every stage on container nodes with
    ``kubernetes_images="local"``, the etcd stages otherwise, saying why (:mod:`._wait`).

    ``provisioner`` is ``process`` (node processes on the loopback) or ``container`` (each node in
    namespaces of its own on a bridge, :mod:`._container`; root only). ``extra_cidr`` (container
    nodes only, Ichor's own) gives every node a second network, eth1, for multihoming.
    ``kubernetes_version`` (``v`` optional, one Talos 1.7 runs) tags the kubelet and control-plane images
    of the generated configs; the locally built images are of :data:`DEFAULT_KUBERNETES_VERSION`, or of
    another release :mod:`ichor.kubebuild` knows (built on demand: an upgrade's older version).

    ``registry_mirrors`` (``<registry host>=<mirror URL>``) become ``machine.registries.mirrors`` of
    every node, as in Talos. ``with_registry`` (comma-separated registry hosts, an Ichor extension)
    starts the cluster's own registry on the CIDR's first address (:mod:`._registry`) and adds a
    mirror to it for each of those hosts. ``kubernetes_images="local"`` (container nodes) does the same for
    the registries of Talos's Kubernetes images (:data:`KUBERNETES_REGISTRIES`) and, before any node
    starts, builds (:mod:`ichor.kubebuild`, cached) and pushes every image the cluster needs to it, and
    gives each node the CNI reference plugins at ``/opt/cni/bin``.

    The config flags (``talos_version`` ... ``init_node_as_endpoint``) are Talos's ``cluster create``
    flags of the same names (:mod:`._configs`); ``input_dir`` takes the configs from there instead.
    ``cpus``/``memory_mb`` (by node type) limit each container node's cgroup (:mod:`._cgroups`).
    ``kubeconfig``: where the admin kubeconfig is merged once the waits passed (None: not merged,
    ``--skip-kubeconfig``); ``skip_*``: the health stages left out (:func:`._wait.narrow`).
    ``vm_flags``: the VM flags (``--disk``, ``--vmlinuz-path``, ... by keyword name) the qemu
    provisioner takes (:mod:`._qemu`) and the others refuse.

    Everything a user can get wrong (counts, CIDR, patches, an address in use) is refused before
    anything starts. A create that fails later stops every process it started and takes its context
    out of the talosconfig again, keeping the state directory (the logs) for ``cluster destroy``;
    one interrupted (Ctrl-C) removes that too.
    """
    from ichor.machinery.patch import load_patches

    if controlplanes < 1:
        raise MachineryError(
            "a cluster needs at least one control plane", hint="pass --controlplanes 1 or more"
        )
    state_dir = (state.expanduser() / name).resolve()
    if (state_dir / "cluster.yaml").exists():
        raise MachineryError(
            f"cluster {name!r} already exists in {state_dir}",
            hint=f"destroy it first: talosctl cluster destroy {cluster_flags(state, name)}",
        )
    provider = provisioner_for(provisioner)
    bridged = provider.owns_network
    provider.check_host()
    addresses = provider.addresses(cidr, controlplanes + workers)
    provider.check_flags({"extra_cidr": extra_cidr, "nodes": controlplanes + workers, "static_addresses": static_addresses,
                          "extensions": list(extensions), **(vm_flags or {})})  # fmt: skip
    if not 68 <= mtu <= 65535:
        raise MachineryError(
            f"--mtu {mtu} is out of range", hint="pass --mtu between 68 and 65535 (default 1500)"
        )
    mirrors = [parse_mirror(m) for m in registry_mirrors]
    cpus, memory_mb = dict(cpus or {}), dict(memory_mb or {})
    vip = _check_node_flags(
        cidr,
        provider.name is ProvisionerName.CONTAINER,
        controlplanes + workers,
        use_vip,
        cpus,
        memory_mb,
        workers=workers,
        limits=provider.node_limits,
    )
    talos_version = check_talos_version_flag(talos_version)
    _check_config_flags(kube_prism_port, custom_cni_url, endpoint, dns_domain)
    if input_dir:
        load_input_dir(Path(input_dir))  # refused now if unreadable or not for container mode
    local_kubernetes = provider.name is ProvisionerName.CONTAINER and kubernetes_images == "local"
    kubernetes_version = check_kubernetes_version_flag(kubernetes_version, local=local_kubernetes)
    if local_kubernetes:
        mirrored = {m.registry for m in mirrors}
        wanted = [h for h in KUBERNETES_REGISTRIES if h not in mirrored]
        hosts = [h.strip() for h in (with_registry or "").split(",") if h.strip()]
        with_registry = ",".join(dict.fromkeys([*hosts, *wanted])) or with_registry
    if with_registry is not None:
        check_registry_installed()
        mirrors += mirrors_for(with_registry, net.gateway(cidr) if bridged else discovery_address(cidr))
    if bridged:
        nameservers = list(nameservers) or [net.gateway(cidr)]
        net.check_nameservers(cidr, nameservers)
    for server in () if bridged else nameservers:
        try:
            ipaddress.ip_address(server)
        except ValueError:
            raise MachineryError(
                f"--nameservers entry {server!r} is not an IP address",
                hint="pass e.g. --nameservers 8.8.8.8,1.1.1.1",
            ) from None
    patches = Patches(
        common=load_patches(list(config_patches), flag="--config-patch"),
        controlplane=load_patches(list(cp_patches), flag="--config-patch-control-plane"),
        worker=load_patches(list(worker_patches), flag="--config-patch-worker"),
    )
    extension_sources = plan_extensions(
        extensions, cidr=cidr, container=provider.name is ProvisionerName.CONTAINER
    )
    provider.check_free(name, cidr, state, addresses, controlplanes, extra_cidr)

    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    record = ClusterRecord(
        name=name, cidr=cidr, state_dir=str(state_dir), provisioner=str(provider.name), mtu=mtu,
        nameservers=list(nameservers), registry_mirrors=[f"{m.registry}={m.endpoint}" for m in mirrors],
        static_addresses=static_addresses,
        extra_cidr=extra_cidr, kubernetes_version=kubernetes_version, talos_version=talos_version,
        dns_domain=dns_domain, kube_prism_port=kube_prism_port, custom_cni_url=custom_cni_url,
        discovery=discovery, debug=debug, install_image=install_image, registry_insecure=list(registry_insecure),
        vip=vip, endpoint=endpoint, init_node_as_endpoint=init_node_as_endpoint,
        input_dir=str(Path(input_dir).expanduser().resolve()) if input_dir else "", cpus=cpus, memory_mb=memory_mb,
        kubeconfig=str(kubeconfig.expanduser()) if kubeconfig is not None else "",
        vm=dict(vm_flags or {}) if provider.name is ProvisionerName.QEMU else {},
    )  # fmt: skip
    for i in range(controlplanes + workers):
        kind = "controlplane" if i < controlplanes else "worker"
        index = i + 1 if kind == "controlplane" else i - controlplanes + 1
        node_name = f"{name}-{kind}-{index}"
        record.nodes.append(NodeRecord(node_name, kind, addresses[i], str(state_dir / node_name)))
    for node in record.nodes:
        provider.plan_node(record, node)
    record.save()
    try:
        provider.create_network(record, progress)
        if with_registry is not None:
            _start_registry(record, bridged, progress)
        if local_kubernetes:
            _serve_kubernetes(record, progress)
        if extension_sources:
            record.extensions = fetch_extensions(extension_sources, state_dir)
            record.save()
        plan = narrow(
            wait_plan(
                container=provider.name is ProvisionerName.CONTAINER,
                kubernetes_images=kubernetes_images,
                why_not=provider.kubernetes_wait_skipped,
            ),
            skip_boot_phase_finished=skip_boot_phase_finished,
            skip_node_readiness=skip_node_readiness,
        )
        _bring_up(
            record,
            patches,
            talosconfig.expanduser(),
            wait_timeout,
            bootstrap,
            plan if wait else None,
            progress,
        )
    except KeyboardInterrupt:
        progress("interrupted: removing what create started")
        with _sigint_ignored():
            _undo(record, state, progress, keep_logs=False)
        raise
    except Exception:
        _undo(record, state, progress, keep_logs=True)
        raise
    return record


def _check_node_flags(
    cidr: str,
    container: bool,
    count: int,
    use_vip: bool,
    cpus: dict[str, str],
    memory_mb: dict[str, int],
    *,
    workers: int = 0,
    limits: bool | None = None,
) -> str:
    """``--use-vip`` (container nodes only), ``--cpus`` and ``--memory`` (where the provisioner has
    ``limits``: container and VM nodes), checked; returns the VIP ("" without)."""
    why = "process nodes share this machine's network and cgroups (no address or limit of their own)"
    limits = container if limits is None else limits
    for given, flag, allowed in ((use_vip, "--use-vip", container), (cpus, "--cpus", limits),
                                 (memory_mb, "--memory", limits)):  # fmt: skip
        if given and not allowed:
            raise MachineryError(
                f"{flag} needs container nodes: {why}",
                hint=f"pass --provisioner container (as root), or leave {flag} out",
            )
    for kind, text in cpus.items():
        _cgroups.parse_cpus(text, flag="--cpus" if kind == "controlplane" else "--cpus-workers")
    for kind, mb in memory_mb.items():
        if mb < 0 or (mb and mb < 64):
            flag = "--memory" if kind == "controlplane" else "--memory-workers"
            raise MachineryError(
                f"{flag} {mb}: too little for a node (MiB)",
                hint=f"pass {flag} 64 or more (Talos's default is 2048)",
            )
    if not use_vip:
        return ""
    if workers:
        # Found on a 1+1 container cluster: the worker waited for its certificate until the timeout.
        raise MachineryError(
            "--use-vip with workers is not supported yet: a worker gets its API certificate from trustd at "
            "the endpoint's host, the VIP, and a control plane's trustd serves only on the node's own address "
            "with a certificate made before the VIP is up (Talos's listens on every address)",
            hint="pass --workers 0 with --use-vip (workloads then schedule on the control planes), or leave "
            "--use-vip out",
        )
    network = ipaddress.ip_network(cidr, strict=False)
    if network.num_addresses <= VIP_OFFSET or count + 2 > VIP_OFFSET:
        raise MachineryError(
            f"--use-vip: the virtual IP is --cidr {cidr}'s address number {VIP_OFFSET}, which "
            + (
                "the CIDR does not have"
                if network.num_addresses <= VIP_OFFSET
                else f"one of the {count} nodes would take"
            ),
            hint=f"pass a --cidr of /26 or larger, with fewer than {VIP_OFFSET - 2} nodes",
        )
    return str(network.network_address + VIP_OFFSET)


def _check_config_flags(kube_prism_port: int, custom_cni_url: str, endpoint: str, dns_domain: str) -> None:
    from urllib.parse import urlsplit

    if not 0 <= kube_prism_port <= 65535:
        raise MachineryError(
            f"--kubeprism-port {kube_prism_port} is out of range",
            hint=f"pass a port (default {KUBEPRISM_PORT}), or 0 to turn KubePrism off",
        )
    if custom_cni_url and urlsplit(custom_cni_url).scheme not in ("http", "https"):
        raise MachineryError(
            f"--custom-cni-url {custom_cni_url!r} is not an http(s) URL",
            hint="pass the URL of the CNI's manifests, reachable from the nodes (e.g. on the cluster network's gateway)",
        )
    if endpoint and (not endpoint.strip() or any(c.isspace() for c in endpoint)):
        raise MachineryError(f"--endpoint {endpoint!r} is not a host", hint="pass e.g. --endpoint 10.5.0.2")
    if not dns_domain or "/" in dns_domain or " " in dns_domain:
        raise MachineryError(
            f"--dns-domain {dns_domain!r} is not a domain", hint="pass e.g. --dns-domain cluster.local"
        )


KUBERNETES_REGISTRIES = ("registry.k8s.io", "ghcr.io")
"""Where Talos 1.7's Kubernetes images come from (kube-*, coredns, pause; kubelet, flannel)."""


def _serve_kubernetes(record: ClusterRecord, progress: Callable[[str], None]) -> None:
    """Build (or find cached) every Kubernetes image and the CNI plugins, push the images to the
    cluster's registry and put the plugins on each node's /opt/cni disk."""
    from ichor.kubebuild import ensure_built, ensure_kubernetes, push_images

    progress(
        "Kubernetes images: building what is not cached yet (a first build takes 10-20 minutes on 2 cores)"
    )
    artifacts = ensure_built(progress)
    if record.registry:
        push_images(artifacts, record.registry, progress)
    if record.kubernetes_version and record.kubernetes_version != DEFAULT_KUBERNETES_VERSION:
        # Another release (an upgrade's older one): its control plane, kubelet and kube-proxy beside
        # the default release's images (CoreDNS, flannel and pause are the same).
        other = ensure_kubernetes(record.kubernetes_version, progress)
        if record.registry:
            push_images(other, record.registry, progress)
    if artifacts.cni_dir is not None:
        for node in record.nodes:
            target = Path(node.root) / "opt/cni/bin"
            target.mkdir(parents=True, exist_ok=True)
            for plugin in sorted(artifacts.cni_dir.iterdir()):
                shutil.copy2(plugin, target / plugin.name)


def _start_registry(record: ClusterRecord, bridged: bool, progress: Callable[[str], None]) -> None:
    address = net.gateway(record.cidr) if bridged else discovery_address(record.cidr)
    state_dir = Path(record.state_dir)
    record.registry, child = start_registry(state_dir, address)
    record.registry_pid = child.pid
    record.save()
    progress(
        f"image registry (docker-registry) on http://{record.registry}, storing in {state_dir / 'registry'}, "
        f"access log {registry_log(state_dir)}; push with e.g. `skopeo copy --dest-tls-verify=false "
        f"oci:<layout>:<tag> docker://{record.registry}/library/busybox:1.36`"
    )


def _bring_up(
    record: ClusterRecord,
    patches: Patches,
    talosconfig: Path,
    wait_timeout: float,
    bootstrap: bool,
    wait: WaitPlan | None,
    progress: Callable[[str], None],
) -> None:
    from ichor.machinery.clientconfig import TalosConfig
    from ichor.machinery.generate import OutputType, generate
    from ichor.machinery.secrets import SecretsBundle

    started = time.monotonic()
    name, state_dir = record.name, Path(record.state_dir)
    controlplanes = [n for n in record.nodes if n.type == "controlplane"]
    if record.discovery:
        progress("starting the cluster's own discovery service")
        record.discovery_endpoint, record.discovery_pid = start_discovery(record.cidr, state_dir, progress)
        record.save()
    else:
        progress("cluster discovery off (--with-cluster-discovery=false): no discovery service started")
    discovery = cluster_patches(record)

    bundle: SecretsBundle | None = None
    inputs = load_input_dir(Path(record.input_dir)) if record.input_dir else None
    if inputs is None:
        progress("generating PKI and tokens")
        bundle = SecretsBundle.generate(contract_of(record))
        write_atomic(state_dir / "secrets.yaml", bundle.to_yaml(), mode=0o600)
    else:
        progress(f"using the configs in {record.input_dir} (--input-dir)")
    cp_address = controlplanes[0].address
    configs: dict[str, bytes] = {}
    provider = provisioner_for(record.provisioner)
    common = [*discovery, *patches.common]
    for node_name, text in node_configs(record, bundle, common, patches, inputs).items():
        configs[node_name] = text.encode()
        write_atomic(state_dir / f"{node_name}.yaml", text, mode=0o600)

    workers = len(record.nodes) - len(controlplanes)
    progress(
        f"creating {len(controlplanes)} control plane and {workers} worker {provider.nodes_noun} in {state_dir}"
    )
    if provider.start_nodes(record, progress):
        asyncio.run(_wait_maintenance(record, progress, provider.maintenance_timeout))
        progress("applying configuration to each node over the insecure maintenance API")
        asyncio.run(_apply_all(record, configs))

    if bundle is not None:
        opts = gen_options(record)
        generated = generate(bundle, opts, output_types=[OutputType.TALOSCONFIG]).outputs[
            OutputType.TALOSCONFIG
        ]
        cluster_config = TalosConfig.from_yaml(generated, source="generated talosconfig")
    else:
        assert inputs is not None
        cluster_config = TalosConfig.from_yaml(inputs.talosconfig, source=f"{record.input_dir}/talosconfig")
    _, context = cluster_config.get(cluster_config.context or name)
    given = list(context.endpoints) if inputs is not None else []
    context.endpoints = talos_endpoints(record, given)
    context.nodes = list(context.nodes) if inputs is not None and context.nodes else [cp_address]
    merged = TalosConfig.load(talosconfig) if talosconfig.exists() else TalosConfig(context=None, contexts={})
    record.previous_context = merged.context or ""
    for message in merged.merge(cluster_config):
        progress(message)
    record.talosconfig, record.context = str(talosconfig), merged.context or name
    record.context_ca = context_digest(context.ca)
    record.save()
    merged.save(talosconfig)
    progress(
        f"merged the cluster's talosconfig into {talosconfig} (context {merged.context!r}, endpoints {', '.join(context.endpoints)})"
    )
    options = GlobalOptions(talosconfig=str(talosconfig), context=record.context)
    if wait is None:
        if bootstrap:
            progress(f"bootstrapping etcd on {cp_address}")
            asyncio.run(_bootstrap(options, cp_address, wait_timeout, progress))
        progress(
            f"cluster {name!r} started: {_nodes(record)} configured in {time.monotonic() - started:.1f}s; "
            "not waiting for it to be healthy (--no-wait): check it with `talosctl health`"
        )
        return

    bootstrapped = _reach_and_bootstrap(
        record, options, cp_address, wait_timeout, bootstrap, started, progress
    )
    if bootstrapped is None:
        return
    if wait.skipped:
        progress(f"waiting for the etcd stages of `talosctl health` only: {wait.skipped}")
    info = _cluster_info(record)
    etcd, kubernetes = split_plan(wait)
    asyncio.run(wait_healthy(options, info, etcd, wait_timeout - (time.monotonic() - started), progress))
    now = time.monotonic()
    progress(
        f"etcd is healthy on {len(controlplanes)} control plane(s) after {now - bootstrapped:.1f}s "
        f"({now - started:.1f}s since create started)"
    )
    if kubernetes.stages:
        asyncio.run(wait_healthy(options, info, kubernetes, wait_timeout - (now - started), progress))
        now = time.monotonic()
        progress(
            f"every stage of `talosctl health` passed on {_nodes(record)} after {now - bootstrapped:.1f}s "
            f"({now - started:.1f}s since create started)"
        )
    _after_waits(record, options, cp_address, progress)


def _after_waits(
    record: ClusterRecord, options: GlobalOptions, cp_address: str, progress: Callable[[str], None]
) -> None:
    """Talos's create merges the admin kubeconfig once its waits passed (never with ``--no-wait``),
    unless ``--skip-kubeconfig`` (``record.kubeconfig`` empty)."""
    if not record.kubeconfig:
        return
    if not provisioner_for(record.provisioner).runs_kubernetes:
        progress(
            "no kubeconfig merged: process nodes run no Kubernetes (`talosctl kubeconfig` still writes "
            "the admin kubeconfig their PKI makes)"
        )
        return
    try:
        _merge_kubeconfig(record, options, cp_address, Path(record.kubeconfig), progress)
    except (MachineryError, OSError) as exc:
        # Talos's create fails here with the cluster left running; a failed create here would undo
        # the cluster, so the cluster stays and this says how to get the kubeconfig instead.
        hint = getattr(exc, "hint", None)
        progress(
            f"warning: the cluster is up, but its kubeconfig was not merged into {record.kubeconfig}: {exc}"
            + (f" ({hint})" if hint else "")
            + f"; fetch it with `talosctl -n {cp_address} kubeconfig`"
        )


def cluster_patches(record: ClusterRecord) -> list[Patch]:
    """What create patches into every node's config before the user's patches: the cluster's own
    discovery service (or discovery off), and with no worker, scheduling on the control planes."""
    from ichor.machinery.patch import load_patches

    if record.discovery:
        patches = load_patches([
            "cluster:\n  discovery:\n    enabled: true\n    registries:\n      kubernetes:\n        disabled: true\n"
            f"      service:\n        endpoint: {record.discovery_endpoint}\n"
        ])  # fmt: skip
    else:
        patches = load_patches(["cluster:\n  discovery:\n    enabled: false\n"])
    if all(n.type == "controlplane" for n in record.nodes):
        # As Talos's cluster create: with no worker, workloads may run on the control planes (their
        # NoSchedule taint is left off); a --config-patch can still say otherwise.
        patches += load_patches(["cluster:\n  allowSchedulingOnControlPlanes: true\n"])
    return patches


def _reach_and_bootstrap(
    record: ClusterRecord,
    options: GlobalOptions,
    cp_address: str,
    wait_timeout: float,
    bootstrap: bool,
    started: float,
    progress: Callable[[str], None],
) -> float | None:
    """Wait for every node's API, then bootstrap etcd on ``cp_address``; returns when it was
    bootstrapped (None: ``bootstrap`` off). With ``--use-vip`` the workers answer only after: a worker
    gets its API certificate from trustd at the endpoint's host, the VIP, which a control plane takes
    once etcd runs, so the control planes are waited for, then bootstrap (Talos's create bootstraps
    first), then every node."""
    if record.vip and bootstrap:
        controlplanes_only = _cluster_info(record, workers=False)
        asyncio.run(wait_healthy(options, controlplanes_only, WaitPlan((REACHABLE,)), wait_timeout, progress))
        progress(f"bootstrapping etcd on {cp_address} (the workers answer once the VIP {record.vip} is up)")
        bootstrapped = time.monotonic()
        asyncio.run(_bootstrap(options, cp_address, wait_timeout, progress))
        remaining = wait_timeout - (time.monotonic() - started)
        asyncio.run(wait_healthy(options, _cluster_info(record), WaitPlan((REACHABLE,)), remaining, progress))
        progress(
            f"cluster {record.name!r} is up: {_nodes(record)} configured in {time.monotonic() - started:.1f}s"
        )
        return bootstrapped
    asyncio.run(wait_healthy(options, _cluster_info(record), WaitPlan((REACHABLE,)), wait_timeout, progress))
    progress(
        f"cluster {record.name!r} is up: {_nodes(record)} configured in {time.monotonic() - started:.1f}s"
    )
    if not bootstrap:
        return None
    progress(f"bootstrapping etcd on {cp_address}")
    bootstrapped = time.monotonic()
    asyncio.run(_bootstrap(options, cp_address, wait_timeout, progress))
    return bootstrapped


def talos_endpoints(record: ClusterRecord, given: Sequence[str] = ()) -> list[str]:
    """The talosconfig's endpoints, as Talos's create picks them: ``--endpoint`` alone, the first control
    plane with ``--init-node-as-endpoint``, those of ``--input-dir``'s talosconfig, else every control
    plane (client-side load balancing)."""
    controlplanes = [n.address for n in record.nodes if n.type == "controlplane"]
    if record.endpoint:
        return [record.endpoint]
    if record.init_node_as_endpoint:
        return controlplanes[:1]
    return list(given) or controlplanes


def _merge_kubeconfig(
    record: ClusterRecord, options: GlobalOptions, node: str, path: Path, progress: Callable[[str], None]
) -> None:
    """Talos's ``mergeKubeconfig``: the admin kubeconfig from the first control plane's API, merged
    into ``path`` (:mod:`._kubeconfig`)."""
    from ichor.client import Client
    from ichor.client.health_k8s import fetch_kubeconfig
    from ichor.provision._kubeconfig import merge_into

    async def fetch() -> bytes:
        async with Client.from_options(options, connect_timeout=3) as client:
            return await fetch_kubeconfig(client.with_node(node))

    progress(f"merging kubeconfig into {str(path)!r}")
    result = merge_into(path, asyncio.run(fetch()))
    for line in result.renamed:
        progress(line)
    record.kube_context = result.context
    record.save()
    progress(f"kubectl now uses context {result.context!r} (`kubectl get nodes -o wide`)")


def _nodes(record: ClusterRecord) -> str:
    return f"{len(record.nodes)} node" + ("" if len(record.nodes) == 1 else "s")


def _undo(record: ClusterRecord, state: Path, progress: Callable[[str], None], *, keep_logs: bool) -> None:
    """Stop every process create started and take its context out of the talosconfig; then remove
    the state directory, or (``keep_logs``) say how to."""
    state_dir = Path(record.state_dir)
    flags = cluster_flags(state, record.name)
    survivors = stop_all(record, state_dir, progress)
    forget_context(record, progress)
    if survivors:
        progress(
            f"still running: {', '.join(p.describe() for p in survivors)}; once they have gone, remove "
            f"the cluster with `talosctl cluster destroy {flags}` (which removes its network last)"
        )
        return
    _remains.remove(_remains.recorded(record), _remains.LinuxHost(), progress)
    if keep_logs:
        progress(
            f"stopped every process create started; kept its logs in {state_dir}: "
            f"remove them with `talosctl cluster destroy {flags}`"
        )
    else:
        shutil.rmtree(state_dir, ignore_errors=True)
        progress(f"stopped every process create started and removed {state_dir}")


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """A second Ctrl-C must not leave the clean-up half done."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to guard
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def start_discovery(cidr: str, state_dir: Path, progress: Callable[[str], None]) -> tuple[str, int]:
    """The cluster's own discovery service on the CIDR's first address (never the public one)."""
    address = discovery_address(cidr)
    log = state_dir / "discovery.log"
    background = proc.start(
        [sys.executable, "-m", "ichor.discovery", "serve", "--listen", f"{address}:{DISCOVERY_PORT}"],
        output=log,
        env=tags(state_dir),
    )
    deadline = time.monotonic() + DISCOVERY_TIMEOUT
    while not (log.exists() and "listening on" in log.read_text()):
        if background.poll() is not None:
            raise MachineryError(
                f"the discovery service did not start: {log.read_text().strip()[-500:]}",
                hint=f"is {address}:{DISCOVERY_PORT} in use by another cluster? pick another --cidr",
            )
        if time.monotonic() > deadline:
            raise MachineryError(
                f"the discovery service did not listen on {address}:{DISCOVERY_PORT} within "
                f"{DISCOVERY_TIMEOUT:.0f}s", hint=f"see {log}",
            )  # fmt: skip
        time.sleep(0.1)
    progress(f"discovery service listening on {address}:{DISCOVERY_PORT}")
    return f"http://{address}:{DISCOVERY_PORT}/", background.pid


async def _wait_maintenance(
    record: ClusterRecord, progress: Callable[[str], None], timeout: timedelta = MAINTENANCE_TIMEOUT
) -> None:
    """Every node answers on its insecure maintenance API, in the maintenance stage."""
    from ichor.client import Client
    from ichor.client.health import HealthCheckError, maintenance_check, wait_for

    addresses = [n.address for n in record.nodes]
    async with Client.from_options(
        GlobalOptions(nodes=addresses), insecure=True, connect_timeout=3
    ) as client:
        try:
            await wait_for([maintenance_check(client, addresses)], timeout=timeout,
                           report=progress, interval=0.2)  # fmt: skip
        except HealthCheckError as exc:
            raise MachineryError(
                str(exc), hint=f"see the node logs <node>.log in {record.state_dir}"
            ) from None


async def _apply_all(record: ClusterRecord, configs: dict[str, bytes]) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import Client

    addresses = [n.address for n in record.nodes]
    async with Client.from_options(GlobalOptions(nodes=addresses), insecure=True) as client:
        for node in record.nodes:
            request = machine_pb2.ApplyConfigurationRequest(
                data=configs[node.name], mode=machine_pb2.ApplyConfigurationRequest.AUTO
            )
            await client.with_node(node.address).machine.ApplyConfiguration(request)


async def _bootstrap(
    options: GlobalOptions, node: str, timeout: float, progress: Callable[[str], None]
) -> None:
    """``talosctl bootstrap`` on ``node``, retried while the node cannot take it yet (its API not
    answering, Unavailable, FailedPrecondition, DeadlineExceeded), as Talos's cluster create does."""
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import AllNodesFailedError, Client, RPCError, node_replies
    from ichor.client.health import Check, CheckFailed, plain_reason, wait_for

    async with Client.from_options(options, connect_timeout=3) as client:

        async def attempt() -> None:
            try:
                reply = await client.with_node(node).machine.Bootstrap(machine_pb2.BootstrapRequest())
                node_replies(reply, fallback_node=node).check("bootstrap")
            except RPCError as exc:
                if exc.code_name in ("Unavailable", "FailedPrecondition", "DeadlineExceeded"):
                    raise CheckFailed(plain_reason(exc), detail=str(exc)) from None
                raise CheckFailed(exc.rpc_message, final=True, detail=str(exc), hint=exc.hint) from None
            except AllNodesFailedError as exc:
                raise CheckFailed(str(exc), final=True, hint=exc.hint) from None

        check = Check(f"etcd to be bootstrapped on {node}", attempt)
        await wait_for([check], timeout=timedelta(seconds=timeout), report=progress, interval=0.5)


def _cluster_info(record: ClusterRecord, *, workers: bool = True) -> ClusterInfo:
    from ichor.client.health import ClusterInfo

    return ClusterInfo(
        [n.address for n in record.nodes if n.type == "controlplane"],
        [n.address for n in record.nodes if n.type == "worker" and workers],
        {n.address: [n.extra_address] for n in record.nodes if n.extra_address},
    )
