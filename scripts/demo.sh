#!/usr/bin/env bash
# The main job, in _demo/ (nothing outside it is touched): the offline half of Talos's Getting
# Started / Production Clusters guides, then a local cluster created, bootstrapped, shown healthy
# (API and etcd stages) and destroyed.
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

# A local cluster of node processes: 3 control planes + 1 worker on loopback addresses, each booted
# into maintenance mode and configured over the insecure API, as Getting Started does by hand; the
# cluster's own discovery service; etcd bootstrapped on the first control plane, the others join.
STATE="$PWD/clusters"
cleanup() {
  tmux -S "$PWD/tmux-dashboard.sock" kill-server >/dev/null 2>&1 || true
  "$TALOSCTL" cluster destroy --name ichor-demo --state "$STATE" >/dev/null 2>&1 || true; }
trap cleanup EXIT

step "talosctl cluster create (process provisioner, bootstraps etcd)"
"$TALOSCTL" cluster create --provisioner process --name ichor-demo --state "$STATE" --cidr 127.5.0.0/24 --controlplanes 3 --workers 1
"$TALOSCTL" cluster show --name ichor-demo --state "$STATE"

step "talosctl -n <cp>,<worker> version / services (through the control plane endpoint)"
"$TALOSCTL" -n 127.5.0.2,127.5.0.5 version --short
"$TALOSCTL" -n 127.5.0.2,127.5.0.5 services

step "talosctl etcd members / get members"
"$TALOSCTL" -n 127.5.0.2 etcd members
"$TALOSCTL" -n 127.5.0.2 get members

step "talosctl edit mc --immediate (EDITOR is a script: sed sets debug: true; applied without a reboot)"
cat > edit-debug.sh <<'SH'
#!/bin/sh
sed -i 's/^debug: false/debug: true/' "$1"
SH
chmod +x edit-debug.sh
EDITOR="$PWD/edit-debug.sh" "$TALOSCTL" -n 127.5.0.5 edit mc --immediate
"$TALOSCTL" -n 127.5.0.5 read /system/state/config.yaml | grep -n '^debug:'

step "talosctl support (a bundle of a control plane and the worker; secrets redacted)"
"$TALOSCTL" -n 127.5.0.2,127.5.0.5 support -O support.zip
../.venv/bin/python -m zipfile -l support.zip | grep -v '/resources/' | awk '{print $1}'
echo "... and $(../.venv/bin/python -m zipfile -l support.zip | grep -c '/resources/') resource files"
../.venv/bin/python - <<'PY'
import zipfile
with zipfile.ZipFile("support.zip") as bundle:
    config = bundle.read("127.5.0.2/machineconfig-redacted.yaml").decode()
print("redacted fields in 127.5.0.2's config:", config.count("'******'"))
PY

step "talosctl health (nodes from discovery; etcd stages pass; Kubernetes stages say there is none yet)"
health_status=0
health_out=$("$TALOSCTL" health --wait-timeout 60s 2>&1) || health_status=$?
printf '%s\n' "$health_out"
if [ "$health_status" -eq 0 ]; then
  echo "health: all stages passed"
elif grep -q "etcd members to be control plane nodes: OK" <<<"$health_out" \
    && grep -q "Ichor runs no Kubernetes components yet" <<<"$health_out"; then
  echo "health: API and etcd stages passed; the Kubernetes stage fails because Ichor runs no Kubernetes yet"
else
  echo "health: a stage before Kubernetes failed (see above)" >&2
  exit 1
fi

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
  dashboard_screens 127.5.0.2,127.5.0.5
else
  echo "dashboard: skipped, tmux is not installed (apt-get install tmux); run it yourself:"
  echo "  talosctl -n 127.5.0.2,127.5.0.5 dashboard"
fi

step "talosctl cluster destroy"
cleanup
trap - EXIT
printf '\nDone.\n'
