#!/usr/bin/env bash
# Sets up what a real Kubernetes node on this machine needs, for the `realnode` tests, and prints
# the folder that describes it:
#
#   kubelet, kube-proxy
#                  built from k8s.io/kubernetes at the first pin of tools/kube/versions.env (the
#                  release the control plane of scripts/kube-tools.sh runs, which still supports
#                  cgroup v1), the same way kube-tools.sh builds the control plane
#   containerd, runc, CNI plugins, busybox (static)
#                  Debian's packages, installed with apt-get when missing
#   node.env       where each of them is (CONTAINERD=, CTR=, RUNC=, CNI_BIN_DIR=, BUSYBOX=,
#                  KUBELET=, KUBE_PROXY=, KUBERNETES_VERSION=), read by the tests' node harness
#
#   bash scripts/node-tools.sh           install and build what is missing, print the folder
#   bash scripts/node-tools.sh --print   print the folder only if it is complete (else exit 1)
#
# The folder is ${HAMI_NODE_CACHE:-~/.cache/hami-cpp/node}/<release>-<key>, where <key> hashes
# the pin file and this script. Nothing is fetched but Go modules and Debian packages. Run as root
# (a kubelet and containerd need it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pins="$root/tools/kube/versions.env"
# shellcheck source=/dev/null
source "$pins"
: "${KUBERNETES_VERSION:?}"

print_only=0
case "${1:-}" in
  --print) print_only=1 ;;
  "") ;;
  *) echo "node-tools: unknown argument '$1' (--print)" >&2; exit 2 ;;
esac

key=$(cat "$pins" "$0" | sha256sum | cut -c1-16)
cache=${HAMI_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hami-cpp/node}
out="$cache/$KUBERNETES_VERSION-$key"

# The Debian packages and the file each must provide.
declare -A need=(
  [containerd]=/usr/bin/containerd
  [runc]=/usr/sbin/runc
  [containernetworking-plugins]=/usr/lib/cni/bridge
  [busybox-static]=/bin/busybox
)
packages_present() {
  local p
  for p in "${!need[@]}"; do [[ -x "${need[$p]}" ]] || return 1; done
  [[ -x /usr/bin/ctr && -x /usr/bin/containerd-shim-runc-v2 ]]
}
complete() {
  [[ -x "$out/kubelet" && -x "$out/kube-proxy" && -f "$out/node.env" ]] && packages_present
}
if ((print_only)); then
  complete && echo "$out" && exit 0
  exit 1
fi
if complete; then
  echo "$out"
  exit 0
fi

if ! packages_present; then
  if [[ $(id -u) != 0 ]]; then
    echo "node-tools: containerd, runc, CNI plugins and busybox-static are missing and" \
         "installing them needs root" >&2
    exit 1
  fi
  echo "node-tools: apt-get install ${!need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  # --no-install-recommends: no docker.io or other extras; a containerd systemd unit that
  # exists is never started by the tests (they run their own containerd).
  apt-get install -y -qq --no-install-recommends "${!need[@]}" >&2
  packages_present || { echo "node-tools: the packages did not provide ${need[*]}" >&2; exit 1; }
fi

mkdir -p "$out/src"
if [[ ! -x "$out/kubelet" || ! -x "$out/kube-proxy" ]]; then
  PATH="$PATH:/usr/local/go/bin"
  if ! command -v go >/dev/null 2>&1; then
    echo "node-tools: Go is needed (Go >= 1.24, with the module proxy reachable)" >&2
    exit 1
  fi
  log="$out/build.log"
  : >"$log"
  echo "node-tools: building kubelet and kube-proxy $KUBERNETES_VERSION into $out (log: $log)" >&2
  export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOTOOLCHAIN=local
  kdir="$out/src/kubelet"
  rm -rf "$kdir" && mkdir -p "$kdir"
  printf 'module hami-cpp.test/kubelet\n\ngo 1.24\n' >"$kdir/go.mod"
  minor_patch=${KUBERNETES_VERSION#v1.}
  (
    cd "$kdir"
    go mod edit -require="k8s.io/kubernetes@$KUBERNETES_VERSION"
    kmod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
           sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    # k8s.io/kubernetes replaces its staging modules with its own folders; a dependent pins each
    # to the matching v0.<minor>.<patch> release.
    staging=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$kmod")
    [[ -n "$staging" ]] || { echo "node-tools: no staging modules in $kmod" >&2; exit 1; }
    for m in $staging; do go mod edit -replace="$m=$m@v0.$minor_patch"; done
    minor=${minor_patch%%.*}
    ldflags="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
      ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
    done
    for t in kubelet kube-proxy; do
      go build -trimpath -ldflags "$ldflags" -o "$out/$t.tmp" "k8s.io/kubernetes/cmd/$t" \
        >>"$log" 2>&1 || { tail -30 "$log" >&2; exit 1; }
      mv "$out/$t.tmp" "$out/$t"
    done
  )
fi

cat >"$out/node.env" <<EOF
KUBERNETES_VERSION=$KUBERNETES_VERSION
KUBELET=$out/kubelet
KUBE_PROXY=$out/kube-proxy
CONTAINERD=/usr/bin/containerd
CTR=/usr/bin/ctr
RUNC=/usr/sbin/runc
CNI_BIN_DIR=/usr/lib/cni
BUSYBOX=/bin/busybox
EOF
echo "$out"
