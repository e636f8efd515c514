#!/usr/bin/env bash
# The README's main job: builds the tree and runs a workload under memory and compute quotas on
# the simulated GPU, showing the quota from inside the process and the limiter at work.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
BUILD_DIR="$build" bash "$root/scripts/build.sh" -DHAMI_BUILD_BENCH=OFF
exec "$build/bin/hamictl" demo --build-dir "$build"
