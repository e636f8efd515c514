#!/usr/bin/env bash
# The README's test command: installs dependencies, builds the real Kubernetes binaries the tests
# run (once per pinned release, scripts/kube-tools.sh), builds everything and runs every test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
werror=OFF
if [[ "${CI:-}" == "true" ]]; then werror=ON; fi
bash "$root/scripts/deps.sh"
kube_bin=$(bash "$root/scripts/kube-tools.sh")
BUILD_DIR="$build" bash "$root/scripts/build.sh" -DHAMI_WERROR=$werror -DHAMI_KUBE_BIN="$kube_bin" "$@"
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 600
