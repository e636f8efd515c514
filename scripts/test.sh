#!/usr/bin/env bash
# The README's test command: installs dependencies, builds everything and runs every test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
werror=OFF
if [[ "${CI:-}" == "true" ]]; then werror=ON; fi
BUILD_DIR="$build" bash "$root/scripts/build.sh" -DHAMI_WERROR=$werror "$@"
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 600
