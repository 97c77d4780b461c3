"""The objects of Talos 1.7's bootstrap manifests, as plain data built from a
:class:`BootstrapManifestsConfigSpec` (facts from Talos's templates, in our own form).

Each function returns the objects of one manifest id in the order Talos writes them.
"""

from __future__ import annotations

import json
from typing import Any

from ichor.machined.resources import BootstrapManifestsConfigSpec

__all__ = [
    "coredns",
    "coredns_service",
    "csr_approver_role_binding",
    "csr_node_bootstrap",
    "csr_renewal_role_binding",
    "flannel",
    "host_dns_service",
    "kube_proxy",
    "kubeconfig_in_cluster",
    "kubelet_bootstrapping_token",
    "talos_api_service",
    "talos_service_account_crd",
]

Obj = dict[str, Any]
_RBAC = "rbac.authorization.k8s.io"
_KS = "kube-system"
_TOLERATE_ALL = [
    {"effect": "NoSchedule", "operator": "Exists"},
    {"effect": "NoExecute", "operator": "Exists"},
]


def _group(name: str) -> Obj:
    return {"kind": "Group", "name": name, "apiGroup": _RBAC}


def _binding(name: str, role: str, subjects: list[Obj], **meta: Any) -> Obj:
    return {
        "apiVersion": f"{_RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name, **meta},
        "subjects": subjects, "roleRef": {"kind": "ClusterRole", "name": role, "apiGroup": _RBAC},
    }  # fmt: skip


def _sa(name: str, **meta: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": _KS, **meta},
    }


def kubelet_bootstrapping_token(token_id: str, token_secret: str) -> list[Obj]:
    return [{
        "apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": _KS},
        "stringData": {
            "token-id": token_id, "token-secret": token_secret, "usage-bootstrap-authentication": "true",
            "auth-extra-groups": "system:bootstrappers:nodes",
        },
    }]  # fmt: skip


def csr_node_bootstrap() -> list[Obj]:
    return [_binding(
        "system-bootstrap-node-bootstrapper", "system:node-bootstrapper",
        [_group("system:bootstrappers:nodes"), _group("system:nodes")],
    )]  # fmt: skip


def csr_approver_role_binding() -> list[Obj]:
    return [_binding(
        "system-bootstrap-approve-node-client-csr",
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient", [_group("system:bootstrappers:nodes")],
    )]  # fmt: skip


def csr_renewal_role_binding() -> list[Obj]:
    return [_binding(
        "system-bootstrap-node-renewal", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
        [_group("system:nodes")],
    )]  # fmt: skip


def kube_proxy(spec: BootstrapManifestsConfigSpec) -> list[Obj]:
    labels = {"tier": "node", "k8s-app": "kube-proxy"}
    container = {
        "name": "kube-proxy", "image": spec.proxy_image, "command": ["/usr/local/bin/kube-proxy", *spec.proxy_args],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ],
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"mountPath": "/lib/modules", "name": "lib-modules", "readOnly": True},
            {"mountPath": "/etc/ssl/certs", "name": "ssl-certs-host", "readOnly": True},
            {"name": "kubeconfig", "mountPath": "/etc/kubernetes", "readOnly": True},
        ],
    }  # fmt: skip
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "kube-proxy", "namespace": _KS, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [container], "hostNetwork": True, "priorityClassName": "system-cluster-critical",
                "serviceAccountName": "kube-proxy", "tolerations": _TOLERATE_ALL,
                "volumes": [
                    {"name": "lib-modules", "hostPath": {"path": "/lib/modules"}},
                    {"name": "ssl-certs-host", "hostPath": {"path": "/etc/ssl/certs"}},
                    {"name": "kubeconfig", "configMap": {"name": "kubeconfig-in-cluster"}},
                ],
            }},
            "updateStrategy": {"rollingUpdate": {"maxUnavailable": 1}, "type": "RollingUpdate"},
        },
    }  # fmt: skip
    return [
        daemonset,
        _sa("kube-proxy"),
        _binding(
            "kube-proxy",
            "system:node-proxier",
            [{"kind": "ServiceAccount", "name": "kube-proxy", "namespace": _KS}],
        ),
    ]


def kubeconfig_in_cluster(server: str) -> list[Obj]:
    # Service-account credentials without the KUBERNETES_SERVICE_* variables kube-proxy sets up itself.
    kubeconfig = (
        "apiVersion: v1\nclusters:\n- name: local\n  cluster:\n"
        f"    server: {server}\n"
        "    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt\n"
        "users:\n- name: service-account\n  user:\n"
        "    # Use service account token\n"
        "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n"
        "contexts:\n- context:\n    cluster: local\n    user: service-account\n"
    )
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kubeconfig-in-cluster", "namespace": _KS},
             "data": {"kubeconfig": kubeconfig}}]  # fmt: skip


def _corefile(domain: str, upstream: str) -> str:
    return (
        ".:53 {\n    errors\n    health {\n        lameduck 5s\n    }\n    ready\n    log . {\n        class error\n    }\n"
        "    prometheus :9153\n\n"
        f"    kubernetes {domain} in-addr.arpa ip6.arpa {{\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n"
        "        ttl 30\n    }\n"
        f"    forward . {upstream} {{\n       max_concurrent 1000\n    }}\n"
        "    cache 30 {\n        denial 9984 30\n    }\n    loop\n    reload\n    loadbalance\n}\n"
    )


def coredns(spec: BootstrapManifestsConfigSpec) -> list[Obj]:
    rbac_defaults = {"kubernetes.io/bootstrapping": "rbac-defaults"}
    upstream = spec.service_host_dns_address or "/etc/resolv.conf"
    role = {
        "apiVersion": f"{_RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": "system:coredns", "labels": rbac_defaults},
        "rules": [
            {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    }  # fmt: skip
    binding = _binding(
        "system:coredns", "system:coredns", [{"kind": "ServiceAccount", "name": "coredns", "namespace": _KS}],
        labels=rbac_defaults, annotations={"rbac.authorization.kubernetes.io/autoupdate": "true"},
    )  # fmt: skip
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coredns", "namespace": _KS},
                 "data": {"Corefile": _corefile(spec.cluster_domain, upstream)}}  # fmt: skip
    container = {
        "name": "coredns", "image": spec.core_dns_image, "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": {"memory": "170Mi"}, "requests": {"cpu": "100m", "memory": "70Mi"}},
        "args": ["-conf", "/etc/coredns/Corefile"],
        "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": True}],
        "ports": [
            {"name": "dns", "protocol": "UDP", "containerPort": 53},
            {"name": "dns-tcp", "protocol": "TCP", "containerPort": 53},
            {"name": "metrics", "protocol": "TCP", "containerPort": 9153},
        ],
        "livenessProbe": {"httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"}, "initialDelaySeconds": 60,
                          "timeoutSeconds": 5, "successThreshold": 1, "failureThreshold": 5},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181, "scheme": "HTTP"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}},
    }  # fmt: skip
    dns_labels = {"k8s-app": "kube-dns"}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": _KS, "labels": {**dns_labels, "kubernetes.io/name": "CoreDNS"}},
        "spec": {
            "replicas": 2, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "selector": {"matchLabels": dns_labels},
            "template": {"metadata": {"labels": dns_labels}, "spec": {
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 100, "podAffinityTerm": {
                        "labelSelector": {"matchExpressions": [{"key": "k8s-app", "operator": "In", "values": ["kube-dns"]}]},
                        "topologyKey": "kubernetes.io/hostname",
                    }}]}},
                "serviceAccountName": "coredns", "priorityClassName": "system-cluster-critical",
                "tolerations": [
                    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "node.cloudprovider.kubernetes.io/uninitialized", "operator": "Exists", "effect": "NoSchedule"},
                ],
                "containers": [container], "dnsPolicy": "Default",
                "volumes": [{"name": "config-volume", "configMap": {
                    "name": "coredns", "items": [{"key": "Corefile", "path": "Corefile"}]}}],
            }},
        },
    }  # fmt: skip
    return [_sa("coredns"), binding, role, configmap, deployment]


def coredns_service(spec: BootstrapManifestsConfigSpec) -> list[Obj]:
    ips = [ip for ip in (spec.dns_service_ip, spec.dns_service_ipv6) if ip]
    families = [f for ip, f in ((spec.dns_service_ip, "IPv4"), (spec.dns_service_ipv6, "IPv6")) if ip]
    return [{
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": "kube-dns", "namespace": _KS,
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9153"},
            "labels": {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"},
        },
        "spec": {
            "selector": {"k8s-app": "kube-dns"}, "clusterIP": ips[0] if ips else "", "clusterIPs": ips,
            "ipFamilies": families, "ipFamilyPolicy": "RequireDualStack" if len(ips) == 2 else "SingleStack",
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP"},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                {"name": "metrics", "port": 9153, "protocol": "TCP"},
            ],
        },
    }]  # fmt: skip


def _net_conf(pod_cidrs: tuple[str, ...]) -> str:
    conf: Obj = {}
    for cidr in pod_cidrs:
        if ":" in cidr:
            conf.update({"IPv6Network": cidr, "EnableIPv6": True})
        else:
            conf["Network"] = cidr
    if "Network" not in conf:
        conf["EnableIPv4"] = False
    conf["Backend"] = {"Type": "vxlan", "Port": 4789}
    return json.dumps(conf, indent=2) + "\n"


_CNI_CONF = json.dumps({
    "name": "cbr0", "cniVersion": "0.3.1",
    "plugins": [
        {"type": "flannel", "delegate": {"hairpinMode": True, "isDefaultGateway": True}},
        {"type": "portmap", "capabilities": {"portMappings": True}},
    ],
}, indent=2) + "\n"  # fmt: skip


def flannel(spec: BootstrapManifestsConfigSpec) -> list[Obj]:
    labels = {"k8s-app": "flannel", "tier": "node"}
    env: list[Obj] = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "EVENT_QUEUE_DEPTH", "value": "5000"},
    ]
    if spec.flannel_kube_service_host:  # KubePrism: flannel must not depend on kube-proxy's service IP
        env += [{"name": "KUBERNETES_SERVICE_HOST", "value": spec.flannel_kube_service_host},
                {"name": "KUBERNETES_SERVICE_PORT", "value": spec.flannel_kube_service_port}]  # fmt: skip
    role = {
        "apiVersion": f"{_RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": "flannel", "labels": {"k8s-app": "flannel"}},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
        ],
    }  # fmt: skip
    binding = _binding(
        "flannel",
        "flannel",
        [{"kind": "ServiceAccount", "name": "flannel", "namespace": _KS}],
        labels={"k8s-app": "flannel"},
    )
    configmap = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-flannel-cfg", "namespace": _KS, "labels": labels},
        "data": {"cni-conf.json": _CNI_CONF, "net-conf.json": _net_conf(spec.pod_cidrs)},
    }  # fmt: skip
    pod = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
        "containers": [{
            "name": "kube-flannel", "image": spec.flannel_image, "command": ["/opt/bin/flanneld"],
            "args": ["--ip-masq", "--kube-subnet-mgr", *spec.flannel_extra_args], "env": env,
            "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
            "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}, "privileged": False},
            "volumeMounts": [
                {"mountPath": "/run/flannel", "name": "run"},
                {"mountPath": "/etc/kube-flannel/", "name": "flannel-cfg"},
                {"mountPath": "/run/xtables.lock", "name": "xtables-lock"},
            ],
        }],
        "hostNetwork": True,
        "initContainers": [
            {"name": "install-config", "image": spec.flannel_image, "command": ["cp"],
             "args": ["-f", "/etc/kube-flannel/cni-conf.json", "/etc/cni/net.d/10-flannel.conflist"],
             "volumeMounts": [{"mountPath": "/etc/cni/net.d", "name": "cni"},
                              {"mountPath": "/etc/kube-flannel/", "name": "flannel-cfg"}]},
            {"name": "install-cni", "image": spec.flannel_image, "command": ["/install-cni.sh"],
             "volumeMounts": [{"mountPath": "/host/opt/cni/bin/", "name": "cni-plugin"}]},
        ],
        "priorityClassName": "system-node-critical", "serviceAccountName": "flannel", "tolerations": _TOLERATE_ALL,
        "volumes": [
            {"name": "run", "hostPath": {"path": "/run/flannel"}},
            {"name": "cni-plugin", "hostPath": {"path": "/opt/cni/bin"}},
            {"name": "cni", "hostPath": {"path": "/etc/cni/net.d"}},
            {"name": "flannel-cfg", "configMap": {"name": "kube-flannel-cfg"}},
            {"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
        ],
    }  # fmt: skip
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "kube-flannel", "namespace": _KS, "labels": labels},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": pod}},
    }  # fmt: skip
    return [role, binding, _sa("flannel", labels={"k8s-app": "flannel"}), configmap, daemonset]


def talos_api_service() -> list[Obj]:
    return [{
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "talos", "namespace": "default", "labels": {"component": "apid", "provider": "talos"}},
        "spec": {"ports": [{"name": "apid", "port": 50000, "protocol": "TCP", "targetPort": 50000}]},
    }]  # fmt: skip


def talos_service_account_crd() -> list[Obj]:
    group, plural = "talos.dev", "serviceaccounts"
    return [{
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "conversion": {"strategy": "None"}, "group": group, "scope": "Namespaced",
            "names": {"kind": "ServiceAccount", "listKind": "ServiceAccountList", "plural": plural,
                      "singular": "serviceaccount", "shortNames": ["tsa"]},
            "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"roles": {"type": "array", "items": {"type": "string"}}}},
                    "status": {"type": "object", "properties": {"failureReason": {"type": "string"}}},
                }}}}],
        },
    }]  # fmt: skip


def host_dns_service(address: str) -> list[Obj]:
    """Talos's ``host-dns`` Service and its Endpoints: the service address is its own endpoint, which
    every node holds on lo and the host DNS listens on (kube-proxy rejects a Service with none)."""
    family = "IPv6" if ":" in address else "IPv4"
    return [{
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "host-dns", "namespace": _KS},
        "spec": {
            "clusterIP": address, "clusterIPs": [address], "ipFamilies": [family], "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                      {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}],
        },
    }, {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "host-dns", "namespace": _KS},
        "subsets": [{
            "addresses": [{"ip": address}],
            "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}],
        }],
    }]  # fmt: skip
