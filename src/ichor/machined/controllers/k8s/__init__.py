"""Area ``k8s``: Talos's Kubernetes controllers, one module per part (manifests, kubelet, ...)."""
