#!/usr/bin/env bash
# The README's test command: installs dependencies, builds the real Kubernetes binaries the tests
# run (once per pinned release, scripts/kube-tools.sh: the oldest and the newest Kubernetes
# release served), Volcano's scheduler and controller manager (scripts/volcano-tools.sh, a test
# tool run beside them) and a real node's kubelet, containerd, runc and CNI plugins
# (scripts/node-tools.sh), builds everything and runs every test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
werror=OFF
if [[ "${CI:-}" == "true" ]]; then werror=ON; fi
bash "$root/scripts/deps.sh"
kube_bin=$(bash "$root/scripts/kube-tools.sh")
kube_bin_newest=$(bash "$root/scripts/kube-tools.sh" --release newest)
volcano_bin=$(bash "$root/scripts/volcano-tools.sh")
node_bin=$(bash "$root/scripts/node-tools.sh")
BUILD_DIR="$build" bash "$root/scripts/build.sh" -DHAMI_WERROR=$werror -DHAMI_KUBE_BIN="$kube_bin" \
  -DHAMI_KUBE_BIN_NEWEST="$kube_bin_newest" -DHAMI_VOLCANO_BIN="$volcano_bin" \
  -DHAMI_NODE_BIN="$node_bin" "$@"
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 600
