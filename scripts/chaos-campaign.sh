#!/usr/bin/env bash
# A campaign of random chaos seeds: runs tests/chaos (the simulated control plane) once per seed
# and stops at the first failure, whose seed it names for replay:
#
#   bash scripts/chaos-campaign.sh [COUNT=100] [FIRST_SEED=random]
#   HAMI_CHAOS_SEED=<seed> build/bin/chaos_test --gtest_filter='Simulated/*'   # replay
#
# Needs a build (bash scripts/build.sh). Logs of failed seeds go to $CHAOS_LOGS
# (default /tmp/hami-chaos-campaign). Exit status 0 when every seed held.
set -u
cd "$(dirname "$0")/.."
count=${1:-100}
first=${2:-$(( $(od -An -N4 -tu4 /dev/urandom) % 1000000000 ))}
bin=${CHAOS_BIN:-build/bin/chaos_test}
logs=${CHAOS_LOGS:-/tmp/hami-chaos-campaign}
if [ ! -x "$bin" ]; then
  echo "chaos-campaign: $bin not found; build first (bash scripts/build.sh)" >&2
  exit 2
fi
mkdir -p "$logs"
start=$(date +%s)
for ((i = 0; i < count; i++)); do
  seed=$((first + i))
  t0=$(date +%s)
  if HAMI_CHAOS_SEED=$seed "$bin" --gtest_filter='Simulated/*' > "$logs/seed-$seed.log" 2>&1; then
    printf 'seed %s: ok (%ss)\n' "$seed" "$(($(date +%s) - t0))"
    rm -f "$logs/seed-$seed.log"
  else
    printf 'seed %s: FAILED after %s seeds; log: %s\n' "$seed" "$i" "$logs/seed-$seed.log"
    grep -E 'Failure|Expected|Which is|seed' "$logs/seed-$seed.log" | head -20
    exit 1
  fi
done
printf 'chaos-campaign: %s seeds from %s held (%s s)\n' "$count" "$first" "$(($(date +%s) - start))"
