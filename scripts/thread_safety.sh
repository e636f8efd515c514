#!/usr/bin/env bash
# Clang's thread-safety analysis (-Wthread-safety) over the sources whose locks carry the
# annotations of src/common/thread_annotations.h; any finding fails. Runs as the CTest
# `thread_safety_analysis` (part of the test command) and alone:
#   scripts/thread_safety.sh [BUILD_DIR]
# BUILD_DIR (default build/) holds the generated gRPC headers some sources include; build first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
gen=$build/proto/gen
if [[ ! -f $gen/deviceplugin/v1beta1/api.grpc.pb.h ]]; then
  echo "thread_safety.sh: no generated gRPC headers under $gen (build the project first)" >&2
  exit 1
fi
cxx=""
for c in clang++ clang++-19 clang++-14; do
  if command -v "$c" >/dev/null 2>&1; then cxx=$c; break; fi
done
if [[ -z "$cxx" ]]; then
  echo "thread_safety.sh: no clang++ (scripts/deps.sh installs Debian's clang)" >&2
  exit 1
fi
# Sources with annotated locks (each checked with the headers it includes).
files=(
  src/extender/service.cc
  src/extender/service_bind.cc
  src/extender/service_filter.cc
  src/extender/service_http.cc
  src/extender/service_node_lock.cc
  src/extender/service_nodes.cc
  src/scheduler/assume_cache.cc
  src/common/thread_pool.cc
  src/k8s/work_queue.cc
  src/net/http_server.cc
  src/sim/apiserver/store.cc
  src/sim/apiserver/watch_hub.cc
  src/sim/kubelet/device_manager.cc
  src/monitor/nvml_stats.cc
)
for f in "${files[@]}"; do
  "$cxx" -std=c++20 -I"$root/src" -I"$gen" -fsyntax-only -Wthread-safety -Wthread-safety-beta \
    -Werror=thread-safety -Werror=thread-safety-beta "$root/$f"
done
echo "thread-safety analysis: clean (${#files[@]} files, $("$cxx" --version | head -1))"
