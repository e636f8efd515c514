#!/usr/bin/env bash
# The README's main job: builds the tree, then
#  1. runs a workload under memory and compute quotas on the simulated GPU (`hamictl demo`):
#     the quota seen from inside the process and the limiter at work;
#  2. runs the whole simulated control plane on the example pod specs (`hami-sim-cluster`):
#     webhook, extender filter and bind, node lock and device-plugin acknowledgement, and the
#     annotations and events a user reads.
# Exit status 0 only when every check of both parts held.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
BUILD_DIR="$build" bash "$root/scripts/build.sh" -DHAMI_BUILD_BENCH=OFF
status=0
"$build/bin/hamictl" demo --build-dir "$build" || status=1
echo
echo "=== Control plane ==="
log="$build/hami-sim-cluster.log"
if "$build/bin/hami-sim-cluster" --examples "$root/examples/seed000" 2>"$log"; then
  echo "(every decision the components logged: $log)"
else
  status=1
  echo "hami-sim-cluster failed; its log ($log) ends with:"
  tail -20 "$log"
fi
exit "$status"
