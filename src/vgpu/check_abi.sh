#!/usr/bin/env bash
# Verifies the shape of libvgpu.so: it must load into any container and export only hooks.
#  1. NEEDED lists only glibc libraries (no libstdc++, libgcc_s, libm).
#  2. No referenced glibc symbol version is newer than GLIBC_2.17 (x86-64 builds), the floor.
#  3. Every exported symbol is a hook (cu*, nvml*) or dlsym.
set -euo pipefail
lib=$1
fail=0
needed=$(objdump -p "$lib" | awk '/NEEDED/ {print $2}')
for n in $needed; do
  case "$n" in
    libc.so.6|libdl.so.2|libpthread.so.0|ld-linux*) ;;
    libasan*|libubsan*|libtsan*) ;;  # sanitizer builds
    *) echo "unexpected dependency: $n"; fail=1 ;;
  esac
done
if [[ $(uname -m) == x86_64 ]] && ! echo "$needed" | grep -q 'lib[at]san'; then
  newest=$(objdump -T "$lib" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -u | sort -V | tail -1)
  if [[ -n "$newest" ]] && [[ "$(printf '%s\nGLIBC_2.17\n' "$newest" | sort -V | tail -1)" != GLIBC_2.17 ]]; then
    echo "references $newest, newer than the GLIBC_2.17 floor:"
    objdump -T "$lib" | grep -v 'GLIBC_2\.\(2\.5\|3\|3\.2\|12\|17\)\b' | grep GLIBC_ || true
    fail=1
  fi
fi
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v -E '^(cu|nvml)[A-Za-z0-9_]+$|^dlsym$' || true)
if [[ -n "$bad" ]]; then
  echo "exports non-hook symbols:"; echo "$bad"; fail=1
fi
count=$(nm -D --defined-only "$lib" | wc -l)
echo "libvgpu.so: $count exported symbols; needs: $(echo $needed | tr '\n' ' ')"
exit $fail
