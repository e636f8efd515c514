#!/usr/bin/env bash
# Instructions libvgpu.so adds to one cuLaunchKernel, counted with callgrind (stable where wall
# time on a shared VM is not): vgpu_probe launch-loop on the simulated driver, 100,000 and
# 300,000 launches, without and with LD_PRELOAD=libvgpu.so; the per-launch figure is the
# difference between the two counts divided by 200,000, so start-up cancels out.
#   scripts/launch_instructions.sh [BUILD_DIR] [LIBVGPU]
# Prints "driver=<n> with_libvgpu=<n> added=<n>" (instructions per launch). Needs valgrind.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
lib=${2:-$build/lib/libvgpu.so}
if ! command -v valgrind >/dev/null; then
  echo "launch_instructions.sh: valgrind is not installed (apt-get install valgrind)" >&2
  exit 1
fi
work=$(mktemp -d /tmp/hami-launch-ir-XXXXXX)
trap 'rm -rf "$work"' EXIT
count() {  # count <launches> <preload: 0|1>
  local out=$work/cg.$1.$2
  local vars=(PATH=/usr/bin:/bin "LD_LIBRARY_PATH=$build/sim" "HAMI_SIM_STATE=$work/state"
              "CUDA_DEVICE_MEMORY_SHARED_CACHE=$work/region" LIBCUDA_LOG_LEVEL=0)
  [[ $2 == 1 ]] && vars+=("LD_PRELOAD=$lib")
  env -i "${vars[@]}" valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$build/bin/vgpu_probe" launch-loop --count "$1" >/dev/null 2>&1
  awk '/^(summary|totals):/ {print $2; exit}' "$out"
}
b1=$(count 100000 0); b3=$(count 300000 0)
l1=$(count 100000 1); l3=$(count 300000 1)
driver=$(( (b3 - b1) / 200000 ))
with=$(( (l3 - l1) / 200000 ))
echo "driver=$driver with_libvgpu=$with added=$(( with - driver ))"
