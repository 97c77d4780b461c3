#!/usr/bin/env bash
# The main job, in _demo/ (nothing outside it is touched): the offline half of Talos's Getting
# Started / Production Clusters guides, then a local cluster with Kubernetes created, bootstrapped,
# shown healthy (every stage of `talosctl health`), used with kubectl and destroyed. The cluster needs
# root: its nodes are containers (namespaces of their own on a bridge).
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

# A local cluster of container nodes: 1 control plane + 1 worker, each machined as PID 1 in namespaces
# of its own on a bridge, booted with its config as Talos's docker provisioner does; Kubernetes v1.30.3
# from images built here (cached after the first run) and served by the cluster's own registry; the
# cluster's own discovery service; etcd bootstrapped on the control plane. create waits, as Talos's
# does, until every stage of `talosctl health` passes.
if [ "$(id -u)" -ne 0 ]; then
  echo "error: the cluster half of the demo runs container nodes, which need root" >&2
  echo "hint: run it as root (sudo bash run.sh demo); the offline half above is done" >&2
  exit 1
fi
free_cidr() {   # a 10.2xx.y.0/24 no route of this machine covers (the provisioner blackholes it first)
  local taken net i
  taken=$(ip -4 route show table all)
  for i in $(seq 100); do
    net="10.$((200 + RANDOM % 51)).$((RANDOM % 256))"
    grep -qF "$net." <<<"$taken" || { echo "$net.0/24"; return 0; }
  done
  echo "error: no free 10.2xx.y.0/24 for the cluster network" >&2
  return 1
}
CIDR=$(free_cidr)
CP="${CIDR%.0/24}.2" WORKER="${CIDR%.0/24}.3"
STATE="$PWD/clusters"
cleanup() {
  tmux -S "$PWD/tmux-dashboard.sock" kill-server >/dev/null 2>&1 || true
  "$TALOSCTL" cluster destroy --name ichor-demo --state "$STATE" >/dev/null 2>&1 || true; }
trap cleanup EXIT

step "talosctl cluster create (container nodes on $CIDR with Kubernetes; waits for talosctl health)"
"$TALOSCTL" cluster create --provisioner container --name ichor-demo --state "$STATE" --cidr "$CIDR" \
    --controlplanes 1 --workers 1
"$TALOSCTL" cluster show --name ichor-demo --state "$STATE"

step "talosctl -n <cp>,<worker> version / services (through the control plane endpoint)"
"$TALOSCTL" -n "$CP,$WORKER" version --short
"$TALOSCTL" -n "$CP,$WORKER" services

step "talosctl etcd members / get members"
"$TALOSCTL" -n "$CP" etcd members
"$TALOSCTL" -n "$CP" get members

step "talosctl edit mc --immediate (EDITOR is a script: sed sets debug: true; applied without a reboot)"
cat > edit-debug.sh <<'SH'
#!/bin/sh
sed -i 's/^debug: false/debug: true/' "$1"
SH
chmod +x edit-debug.sh
EDITOR="$PWD/edit-debug.sh" "$TALOSCTL" -n "$WORKER" edit mc --immediate
"$TALOSCTL" -n "$WORKER" read /system/state/config.yaml | grep -n '^debug:'

step "talosctl support (a bundle of the control plane and the worker; secrets redacted)"
"$TALOSCTL" -n "$CP,$WORKER" support -O support.zip
../.venv/bin/python -m zipfile -l support.zip | grep -v '/resources/' | awk '{print $1}'
echo "... and $(../.venv/bin/python -m zipfile -l support.zip | grep -c '/resources/') resource files"
CP="$CP" ../.venv/bin/python - <<'PY'
import os
import zipfile
with zipfile.ZipFile("support.zip") as bundle:
    config = bundle.read(f"{os.environ['CP']}/machineconfig-redacted.yaml").decode()
print(f"redacted fields in {os.environ['CP']}'s config:", config.count("'******'"))
PY

step "talosctl health (nodes from discovery; every stage, the Kubernetes ones included)"
"$TALOSCTL" -n "$CP" health --wait-timeout 5m
echo "health: all stages passed"

step "talosctl kubeconfig; kubectl get nodes -o wide; kubectl get pods -A"
"$TALOSCTL" -n "$CP" kubeconfig ./kubeconfig
KUBECTL=$(../.venv/bin/python -c 'from ichor.kubebuild import ensure_built; print(ensure_built().kubectl or "")')
if [ -z "$KUBECTL" ]; then
  echo "error: kubectl was not built with Kubernetes (see ~/.cache/ichor/kubernetes/build.log)" >&2
  exit 1
fi
"$KUBECTL" --kubeconfig ./kubeconfig get nodes -o wide
"$KUBECTL" --kubeconfig ./kubeconfig get pods -A

step "talosctl -n <cp>,<worker> dashboard (run in a detached tmux terminal; its screens captured)"
dashboard_screens() {
  local sock="$PWD/tmux-dashboard.sock" screen="" i
  tmux -S "$sock" new-session -d -s dashboard -x 132 -y 36 \
      "env -u COLUMNS -u LINES TALOSCONFIG=$(printf %q "$TALOSCONFIG") $(printf %q "$TALOSCTL") -n $1 dashboard -d 1s || sleep 30"   # a failure stays on screen
  for i in $(seq 60); do   # up to 30 s for the first poll to reach the screen
    screen=$(tmux -S "$sock" capture-pane -p -t dashboard 2>/dev/null || true)
    grep -q "STAGE" <<<"$screen" && break
    sleep 0.5
  done
  if ! grep -q "STAGE" <<<"$screen"; then
    printf '%s\n' "$screen"
    tmux -S "$sock" kill-server 2>/dev/null || true
    echo "dashboard: the summary screen did not show within 30 s (the terminal is above)" >&2
    return 1
  fi
  sleep 2   # a second poll: the CPU share needs two
  printf -- '--- F1: Summary (node %s) ---\n' "${1%%,*}"
  tmux -S "$sock" capture-pane -p -t dashboard
  tmux -S "$sock" send-keys -t dashboard F2
  sleep 2
  printf -- '--- F2: Monitor ---\n'
  tmux -S "$sock" capture-pane -p -t dashboard
  tmux -S "$sock" send-keys -t dashboard Right F3
  sleep 2
  printf -- '--- F3: Network, next node (<Right>) ---\n'
  tmux -S "$sock" capture-pane -p -t dashboard
  tmux -S "$sock" send-keys -t dashboard q
  sleep 1
  tmux -S "$sock" kill-server 2>/dev/null || true
}
if command -v tmux >/dev/null; then
  dashboard_screens "$CP,$WORKER"
else
  echo "dashboard: skipped, tmux is not installed (apt-get install tmux); run it yourself:"
  echo "  talosctl -n $CP,$WORKER dashboard"
fi

step "talosctl cluster destroy"
cleanup
trap - EXIT
printf '\nDone.\n'
