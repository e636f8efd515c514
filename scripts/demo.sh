#!/usr/bin/env bash
# The README's main job: installs what it needs, builds the binaries the simulated cluster runs
# (not the whole tree), then runs hami-sim-world: the whole system on three simulated GPU nodes,
# the user's eight seed scenarios applied to it, a fourth node in dynamic MIG mode joining for a
# MIG scenario, and a report of where each pod went and why, the quota each container got and
# what it really uses. Exit status 0 only when every expectation holds.
#
#   bash scripts/demo.sh                 # the report, then everything stops
#   bash scripts/demo.sh --keep          # leaves the world running for kubectl ("stop" ends it)
#   bash scripts/demo.sh --real          # the same on a real control plane: etcd, kube-apiserver,
#                                        # kube-controller-manager, kube-scheduler (built once
#                                        # from their Go modules by scripts/kube-tools.sh)
#   bash scripts/demo.sh --volcano       # --real, plus scenario 10: Volcano's scheduler (built
#                                        # once by scripts/volcano-tools.sh) and a node in
#                                        # Volcano vGPU mode running the Volcano document's Job
#   bash scripts/demo.sh vgpu            # the guided tour of libvgpu alone (hamictl demo)
#
# Other arguments go to hami-sim-world (--report-json FILE, --dir DIR, --help).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/deps.sh"
werror=OFF
if [[ "${CI:-}" == "true" ]]; then werror=ON; fi
cmake -S "$root" -B "$build" -G Ninja -DHAMI_WERROR=$werror >/dev/null
if [[ "${1:-}" == "vgpu" ]]; then
  shift
  cmake --build "$build" -j "$(nproc)" --target hamictl vgpu vgpu_probe hami_sim_cuda hami_sim_nvml
  exec "$build/bin/hamictl" demo --build-dir "$build" "$@"
fi
args=()
real=0
volcano=0
for a in "$@"; do
  case "$a" in
    --real) real=1 ;;
    --volcano) real=1; volcano=1 ;;
    *) args+=("$a") ;;
  esac
done
if [[ $real == 1 ]]; then
  kube_bin=$(bash "$root/scripts/kube-tools.sh")
  args+=(--control-plane real --kube-bin "$kube_bin")
fi
if [[ $volcano == 1 ]]; then
  args+=(--volcano-bin "$(bash "$root/scripts/volcano-tools.sh")")
fi
echo "Building what the simulated cluster runs (the first build takes several minutes) ..."
cmake --build "$build" -j "$(nproc)" --target hami-sim-world
exec "$build/bin/hami-sim-world" ${args[@]+"${args[@]}"}
