#!/usr/bin/env bash
# Verifies that libvgpu.so loads and binds every symbol under an older glibc (Debian bullseye,
# glibc 2.31), as it must in old containers. Downloads bullseye's libc6 package (network), so it
# is a manual check, not part of the test suite.
#   bash scripts/check_old_glibc.sh [path/to/libvgpu.so]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$(realpath "${1:-$root/build/lib/libvgpu.so}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mirror=http://deb.debian.org/debian
curl -fsS "$mirror/dists/bullseye/main/binary-amd64/Packages.xz" | xz -dc >"$work/Packages"
for pkg in libc6 libc-bin; do
  file=$(awk -v p="$pkg" '$1=="Package:"{cur=$2} $1=="Filename:" && cur==p {print $2; exit}' \
    "$work/Packages")
  curl -fsS "$mirror/$file" -o "$work/$pkg.deb"
  dpkg-deb -x "$work/$pkg.deb" "$work/root"
done
libdir="$work/root/lib/x86_64-linux-gnu"
loader=$(ls "$libdir"/ld-*.so* | head -1)
echo "glibc under test: $(basename "$(ls "$libdir"/libc-*.so)")"
# A bullseye program (built for glibc 2.31) with the library preloaded; LD_BIND_NOW makes the
# loader resolve every symbol of libvgpu.so up front, so a missing version fails here.
# A preload that fails to load is only a warning to ld.so, so its stderr is checked too.
out=$(LD_BIND_NOW=1 LD_PRELOAD="$lib" "$loader" --library-path "$libdir" \
  "$work/root/usr/bin/getconf" GNU_LIBC_VERSION 2>&1) || true
echo "$out"
if grep -qiE 'error|cannot|not found|ignored' <<<"$out"; then
  echo "FAIL: libvgpu.so does not load under bullseye's glibc"
  exit 1
fi
echo "libvgpu.so loads and binds under bullseye's glibc"
