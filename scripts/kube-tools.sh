#!/usr/bin/env bash
# Builds the real Kubernetes components the tests run, from their Go modules at the releases of
# tools/kube/versions.env, and prints the folder that holds them:
#
#   kube-apiserver kube-controller-manager kube-scheduler kubectl   (k8s.io/kubernetes)
#   etcd                                                            (go.etcd.io/etcd/server/v3)
#   helm                                                            (helm.sh/helm/v3)
#
#   bash scripts/kube-tools.sh            build what is missing, print the bin folder
#   bash scripts/kube-tools.sh --print    print the bin folder only if it is complete (else exit 1)
#   ... --release newest                  the same for the second pin (the newest release served)
#
# Two pins: `oldest` (the default: KUBERNETES_VERSION, ETCD_VERSION, HELM_VERSION) and `newest`
# (KUBERNETES_NEWEST_VERSION, ETCD_NEWEST_VERSION, HELM_NEWEST_VERSION). The binaries go to
# ${HAMI_KUBE_CACHE:-~/.cache/hami-cpp/kube}/<release>-<key>/bin, where <key> hashes the pin
# file and this script: a folder is built once and reused until a pin changes. Nothing is
# fetched but Go modules (through the machine's module proxy, checked against the checksum
# database). k8s.io/kubernetes replaces its staging modules (k8s.io/api, k8s.io/client-go, ...)
# with folders of its own repository; used as a dependency it needs each of them pinned to the
# matching v0.<minor>.<patch> release, the way out-of-tree schedulers build against it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pins="$root/tools/kube/versions.env"
# shellcheck source=/dev/null
source "$pins"
: "${KUBERNETES_VERSION:?} ${ETCD_VERSION:?} ${HELM_VERSION:?}"
: "${KUBERNETES_NEWEST_VERSION:?} ${ETCD_NEWEST_VERSION:?} ${HELM_NEWEST_VERSION:?}"

KUBERNETES_OLDEST_VERSION=$KUBERNETES_VERSION
print_only=0
release=oldest
while (($#)); do
  case "$1" in
    --print) print_only=1 ;;
    --release)
      release=${2:-}
      shift || true
      ;;
    --release=*) release=${1#--release=} ;;
    *) echo "kube-tools: unknown argument '$1' (--print, --release oldest|newest)" >&2; exit 2 ;;
  esac
  shift
done
case "$release" in
  oldest) ;;
  newest)
    KUBERNETES_VERSION=$KUBERNETES_NEWEST_VERSION
    ETCD_VERSION=$ETCD_NEWEST_VERSION
    HELM_VERSION=$HELM_NEWEST_VERSION
    ;;
  *) echo "kube-tools: --release must be oldest or newest, not '$release'" >&2; exit 2 ;;
esac

key=$(cat "$pins" "$0" | sha256sum | cut -c1-16)
cache=${HAMI_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hami-cpp/kube}
out="$cache/$KUBERNETES_VERSION-$key"
bin="$out/bin"
tools=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd helm)

complete() {
  local t
  for t in "${tools[@]}"; do [[ -x "$bin/$t" ]] || return 1; done
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
  echo "kube-tools: Go is needed (Go >= 1.24, with the module proxy reachable)" >&2
  exit 1
fi
mkdir -p "$bin" "$out/src"
log="$out/build.log"
started=$(date +%s)
echo "kube-tools: building Kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION, helm $HELM_VERSION" \
     "into $bin (log: $log; the first build takes a while)" >&2
: >"$log"
export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOTOOLCHAIN=local

# newmodule DIR: an empty module of our own from which a dependency's commands are built.
newmodule() {
  rm -rf "$1" && mkdir -p "$1"
  printf 'module hami-cpp.test/%s\n\ngo 1.24\n' "$(basename "$1")" >"$1/go.mod"
}

# Kubernetes: require the release, pin every staging module it replaces.
kdir="$out/src/kubernetes"
newmodule "$kdir"
minor_patch=${KUBERNETES_VERSION#v1.}  # 34.4
staging_version="v0.$minor_patch"
(
  cd "$kdir"
  go mod edit -require="k8s.io/kubernetes@$KUBERNETES_VERSION"
  kmod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
         sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  staging=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$kmod")
  if [[ -z "$staging" ]]; then
    echo "kube-tools: no staging modules found in $kmod" >&2
    exit 1
  fi
  for m in $staging; do go mod edit -replace="$m=$m@$staging_version"; done
  v=k8s.io/component-base/version
  cv=k8s.io/client-go/pkg/version
  minor=${minor_patch%%.*}
  ldflags="-s -w"
  for p in $v $cv; do
    ldflags+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  for t in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    echo "kube-tools: go build k8s.io/kubernetes/cmd/$t" >&2
    go build -trimpath -ldflags "$ldflags" -o "$bin/$t" "k8s.io/kubernetes/cmd/$t" >>"$log" 2>&1 ||
      { tail -30 "$log" >&2; exit 1; }
  done
)

# etcd: the server module's main package is the etcd binary.
edir="$out/src/etcd"
newmodule "$edir"
(
  cd "$edir"
  go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  echo "kube-tools: go build go.etcd.io/etcd/server/v3 (etcd)" >&2
  go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3 >>"$log" 2>&1 ||
    { tail -30 "$log" >&2; exit 1; }
)

# Helm.
hdir="$out/src/helm"
newmodule "$hdir"
(
  cd "$hdir"
  go mod edit -require="helm.sh/helm/v3@$HELM_VERSION"
  go mod download -x helm.sh/helm/v3 >>"$log" 2>&1
  # As helm's own Makefile does: the Kubernetes version templates see by default
  # (.Capabilities.KubeVersion, a chart's kubeVersion check) is that of its client-go.
  client_go=$(go list -m -f '{{.Version}}' k8s.io/client-go 2>>"$log")  # v0.34.2
  client_minor=$(echo "$client_go" | cut -d. -f2)
  p=helm.sh/helm/v3/pkg
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  ldflags+=" -X $p/chartutil.k8sVersionMajor=1 -X $p/chartutil.k8sVersionMinor=$client_minor"
  ldflags+=" -X $p/lint/rules.k8sVersionMajor=1 -X $p/lint/rules.k8sVersionMinor=$client_minor"
  echo "kube-tools: go build helm.sh/helm/v3/cmd/helm (Kubernetes 1.$client_minor)" >&2
  go build -trimpath -ldflags "$ldflags" -o "$bin/helm" helm.sh/helm/v3/cmd/helm >>"$log" 2>&1 ||
    { tail -30 "$log" >&2; exit 1; }
)

for t in "${tools[@]}"; do
  [[ -x "$bin/$t" ]] || { echo "kube-tools: $t was not built" >&2; exit 1; }
done
echo "built in $(( $(date +%s) - started )) s" >"$out/done"
# Builds of earlier pins are not used any more (Go's own caches keep what a rebuild would
# reuse); both current pins' folders stay.
for old in "$cache"/*/; do
  case "$(basename "$old")" in
    "$KUBERNETES_NEWEST_VERSION-$key" | "$KUBERNETES_OLDEST_VERSION-$key") ;;
    *) rm -rf "${old%/}" ;;
  esac
done
echo "kube-tools: built in $(( $(date +%s) - started )) s" >&2
echo "$bin"
