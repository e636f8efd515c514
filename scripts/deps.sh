#!/usr/bin/env bash
# Installs the Debian packages the build and tests need. Safe to run repeatedly: when every
# package is already present it does nothing (and needs no network).
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ make pkg-config binutils
  clang  # the thread-safety analysis test (scripts/thread_safety.sh)
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev
  nlohmann-json3-dev libyaml-cpp-dev
  libcpp-httplib-dev libssl-dev libcurl4-openssl-dev zlib1g-dev openssl
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  prometheus  # promtool and a real Prometheus for the exporters' tests
  python3 python3-yaml  # tests/deploy reads helm's and kubectl's YAML
  git ca-certificates   # Go modules (scripts/kube-tools.sh)
)
# Extra packages for the sanitizer/fuzz jobs (scripts/sanitize.sh, scripts/fuzz.sh).
if [[ "${HAMI_DEPS_EXTRA:-}" == "1" ]]; then
  PACKAGES+=(clang-19 libclang-rt-19-dev)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# The real Kubernetes binaries are built from Go modules (scripts/kube-tools.sh): Go 1.24 or newer,
# which Debian bookworm does not package; the machine provides it (/usr/local/go).
if ! PATH="$PATH:/usr/local/go/bin" go version >/dev/null 2>&1; then
  echo "deps: Go >= 1.24 is needed to build the Kubernetes test binaries (see tools/kube/README.md)" >&2
  exit 1
fi
if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
