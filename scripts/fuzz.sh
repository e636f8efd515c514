#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-19 and runs each for FUZZ_SECONDS (default 60),
# printing the number of executions. Crashes leave a reproducer in build-fuzz/artifacts/.
#   scripts/fuzz.sh                 # all targets
#   FUZZ_SECONDS=600 scripts/fuzz.sh fuzz_region
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HAMI_DEPS_EXTRA=1 bash "$root/scripts/deps.sh"
build=${BUILD_DIR:-$root/build-fuzz}
mkdir -p "$build"
CC=clang-19 CXX=clang++-19 cmake -S "$root" -B "$build" -G Ninja -DHAMI_FUZZ=ON \
  -DHAMI_BUILD_TESTS=OFF -DHAMI_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(find "$root/tests/fuzz" -name 'fuzz_*.cc' -printf '%f\n' |
                           sed 's/\.cc$//' | sort)
fi
cmake --build "$build" --target "${targets[@]}"
mkdir -p "$build/artifacts"
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  seeds="$root/tests/fuzz/seeds/$t"
  [[ -d "$seeds" ]] && cp -n "$seeds"/* "$corpus"/ 2>/dev/null || true
  log="$build/$t.log"
  "$build/bin/$t" -max_total_time="${FUZZ_SECONDS:-60}" -artifact_prefix="$build/artifacts/" \
    "$corpus" >"$log" 2>&1 || { echo "$t: FAILED (see $log)"; tail -30 "$log"; exit 1; }
  echo "$t: $(grep -a -o 'Done [0-9]* runs' "$log" | tail -1) in ${FUZZ_SECONDS:-60}s"
done
