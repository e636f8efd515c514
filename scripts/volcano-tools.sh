#!/usr/bin/env bash
# Builds Volcano's scheduler and controller manager, test tools run beside the real Kubernetes
# components (scripts/kube-tools.sh), from the Go module volcano.sh/volcano at the release of
# tools/volcano/versions.env, and prints the folder that holds them:
#
#   vc-scheduler vc-controller-manager   (volcano.sh/volcano: cmd/scheduler, cmd/controller-manager)
#   crd/*.yaml                           the CustomResourceDefinitions they watch
#
#   bash scripts/volcano-tools.sh            build what is missing, print the bin folder
#   bash scripts/volcano-tools.sh --print    print the bin folder only if it is complete (else exit 1)
#
# The binaries go to ${HAMI_VOLCANO_CACHE:-~/.cache/hami-cpp/volcano}/<release>-<key>/bin, where
# <key> hashes the pin file and this script: a folder is built once and reused until the pin
# changes. Nothing is fetched but Go modules (through the machine's module proxy, checked against
# the checksum database). Volcano's go.mod replaces every k8s.io staging module (and a few others)
# with a release of its choosing; replace directives count only in the main module, so the
# commands are built inside a copy of the release's own module tree, as its Makefile builds them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pins="$root/tools/volcano/versions.env"
# shellcheck source=/dev/null
source "$pins"
: "${VOLCANO_VERSION:?}"

print_only=0
while (($#)); do
  case "$1" in
    --print) print_only=1 ;;
    *) echo "volcano-tools: unknown argument '$1' (--print)" >&2; exit 2 ;;
  esac
  shift
done

key=$(cat "$pins" "$0" | sha256sum | cut -c1-16)
cache=${HAMI_VOLCANO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hami-cpp/volcano}
out="$cache/$VOLCANO_VERSION-$key"
bin="$out/bin"
tools=(vc-scheduler vc-controller-manager)
# What vc-scheduler (podgroups, queues, numatopologies) and vc-controller-manager (all of them:
# its job, jobflow, jobtemplate, podgroup, queue and garbage-collector controllers run by
# default) list and watch: config/crd/volcano/bases and config/crd/jobflow/bases of the release.
crds=(scheduling.volcano.sh_podgroups scheduling.volcano.sh_queues batch.volcano.sh_jobs
      bus.volcano.sh_commands nodeinfo.volcano.sh_numatopologies flow.volcano.sh_jobflows
      flow.volcano.sh_jobtemplates)

complete() {
  local t
  for t in "${tools[@]}"; do [[ -x "$bin/$t" ]] || return 1; done
  for t in "${crds[@]}"; do [[ -s "$bin/crd/$t.yaml" ]] || return 1; done
  [[ -f "$out/done" ]]
}
if ((print_only)); then
  complete && echo "$bin" && exit 0
  exit 1
fi
if complete; then
  echo "$bin"
  exit 0
fi

PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null 2>&1; then
  echo "volcano-tools: Go is needed (Go >= 1.22, with the module proxy reachable)" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$bin/crd" "$out/src"
log="$out/build.log"
started=$(date +%s)
echo "volcano-tools: building Volcano $VOLCANO_VERSION into $bin (log: $log; the first build" \
     "takes a while)" >&2
: >"$log"
export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOTOOLCHAIN=local

# The release's module tree (read-only in the module cache) and the commit it was tagged at.
info=$(cd "$out/src" && go mod download -json "volcano.sh/volcano@$VOLCANO_VERSION")
field() { echo "$info" | sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}$/\1/p" | head -1; }
moddir=$(field Dir)
commit=$(field Hash)
if [[ -z "$moddir" || ! -f "$moddir/go.mod" ]]; then
  echo "volcano-tools: volcano.sh/volcano@$VOLCANO_VERSION was not downloaded:" >&2
  echo "$info" >&2
  exit 1
fi
vdir="$out/src/volcano"
cp -R "$moddir" "$vdir"
chmod -R u+w "$vdir"

for t in "${crds[@]}"; do
  group=${t%%_*}
  case "$group" in
    flow.volcano.sh) from="$vdir/config/crd/jobflow/bases/$t.yaml" ;;
    *) from="$vdir/config/crd/volcano/bases/$t.yaml" ;;
  esac
  cp "$from" "$bin/crd/$t.yaml"
done

(
  cd "$vdir"
  # As its Makefile stamps them (pkg/version), without the build date: --version says the release.
  p=volcano.sh/volcano/pkg/version
  ldflags="-s -w -X $p.Version=$VOLCANO_VERSION -X $p.GitSHA=${commit:-unknown}"
  ldflags+=" -X $p.Built=1970-01-01T00:00:00Z"
  for t in "${tools[@]}"; do
    pkg=./cmd/${t#vc-}
    echo "volcano-tools: go build volcano.sh/volcano/cmd/${t#vc-}" >&2
    go build -trimpath -ldflags "$ldflags" -o "$bin/$t" "$pkg" >>"$log" 2>&1 ||
      { tail -30 "$log" >&2; exit 1; }
  done
)

for t in "${tools[@]}"; do
  [[ -x "$bin/$t" ]] || { echo "volcano-tools: $t was not built" >&2; exit 1; }
done
# The copied module tree is only needed while building.
rm -rf "$out/src"
echo "built in $(( $(date +%s) - started )) s" >"$out/done"
# Builds of earlier pins are not used any more (Go's own caches keep what a rebuild would reuse).
for old in "$cache"/*/; do
  [[ "$(basename "$old")" == "$VOLCANO_VERSION-$key" ]] || rm -rf "${old%/}"
done
echo "volcano-tools: built in $(( $(date +%s) - started )) s" >&2
echo "$bin"
