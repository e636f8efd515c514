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
  # tests/deploy: helm-render (Go's text/template + Sprig + the values schema check, as helm)
  golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev
  golang-github-xeipuuv-gojsonschema-dev
)
# tests/deploy validates manifests with npm packages; use the machine's Node.js when it has one.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi
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
if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
