#!/usr/bin/env bash
# Builds the tree with a sanitizer and runs the tests under it.
#   scripts/sanitize.sh address   # ASan + UBSan
#   scripts/sanitize.sh thread    # TSan
# Extra arguments select tests (passed to ctest), e.g. -R vgpu.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-address}
shift || true
build=${BUILD_DIR:-$root/build-$mode}
BUILD_DIR="$build" bash "$root/scripts/build.sh" -DHAMI_SANITIZE="$mode" -DHAMI_BUILD_BENCH=OFF
cd "$build"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# tsan.supp: reports from inside Debian's uninstrumented libcpp-httplib (see the file).
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/tsan.supp}
ctest --output-on-failure -j "$(nproc)" --timeout 900 "$@"
