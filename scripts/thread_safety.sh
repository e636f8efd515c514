#!/usr/bin/env bash
# Compiler-checked locking for the whole tree, two checks; any finding fails:
#  1. clang's thread-safety analysis (-Wthread-safety, -Wthread-safety-beta) over every source
#     file under src/ (tests aside), with the annotations of src/common/thread_annotations.h;
#  2. no raw std::mutex / std::shared_mutex (or recursive/timed) declared outside that header:
#     every lock is a hami::Mutex or hami::SharedMutex, so the analysis sees it.
# Runs as the CTest `thread_safety_analysis` (part of the test command) and alone:
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
cd "$root"

# 2. Raw standard mutexes: a declaration is the type, a name and `;`, `{` or an annotation.
raw=$(grep -rnE --include='*.h' --include='*.cc' \
  'std::(shared_|recursive_|timed_|recursive_timed_)?mutex[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*(;|\{|GUARDED_BY|ACQUIRED)' \
  src | grep -v '^src/common/thread_annotations.h:' | grep -v '_test\.cc:' || true)
if [[ -n $raw ]]; then
  echo "thread_safety.sh: raw standard mutexes (use hami::Mutex / hami::SharedMutex from" \
    "common/thread_annotations.h, with GUARDED_BY on what they guard):" >&2
  echo "$raw" >&2
  exit 1
fi

# 1. The analysis, every source file, both cores.
mapfile -t files < <(find src -name '*.cc' ! -name '*_test.cc' | sort)
printf '%s\0' "${files[@]}" |
  xargs -0 -P "$(nproc)" -n 8 "$cxx" -std=c++20 -I"$root/src" -I"$gen" -fsyntax-only \
    -DCPPHTTPLIB_OPENSSL_SUPPORT \
    -Wno-everything -Wthread-safety -Wthread-safety-beta -Werror=thread-safety \
    -Werror=thread-safety-beta
echo "thread-safety analysis: clean (${#files[@]} files, no raw mutex; $("$cxx" --version | head -1))"
