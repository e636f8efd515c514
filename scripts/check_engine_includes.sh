#!/usr/bin/env bash
# The scheduling engine (src/scheduler) stays a pure library: no include of the API client
# (k8s/), the HTTP layer (net/), the extender service (extender/) or a vendor module's own header
# (device/nvidia/, device/vendors/: the engine reaches vendors through device/vendor.h). Test
# helpers (test_util.h, *_test.cc) may build worlds with real vendors.
#   scripts/check_engine_includes.sh src/scheduler
set -euo pipefail
dir=${1:?usage: check_engine_includes.sh <engine source dir>}
bad=$(grep -nE '^#include "(k8s|net|extender)/|^#include "device/(nvidia|vendors)/' \
        "$dir"/*.h "$dir"/*.cc | grep -vE '/(test_util\.h|[a-z_]+_test\.cc):' || true)
if [[ -n "$bad" ]]; then
  echo "the engine must not include these (see src/scheduler/CMakeLists.txt):"
  echo "$bad"
  exit 1
fi
echo "engine includes: clean ($(ls "$dir"/*.h "$dir"/*.cc | wc -l) files)"
