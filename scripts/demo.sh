#!/usr/bin/env bash
# The main job, until nodes exist: the offline Talos flow end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
TALOSCTL="$PWD/.venv/bin/talosctl"
rm -rf _demo && mkdir -p _demo && cd _demo
"$TALOSCTL" version --client
