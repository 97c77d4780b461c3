#!/usr/bin/env bash
# The main job until nodes exist: the offline half of Talos's Getting Started / Production
# Clusters guides, end to end, in _demo/ (nothing outside it is touched).
set -euo pipefail
cd "$(dirname "$0")/.."
TALOSCTL="$PWD/.venv/bin/talosctl"
rm -rf _demo && mkdir -p _demo && cd _demo
export TALOSCONFIG="$PWD/talosconfig.merged"   # keep the user's ~/.talos/config out of it

step() { printf '\n==> %s\n' "$*"; }

step "talosctl gen secrets"
"$TALOSCTL" gen secrets -o secrets.yaml

cat > cp.patch <<'PATCH'
cluster:
  allowSchedulingOnControlPlanes: true
PATCH
cat > worker1.patch <<'PATCH'
machine:
  network:
    hostname: worker1
PATCH

step "talosctl gen config (with secrets and a control-plane patch)"
"$TALOSCTL" gen config --with-secrets secrets.yaml --config-patch-control-plane @cp.patch \
    demo https://127.0.0.1:6443

step "talosctl validate (metal mode, strict)"
"$TALOSCTL" validate --config controlplane.yaml --mode metal --strict
"$TALOSCTL" validate --config worker.yaml --mode metal

step "talosctl machineconfig patch worker.yaml --patch @worker1.patch --output worker1.yaml"
"$TALOSCTL" machineconfig patch worker.yaml --patch @worker1.patch --output worker1.yaml
grep -n 'hostname: worker1' worker1.yaml
"$TALOSCTL" validate --config worker1.yaml --mode metal

step "talosctl config merge / endpoint / node / info"
"$TALOSCTL" config merge ./talosconfig
"$TALOSCTL" config endpoint 127.0.0.1
"$TALOSCTL" config node 127.0.0.1
"$TALOSCTL" config contexts
"$TALOSCTL" config info

step "talosctl image default"
"$TALOSCTL" image default

printf '\nOffline flow complete: files are in %s\n' "$PWD"
printf 'Starting nodes (cluster create, apply-config, bootstrap) arrives with the node agent.\n'
