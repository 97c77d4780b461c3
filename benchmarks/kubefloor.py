"""The floor of a one-node Kubernetes here: the cluster's own binaries started by hand, kubeadm-style.

What a 1-control-plane Kubernetes needs at least, with the very binaries an Ichor node runs (the
Kubernetes build cache of :mod:`ichor.kubebuild`, etcd from :func:`ichor.etcd.find_binaries`,
Debian's containerd): a PKI from :mod:`ichor.machinery.pki` (cluster CA, apiserver serving
certificate, a client certificate per component with kubeadm's names, a service-account key),
etcd (plain HTTP on loopback), kube-apiserver (``Node,RBAC``, ``NodeRestriction``),
kube-controller-manager, kube-scheduler, containerd with its CRI plugin and a bridge CNI config, and
the kubelet, all plain processes, timed from the PKI until ``kubectl get nodes`` shows the node
``Ready``. No pod runs: a node is Ready once its runtime and CNI config are.

Isolation, as a container node has it: one ``unshare`` holder gives the floor its own network
(loopback plus a veth pair ``floor0``-``floor1`` (both ends inside; 192.0.2.10 on ``floor0``, TEST-NET-1: nothing leaves the namespace), mount,
PID and cgroup namespaces; its cgroup is ``<own>/ichor/<name>/floor`` in every hierarchy
(:mod:`ichor.provision._cgroups`), so the kubelet's ``/kubepods`` lands there. ``/proc/sys`` is
read-only but for ``net``, with the kubelet's six kernel settings shown at the values it wants
(``KUBELET_SYSCTLS``): the kubelet changes no host setting. Every component runs through
``nsenter`` into those namespaces. :meth:`Floor.close` kills the holder's PID 1 (the kernel then
kills everything in the PID namespace; the mount and network namespaces go with it), stops each
``nsenter`` by PID and removes the cgroups. Used by ``benchmarks/kubernetes.py``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from ichor.etcd import find_binaries
from ichor.kubebuild import KubernetesArtifacts
from ichor.machined.services.kubelet import KUBELET_SYSCTLS
from ichor.machinery import proc, yamlio
from ichor.machinery.kubeconfig import kubeconfig_text
from ichor.machinery.pki import CertKey, new_ecdsa_ca, new_keypair
from ichor.provision import _cgroups as cgroups

NODE = "floor"
NODE_IP = "192.0.2.10"
SERVICE_CIDR = "10.96.0.0/12"
POD_CIDR = "10.244.0.0/24"
TTL = timedelta(days=1)
CLIENTS = {
    # file stem: (common name, organization) as kubeadm issues them
    "admin": ("kubernetes-admin", "system:masters"),
    "controller-manager": ("system:kube-controller-manager", ""),
    "scheduler": ("system:kube-scheduler", ""),
    "kubelet": (f"system:node:{NODE}", "system:nodes"),
}


def parse_nodes(text: str) -> dict[str, bool]:
    """``kubectl get nodes --no-headers`` -> node name: Ready (``Ready``, not ``NotReady``, nor
    ``Ready,SchedulingDisabled``'s absence)."""
    nodes: dict[str, bool] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and not line.startswith(("NAME ", "No resources")):
            nodes[fields[0]] = "Ready" in fields[1].split(",")
    return nodes


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Ctrl-C and SIGTERM ignored while cleaning up: a second one would leave half a cluster behind."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass
class Floor:
    """One floor run under ``root`` (a fresh directory); use as a context manager."""

    root: Path
    artifacts: KubernetesArtifacts
    name: str = field(default_factory=lambda: f"kubefloor{os.getpid()}")
    phases: list[tuple[str, float]] = field(default_factory=list)
    components: dict[str, proc.Background] = field(default_factory=dict)
    _holder: proc.Background | None = None
    _init: int = 0
    _t0: float = 0.0
    _cgroup_dirs: list[Path] = field(default_factory=list)

    def __enter__(self) -> Floor:
        return self

    def __exit__(self, *_: object) -> None:
        with shielded():
            self.close()

    # --- namespaces ---------------------------------------------------------------------------

    def _enter(self, *spaces: str) -> list[str]:
        return ["nsenter", "-t", str(self._init), *(f"-{s}" for s in spaces), "--"]

    def _sh(self, spaces: str, script: str) -> None:
        proc.run([*self._enter(*spaces), "sh", "-ec", script], timeout=30)

    def _namespaces(self) -> None:
        found = cgroups.current()
        self._cgroup_dirs = cgroups.create(found, self.name, NODE)
        dirs = self._cgroup_dirs
        self._holder = proc.start(
            ["unshare", "--net", "--mount", "--pid", "--cgroup", "--fork", "--mount-proc", "--propagation",
             "private", "sleep", "infinity"],
            output=self.root / "holder.log", preexec=lambda: cgroups.join(dirs),
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while not self._init:
            children = Path(f"/proc/{self._holder.pid}/task/{self._holder.pid}/children")
            with contextlib.suppress(OSError, ValueError, IndexError):
                self._init = int(children.read_text().split()[0])
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"unshare did not start its sleep: {(self.root / 'holder.log').read_text()}"
                )
            time.sleep(0.01)
        # The kubelet makes /var/log/containers and /var/lib/kubelet/device-plugins whatever its flags say.
        mounts = [f"mount -t tmpfs -o mode=755 tmpfs {d}" for d in ("/sys/fs/cgroup", "/var/log", "/var/lib")]
        for h in found:
            kind = "-t cgroup2 cgroup2" if h.version == 2 else f"-t cgroup -o {h.options} cgroup"
            mounts += [f"mkdir /sys/fs/cgroup/{h.name}", f"mount {kind} /sys/fs/cgroup/{h.name}"]
        mounts += ["mount --rbind /proc/sys /proc/sys", "mount -o remount,bind,ro /proc/sys",
                   "mount --rbind /proc/sys/net /proc/sys/net", "mount -o remount,bind,rw /proc/sys/net"]  # fmt: skip
        values = self.root / "sysctls"
        values.mkdir()
        for name, wanted in KUBELET_SYSCTLS:
            shown = values / name.replace("/", ".")
            shown.write_text(wanted + "\n")
            mounts += [
                f"mount --bind -o ro {shown} /proc/sys/{name}",
                f"mount -o remount,bind,ro /proc/sys/{name}",
            ]
        self._sh("mC", "\n".join(mounts))
        self._sh("n", f"ip link set lo up\nip link add floor0 type veth peer name floor1\nip link set floor1 up\nip addr add {NODE_IP}/24 dev floor0\n"
                      "ip link set floor0 up\nip route add default dev floor0")  # fmt: skip

    # --- files ----------------------------------------------------------------------------------

    def _pki(self) -> Path:
        pki = self.root / "pki"
        pki.mkdir()
        ca = new_ecdsa_ca(organization="kubernetes", ttl=TTL)
        server = new_keypair(ca, common_name="kube-apiserver", ttl=TTL, server=True, client=False,
                             dns_names=["kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost"],
                             ip_addresses=["127.0.0.1", NODE_IP, "10.96.0.1"])  # fmt: skip
        (pki / "ca.crt").write_bytes(ca.crt)
        (pki / "ca.key").write_bytes(ca.key)
        (pki / "apiserver.crt").write_bytes(server.crt)
        (pki / "apiserver.key").write_bytes(server.key)
        (pki / "sa.key").write_bytes(new_ecdsa_ca(organization="sa", ttl=TTL).key)
        for stem, (cn, org) in CLIENTS.items():
            pair = new_keypair(ca, common_name=cn, organizations=[org] if org else [], ttl=TTL, server=False,
                               client=True)  # fmt: skip
            self._kubeconfig(stem, ca, pair)
        return pki

    def _kubeconfig(self, stem: str, ca: CertKey, pair: CertKey) -> None:
        text = kubeconfig_text(cluster="floor", server="https://127.0.0.1:6443", ca=ca.crt, user=stem,
                               crt=pair.crt, key=pair.key)  # fmt: skip
        (self.root / f"{stem}.kubeconfig").write_text(text)

    def _containerd_config(self) -> Path:
        assert self.artifacts.cni_dir is not None
        netd = self.root / "cni"
        netd.mkdir()
        (netd / "10-floor.conflist").write_text(
            '{"cniVersion": "1.0.0", "name": "floor", "plugins": [{"type": "bridge", "bridge": "cni0", '
            '"isGateway": true, "ipMasq": false, "ipam": {"type": "host-local", "ranges": '
            f'[[{{"subnet": "{POD_CIDR}"}}]]}}}}, {{"type": "loopback"}}]}}\n'
        )
        config = self.root / "containerd.toml"
        config.write_text(
            "version = 2\n"
            f'[plugins."io.containerd.internal.v1.opt"]\n  path = "{self.root / "opt"}"\n'
            '[plugins."io.containerd.grpc.v1.cri"]\n'
            '  sandbox_image = "registry.k8s.io/pause:3.8"\n  restrict_oom_score_adj = true\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
            '  runtime_type = "io.containerd.runc.v2"\n'
            '[plugins."io.containerd.grpc.v1.cri".cni]\n'
            f'  bin_dir = "{self.artifacts.cni_dir}"\n  conf_dir = "{netd}"\n'
        )
        return config

    def _kubelet_config(self, pki: Path) -> Path:
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "authentication": {"x509": {"clientCAFile": str(pki / "ca.crt")}, "webhook": {"enabled": True},
                               "anonymous": {"enabled": False}},
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs", "cgroupRoot": "/", "failSwapOn": False, "protectKernelDefaults": False,
            "localStorageCapacityIsolation": False, "featureGates": {"KubeletInUserNamespace": True},
            "containerRuntimeEndpoint": f"unix://{self.root / 'containerd.sock'}",
            "staticPodPath": "", "resolvConf": "", "clusterDNS": ["10.96.0.10"], "clusterDomain": "cluster.local",
            "volumePluginDir": str(self.root / "kubelet/volume-plugins"),
            "podLogsDir": str(self.root / "kubelet/pod-logs"),
        }  # fmt: skip
        path = self.root / "kubelet.yaml"
        path.write_text(yamlio.dump_document(yamlio.from_plain(config)))
        return path

    # --- the run --------------------------------------------------------------------------------

    def _start(self, name: str, binary: Path | str, *args: str) -> None:
        command = [*self._enter("n", "m", "p", "C"), str(binary), *args]
        (self.root / "logs").mkdir(exist_ok=True)
        self.components[name] = proc.start(command, output=self.root / "logs" / f"{name}.log")

    def _check_running(self) -> None:
        for name, background in self.components.items():
            if background.poll() is not None:
                tail = (self.root / "logs" / f"{name}.log").read_text()[-3000:]
                raise RuntimeError(f"floor {name} exited ({background.poll()}):\n{tail}")

    def _until(self, what: str, check: Callable[[], bool], deadline: float) -> None:
        while not check():
            self._check_running()
            if time.monotonic() > deadline:
                raise RuntimeError(f"floor: {what} not within the time limit")
            time.sleep(0.1)
        self.phases.append((what, time.perf_counter() - self._t0))

    def kubectl(self, *args: str) -> proc.Completed:
        assert self.artifacts.kubectl is not None
        return proc.run([*self._enter("n"), str(self.artifacts.kubectl), f"--kubeconfig={self.root / 'admin.kubeconfig'}",
                         "--request-timeout=2s", *args], timeout=15, check=False)  # fmt: skip

    def _ready(self) -> bool:
        return parse_nodes(self.kubectl("get", "nodes", "--no-headers").stdout).get(NODE, False)

    def run(self, timeout: float = 300) -> float:
        """Seconds from the PKI until the node is Ready (the namespaces are made before the clock)."""
        assert self.artifacts.bin_dir is not None
        deadline = time.monotonic() + timeout
        self._namespaces()
        self._t0 = time.perf_counter()
        bins, r = self.artifacts.bin_dir, self.root
        pki = self._pki()
        self.phases.append(("PKI and kubeconfigs", time.perf_counter() - self._t0))
        self._start("etcd", find_binaries().etcd, f"--data-dir={r / 'etcd'}", "--listen-client-urls=http://127.0.0.1:2379",
                    "--advertise-client-urls=http://127.0.0.1:2379", "--listen-peer-urls=http://127.0.0.1:2380")  # fmt: skip
        self._start("containerd", "containerd", "--config", str(self._containerd_config()), "--address",
                    str(r / "containerd.sock"), "--root", str(r / "containerd/root"), "--state", str(r / "containerd/state"))  # fmt: skip
        self._start("kube-apiserver", bins / "kube-apiserver", "--etcd-servers=http://127.0.0.1:2379",
                    f"--advertise-address={NODE_IP}", f"--client-ca-file={pki / 'ca.crt'}",
                    f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
                    f"--service-account-key-file={pki / 'sa.key'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=Node,RBAC",
                    "--enable-admission-plugins=NodeRestriction", "--allow-privileged=true", f"--cert-dir={pki}")  # fmt: skip
        for name in ("controller-manager", "scheduler"):
            extra = [f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
                     "--use-service-account-credentials=true"] if name == "controller-manager" else []  # fmt: skip
            self._start(f"kube-{name}", bins / f"kube-{name}", f"--kubeconfig={r / f'{name}.kubeconfig'}",
                        "--leader-elect=false", "--bind-address=127.0.0.1", *extra)  # fmt: skip
        self._until("containerd socket", (r / "containerd.sock").exists, deadline)
        self._start("kubelet", bins / "kubelet", f"--config={self._kubelet_config(pki)}",
                    f"--kubeconfig={r / 'kubelet.kubeconfig'}", f"--hostname-override={NODE}", f"--node-ip={NODE_IP}",
                    f"--root-dir={r / 'kubelet'}", f"--cert-dir={r / 'kubelet/pki'}")  # fmt: skip
        self._until("apiserver ready", lambda: self.kubectl("get", "--raw=/readyz").exit_code == 0, deadline)
        self._until("node registered", lambda: NODE in parse_nodes(self.kubectl("get", "nodes", "--no-headers").stdout),
                    deadline)  # fmt: skip
        self._until("node Ready", self._ready, deadline)
        return self.phases[-1][1]

    def pids(self) -> dict[str, int]:
        """Each component's PID (the child its ``nsenter`` forked)."""
        found = {}
        for name, background in self.components.items():
            with contextlib.suppress(OSError, ValueError, IndexError):
                children = Path(f"/proc/{background.pid}/task/{background.pid}/children").read_text()
                found[name] = int(children.split()[0])
        return found

    def close(self) -> None:
        """Kill everything by PID (the PID namespace's init first), then remove the cgroups."""
        if self._init:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._init, signal.SIGKILL)
        for background in self.components.values():
            background.stop(timeout=5)
        if self._holder is not None:
            self._holder.stop(timeout=5)
        if self._cgroup_dirs:
            cgroups.remove(cgroups.cluster_dirs(cgroups.current(), self.name))

    def describe(self) -> str:
        return "; ".join(f"{what} {at:.2f} s" for what, at in self.phases)


def command_line(background: proc.Background) -> str:
    return shlex.join(background.args)
