#!/usr/bin/env bash
# Real-GPU checks of libvgpu.so, the device plugin's discovery and hami-monitor's metrics: run
# on a machine with an NVIDIA GPU, its driver and (for the PyTorch part) python3 with torch. Needs a build (bash scripts/build.sh) or prebuilt binaries:
#
#   bash scripts/gpu_check.sh                    # binaries from build/
#   HAMI_BIN=/opt/hami/bin HAMI_LIB=/opt/hami/lib/libvgpu.so bash scripts/gpu_check.sh
#
# Every check runs the same program with and without the library and prints what it measured;
# a summary table comes last, and full logs go to $GPU_CHECK_OUT (default /tmp/hami-gpu-check).
# Exit status: 0 when every check's expectation held, 1 otherwise.
set -u
cd "$(dirname "$0")/.."
BIN=${HAMI_BIN:-build/bin}
LIB=$(readlink -f "${HAMI_LIB:-build/lib/libvgpu.so}")
LOGS=${GPU_CHECK_OUT:-/tmp/hami-gpu-check}
PY=${PYTHON:-python3}
SECONDS_PER_RATE=${RATE_SECONDS:-8}
mkdir -p "$LOGS"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
GIB=$((1 << 30))
FAILED=0
SUMMARY=()

say() { printf '%s\n' "$*"; }
row() { SUMMARY+=("$(printf '%-44s %-34s %s' "$1" "$2" "$3")"); }
# expectation NAME MEASURED OK(0/1)
verdict() {
  if [ "$3" = 1 ]; then row "$1" "$2" PASS; else row "$1" "$2" FAIL; FAILED=1; fi
}
kv() { # kv KEY < text: the value of the first KEY=value token
  grep -o "\b$1=[^ ]*" | head -1 | cut -d= -f2-
}
# vgpu ENV... -- CMD: run CMD with the library preloaded on region $REGION (fresh per call unless
# the caller set it) and the given variables.
vgpu() {
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_SHARED_CACHE="${REGION:-$WORK/r$RANDOM.cache}" \
    "${envs[@]}" timeout 300 "$@"
}
approx() { # approx VALUE TARGET TOLERANCE -> 1 if |VALUE-TARGET| <= TOLERANCE
  awk -v v="$1" -v t="$2" -v d="$3" 'BEGIN { x = v - t; if (x < 0) x = -x; print (v != "" && x <= d) ? 1 : 0 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }'; }

# GPU_CHECK_PARTS: any of "memory sm torch plugin monitor" (default: all).
PARTS=" ${GPU_CHECK_PARTS:-memory sm torch plugin monitor} "
part() { [[ $PARTS == *" $1 "* ]]; }

say "== environment"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$LOGS/env.txt"
fi
"$BIN/vgpu_probe" info | tee -a "$LOGS/env.txt"
SMS=$($PY -c 'import torch; print(torch.cuda.get_device_properties(0).multi_processor_count)' 2>/dev/null || echo 132)
say "sms=$SMS"

if part memory; then
say "== memory view (cuDeviceTotalMem, cuMemGetInfo, NVML) under an 8 GiB quota"
vgpu CUDA_DEVICE_MEMORY_LIMIT=8Gi -- "$BIN/vgpu_probe" info > "$LOGS/info.txt" 2>&1
vgpu CUDA_DEVICE_MEMORY_LIMIT=8Gi -- "$BIN/vgpu_probe" nvml-mem >> "$LOGS/info.txt" 2>&1
if command -v nvidia-smi > /dev/null; then
  vgpu CUDA_DEVICE_MEMORY_LIMIT=8Gi -- nvidia-smi --query-gpu=memory.total,memory.used \
    --format=csv,noheader,nounits >> "$LOGS/info.txt" 2>&1
fi
cat "$LOGS/info.txt"
t=$(kv total < "$LOGS/info.txt"); vt=$(kv visible_total < "$LOGS/info.txt")
nt=$(grep nvml_device "$LOGS/info.txt" | kv total)
verdict "cuDeviceTotalMem / cuMemGetInfo = quota" "$t / $vt" \
  "$([ "$t" = $((8 * GIB)) ] && [ "$vt" = $((8 * GIB)) ] && echo 1 || echo 0)"
verdict "NVML memory total = quota" "$nt" "$([ "$nt" = $((8 * GIB)) ] && echo 1 || echo 0)"
if command -v nvidia-smi > /dev/null; then
  smi_total=$(tail -1 "$LOGS/info.txt" | cut -d, -f1 | tr -d ' ')
  row "nvidia-smi memory.total under the library" "${smi_total} MiB" info
fi
if [ -x "$BIN/hamictl" ]; then
  "$BIN/hamictl" run --lib "$LIB" --mem 8Gi -- "$BIN/hamictl" smi > "$LOGS/hamictl-smi.txt" 2>&1
  cat "$LOGS/hamictl-smi.txt"
fi

say "== every allocation family stops at a 2 GiB quota (256 MiB chunks, at most 6 GiB)"
for kind in data pitch managed async pool vmm array; do
  out=$(vgpu CUDA_DEVICE_MEMORY_LIMIT=2Gi -- "$BIN/vgpu_probe" fill --kind $kind --chunk 256Mi \
    --max 6Gi 2>&1)
  printf '%s\n' "$out" > "$LOGS/fill-$kind.txt"
  got=$(kv allocated <<< "$out")
  # Arrays round their size up a little, so the last chunk may not fit.
  ok=$(awk -v g="$got" -v q=$((2 * GIB)) 'BEGIN { print (g != "" && g <= q && g >= q - 268435456 * 1.01) ? 1 : 0 }')
  verdict "fill $kind under 2 GiB" "allocated=$got err=$(kv error <<< "$out")" "$ok"
done
out=$(vgpu CUDA_DEVICE_MEMORY_LIMIT=2Gi -- "$BIN/vgpu_probe" --resolve getproc fill --kind data \
  --chunk 256Mi --max 6Gi 2>&1)
printf '%s\n' "$out" > "$LOGS/fill-getproc.txt"
got=$(kv allocated <<< "$out")
verdict "fill via cuGetProcAddress_v2 under 2 GiB" "allocated=$got" \
  "$([ "$got" = $((2 * GIB)) ] && echo 1 || echo 0)"

say "== a refusal is an error line at the chart's LIBCUDA_LOG_LEVEL=1, at most one a second"
out=$(vgpu CUDA_DEVICE_MEMORY_LIMIT=1Gi LIBCUDA_LOG_LEVEL=1 -- "$BIN/vgpu_probe" alloc \
  --bytes 768Mi --count 200 2>&1)
printf '%s\n' "$out" > "$LOGS/oom-log.txt"
grep -m1 "refused by" <<< "$out"
lines=$(grep -c "refused by the container's memory limit" <<< "$out")
verdict "199 refusals logged at level 1" "$lines line(s), fail=$(grep '^kind=' <<< "$out" | kv fail)" \
  "$([ "$lines" -ge 1 ] && [ "$lines" -le 3 ] && echo 1 || echo 0)"

say "== two processes race for 600 MiB under 1 GiB"
REGION=$WORK/race.cache
head -c 4096 /dev/zero > "$WORK/sync"
vgpu CUDA_DEVICE_MEMORY_LIMIT=1Gi -- "$BIN/vgpu_probe" race --bytes 600Mi --rounds 300 \
  --sync "$WORK/sync" --id 0 > "$LOGS/race0.txt" 2>&1 &
p0=$!
vgpu CUDA_DEVICE_MEMORY_LIMIT=1Gi -- "$BIN/vgpu_probe" race --bytes 600Mi --rounds 300 \
  --sync "$WORK/sync" --id 1 > "$LOGS/race1.txt" 2>&1
wait $p0
unset REGION
bad=$(kv bad_rounds < "$LOGS/race0.txt")
verdict "race: rounds without exactly one winner" "$(kv rounds < "$LOGS/race0.txt") rounds, bad=$bad" \
  "$([ "$bad" = 0 ] && echo 1 || echo 0)"

say "== SIGKILL of a holder: its memory is usable again"
REGION=$WORK/kill.cache
coproc HOLD { vgpu CUDA_DEVICE_MEMORY_LIMIT=1Gi -- "$BIN/vgpu_probe" crash-hold --bytes 800Mi 2>&1; }
read -r -t 60 line <&"${HOLD[0]}"
holder=$(pgrep -n -x vgpu_probe)
kill -9 "$holder"
t0=$(date +%s%N)
out=$(vgpu CUDA_DEVICE_MEMORY_LIMIT=1Gi -- "$BIN/vgpu_probe" alloc --bytes 800Mi 2>&1)
t1=$(date +%s%N)
wait 2> /dev/null
unset REGION
printf 'holder said: %s\n%s\n' "$line" "$out" > "$LOGS/kill.txt"
verdict "800 MiB again after SIGKILL of its holder" "ok=$(kv ok <<< "$out") in $(((t1 - t0) / 1000000)) ms" \
  "$([ "$(kv ok <<< "$out")" = 1 ] && echo 1 || echo 0)"

say "== fork: a child shares the container's quota"
out=$(vgpu CUDA_DEVICE_MEMORY_LIMIT=1Gi -- "$BIN/vgpu_probe" fork --bytes 600Mi 2>&1)
printf '%s\n' "$out" > "$LOGS/fork.txt"
rc=$(grep child_alloc <<< "$out" | kv rc)
if grep -q "cuInit failed with CUresult 3" <<< "$out"; then
  # NVIDIA's driver does not let a forked child use CUDA once the parent has (the simulated
  # driver does, and the integration tests cover the child's accounting there).
  row "fork: child's CUDA" "refused by the driver (CUresult 3)" info
else
  verdict "forked child's 600 MiB refused (parent holds 600 of 1024)" "child rc=$rc" \
    "$([ "$rc" = 2 ] && echo 1 || echo 0)"
fi

fi

if part sm; then
say "== SM limit on a saturating spin kernel ($SMS blocks x 1 ms), NVML per-process utilisation"
spin() { "$@" "$BIN/vgpu_probe" spin --blocks "$SMS" --block-ns 1000000 --duration-ms 5000 \
  --warmup-ms 2500 --mode "$MODE" 2>&1; }
MODE=kernel
out=$(spin env); printf '%s\n' "$out" > "$LOGS/spin-plain.txt"
base=$(kv launches <<< "$out")
row "spin kernel, no library" "sm_util=$(kv sm_util <<< "$out") launches=$base" info
for MODE in kernel graph coop; do
  for limit in 30 60; do
    out=$(spin vgpu CUDA_DEVICE_SM_LIMIT=$limit GPU_CORE_UTILIZATION_POLICY=force LIBCUDA_LOG_LEVEL=4 --)
    printf '%s\n' "$out" > "$LOGS/spin-$MODE-$limit.txt"
    util=$(kv sm_util <<< "$out")
    r=$(ratio "$(kv launches <<< "$out")" "$base")
    verdict "spin $MODE, limit $limit %" "sm_util=$util min=$(kv sm_util_min <<< "$out") launch_ratio=$r" \
      "$(approx "$util" $limit 5)"
  done
done

# The process fills its launch queue (about a second of kernels) before the gate engages; the
# limiter must let that queue drain without over-correcting into starvation.
MODE=kernel
out=$(vgpu CUDA_DEVICE_SM_LIMIT=60 GPU_CORE_UTILIZATION_POLICY=force LIBCUDA_LOG_LEVEL=4 -- \
  "$BIN/vgpu_probe" spin --blocks "$SMS" --block-ns 1000000 --duration-ms 3000 --warmup-ms 1000 2>&1)
printf '%s\n' "$out" > "$LOGS/spin-queue-60.txt"
verdict "spin, limit 60 %, seconds 1-4 after a full queue" \
  "avg=$(kv sm_util <<< "$out") min=$(kv sm_util_min <<< "$out")" \
  "$(awk -v m="$(kv sm_util_min <<< "$out")" 'BEGIN { print (m != "" && m >= 45) ? 1 : 0 }')"

say "== launch cost on the real driver (noop kernel, host time per cuLaunchKernel)"
out0=$("$BIN/vgpu_probe" launch-loop --count 200000 2>&1)
out1=$(vgpu -- "$BIN/vgpu_probe" launch-loop --count 200000 2>&1)
out2=$(vgpu CUDA_DEVICE_SM_LIMIT=100 -- "$BIN/vgpu_probe" launch-loop --count 200000 2>&1)
printf 'plain %s\nlib %s\n' "$out0" "$out1" > "$LOGS/launch.txt"
row "noop launch ns: plain / library" "$(kv ns_per_launch <<< "$out0") / $(kv ns_per_launch <<< "$out1") / $(kv ns_per_launch <<< "$out2") (limit 100)" info

fi

if ! part torch; then
  :
elif $PY -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
  T="$PY bench/gpu/torch_quota.py"
  say "== PyTorch: 8 GiB quota"
  out=$(vgpu CUDA_DEVICE_MEMORY_LIMIT=8Gi -- $T mem --expect-limit $((8 * GIB)) 2>&1)
  printf '%s\n' "$out" > "$LOGS/torch-mem.txt"
  printf '%s\n' "$out" | grep -v '^\[' | tail -6
  total=$(grep '^mem_get_info ' <<< "$out" | kv total)
  verdict "torch.cuda.mem_get_info total = 8 GiB" "$total" \
    "$([ "$total" = $((8 * GIB)) ] && echo 1 || echo 0)"
  reached=$(grep '^fill ' <<< "$out" | kv reached)
  oom=$(grep '^fill ' <<< "$out" | kv oom_type)
  verdict "allocation past 8 GiB raises OOM" "reached=$reached $oom" \
    "$([ "$oom" = OutOfMemoryError ] && [ "${reached:-0}" -le $((8 * GIB)) ] && [ "${reached:-0}" -ge $((7 * GIB)) ] && echo 1 || echo 0)"
  verdict "allocation works again after freeing" "$(grep '^after_free' <<< "$out" | kv realloc_ok)" \
    "$([ "$(grep '^after_free' <<< "$out" | kv realloc_ok)" = yes ] && echo 1 || echo 0)"
  out=$(vgpu CUDA_DEVICE_MEMORY_LIMIT=8Gi LIBCUDA_LOG_LEVEL=1 -- $T mem --expect-limit $((8 * GIB)) 2>&1)
  printf '%s\n' "$out" > "$LOGS/torch-mem-level1.txt"
  verdict "torch OOM: the refusal line at level 1" "$(grep -m1 -o 'cuMem[A-Za-z_0-9]*: out of memory' <<< "$out")" \
    "$(grep -q "refused by the container's memory limit" <<< "$out" && echo 1 || echo 0)"

  if [ -x "$BIN/hamictl" ]; then
    "$BIN/hamictl" run --lib "$LIB" --mem 8Gi --summary -- $T mem > "$LOGS/torch-mem-hamictl.txt" 2>&1
    reached=$(grep '^fill ' "$LOGS/torch-mem-hamictl.txt" | kv reached)
    verdict "hamictl run --mem 8Gi: torch stops at 8 GiB" "reached=$reached" \
      "$([ "${reached:-0}" -le $((8 * GIB)) ] && [ "${reached:-0}" -ge $((7 * GIB)) ] && echo 1 || echo 0)"
  fi

  say "== PyTorch: bf16 matmul rate under SM limits"
  out=$($T rate --seconds "$SECONDS_PER_RATE" 2>&1); printf '%s\n' "$out" > "$LOGS/torch-rate-plain.txt"
  base=$(kv tflops <<< "$out")
  row "matmul, no library" "$base TFLOP/s" info
  out=$(vgpu -- $T rate --seconds "$SECONDS_PER_RATE" 2>&1); printf '%s\n' "$out" > "$LOGS/torch-rate-lib.txt"
  row "matmul, library without a limit" "$(kv tflops <<< "$out") TFLOP/s ($(ratio "$(kv tflops <<< "$out")" "$base"))" info
  row "  (SM clock, unlimited)" "$(kv sm_clock_mhz <<< "$out") MHz" info
  # The limit is a share of SM time as NVML measures it (nvml_sm, what nvidia-smi shows);
  # throughput runs a few points above it because a partly idle GPU clocks higher.
  for limit in 30 50 70; do
    out=$(vgpu CUDA_DEVICE_SM_LIMIT=$limit GPU_CORE_UTILIZATION_POLICY=force LIBCUDA_LOG_LEVEL=4 -- \
      $T rate --seconds "$SECONDS_PER_RATE" 2>&1)
    printf '%s\n' "$out" > "$LOGS/torch-rate-$limit.txt"
    r=$(ratio "$(kv tflops <<< "$out")" "$base")
    verdict "matmul at limit $limit %: NVML share" "nvml_sm=$(kv nvml_sm <<< "$out")" \
      "$(approx "$(kv nvml_sm <<< "$out")" "$limit" 3)"
    row "  throughput ratio, SM clock" "$r, $(kv sm_clock_mhz <<< "$out") MHz" info
  done
  out=$($T graph --seconds "$SECONDS_PER_RATE" 2>&1); printf '%s\n' "$out" > "$LOGS/torch-graph-plain.txt"
  gbase=$(kv tflops <<< "$out")
  out=$(vgpu CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=force -- \
    $T graph --seconds "$SECONDS_PER_RATE" 2>&1)
  printf '%s\n' "$out" > "$LOGS/torch-graph-30.txt"
  r=$(ratio "$(kv tflops <<< "$out")" "$gbase")
  verdict "CUDA graph replay at limit 30 %: NVML share" "nvml_sm=$(kv nvml_sm <<< "$out") (throughput $r)" \
    "$(approx "$(kv nvml_sm <<< "$out")" 30 3)"

  say "== PyTorch: small-kernel launch cost"
  for v in plain lib lim; do
    case $v in
      plain) out=$($T launch 2>&1) ;;
      lib) out=$(vgpu -- $T launch 2>&1) ;;
      lim) out=$(vgpu CUDA_DEVICE_SM_LIMIT=100 -- $T launch 2>&1) ;;
    esac
    printf '%s\n' "$out" > "$LOGS/torch-launch-$v.txt"
    row "torch add_ launch us ($v)" "host=$(kv host_us_per_launch <<< "$out") total=$(kv total_us_per_launch <<< "$out") ok=$(kv result_ok <<< "$out")" info
  done
else
  row "PyTorch checks" "skipped: no torch with CUDA" info
fi

if part plugin; then
  say ""
  say "== hami-device-plugin discovery against the driver"
  # What the plugin would register for this node, compared with the driver's own view: UUIDs
  # and memory from nvidia-smi (hamictl smi where nvidia-smi is absent, as on the simulated
  # driver), NUMA nodes from sysfs.
  reg=$(NODE_NAME=gpu-check "$BIN/hami-device-plugin" --print-registration \
        --node-config-file=/nonexistent 2> "$LOGS/plugin.err" | head -1)
  printf '%s\n' "$reg" > "$LOGS/registration.json"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=index,uuid,memory.total,pci.bus_id --format=csv,noheader,nounits \
      > "$LOGS/driver-gpus.csv"
  else
    "$BIN/hamictl" smi --json | $PY -c '
import json, sys
for d in json.load(sys.stdin)["devices"]:
    print("%d, %s, %d, " % (d["index"], d["uuid"], d["memory_total_mib"]))' > "$LOGS/driver-gpus.csv"
  fi
  out=$($PY - "$LOGS/registration.json" "$LOGS/driver-gpus.csv" <<'PY'
import json, sys
reg = {d["id"]: d for d in json.load(open(sys.argv[1]))}
bad = []
n = 0
for line in open(sys.argv[2]):
    idx, uuid, mem, bus = [f.strip() for f in line.split(",")]
    n += 1
    d = reg.get(uuid)
    if d is None:
        bad.append("%s missing" % uuid)
        continue
    if d.get("index", 0) != int(idx) or d.get("devmem", 0) != int(mem):
        bad.append("%s index/memory %s/%s vs %s/%s" % (uuid, d.get("index", 0), d.get("devmem"), idx, mem))
    if bus:
        parts = bus.lower().split(":")
        sysfs = "/sys/bus/pci/devices/%s:%s:%s/numa_node" % (parts[0][-4:], parts[1], parts[2])
        try:
            numa = max(0, int(open(sysfs).read()))
            if d.get("numa", 0) != numa:
                bad.append("%s numa %s vs %s" % (uuid, d.get("numa", 0), numa))
        except OSError:
            pass
print("gpus=%d registered=%d mismatches=%d %s" % (n, len(reg), len(bad), "; ".join(bad)))
PY
)
  say "$out"
  ok=0
  [[ $out == *"mismatches=0"* && $out != "gpus=0 "* && $(kv gpus <<< "$out") == $(kv registered <<< "$out") ]] && ok=1
  verdict "plugin registration = driver (uuid, memory, numa)" "$out" $ok
fi

if part monitor; then
  say ""
  say "== hami-monitor against the driver's NVML: one container holding 1 GiB of a 4 GiB quota"
  # The monitor as the DaemonSet runs it, beside a simulated API server that knows the pod; the
  # container's region is where the device plugin would put it (<hook>/containers/<uid>_main/).
  # Its metrics must show the region's figures, the driver's view of the GPU, and (on a real GPU,
  # while a spin kernel runs at a 50 % SM limit) the container's share from NVML's per-process
  # samples, which needs the monitor to have matched the processes to the container.
  M=$WORK/monitor
  mkdir -p "$M/hook/containers"
  "$BIN/hami-sim-apiserver" --port 0 --write-kubeconfig "$M/kubeconfig" \
    --ready-file "$M/api.json" > "$LOGS/monitor-apiserver.log" 2>&1 &
  api_pid=$!
  uid=$($PY - "$M/api.json" <<'PY'
import json, os, sys, time, urllib.request
for _ in range(300):
    if os.path.exists(sys.argv[1]):
        break
    time.sleep(0.05)
url = json.load(open(sys.argv[1]))["url"]
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "gpu-check", "namespace": "default"},
       "spec": {"nodeName": "gpu-check", "containers": [{"name": "main", "image": "x"}]}}
req = urllib.request.Request(url + "/api/v1/namespaces/default/pods", json.dumps(pod).encode(),
                             {"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(req))["metadata"]["uid"])
PY
)
  dir=$M/hook/containers/${uid}_main
  mkdir -p "$dir"
  "$BIN/hami-monitor" --hook-path "$M/hook" --node-name gpu-check --kubeconfig "$M/kubeconfig" \
    --metrics-bind-address 127.0.0.1:0 --update-interval 1s --ready-file "$M/monitor.json" -v 4 \
    > "$LOGS/monitor.log" 2>&1 &
  mon_pid=$!
  export REGION=$dir/region-0.cache
  # One container: every process has the same environment (the region's limits are set by the
  # first process that creates it).
  CTR=(CUDA_DEVICE_MEMORY_LIMIT=4Gi CUDA_DEVICE_SM_LIMIT=50 GPU_CORE_UTILIZATION_POLICY=force)
  coproc MHOLD { vgpu "${CTR[@]}" -- "$BIN/vgpu_probe" crash-hold --bytes 1Gi 2>&1; }
  read -r -t 60 line <&"${MHOLD[0]}"
  mholder=$(pgrep -n -x vgpu_probe)
  spin_out=
  if command -v nvidia-smi > /dev/null; then
    vgpu "${CTR[@]}" -- "$BIN/vgpu_probe" spin --blocks "$SMS" --block-ns 1000000 \
      --duration-ms 6000 --warmup-ms 3000 > "$M/spin.txt" 2>&1 &
    spin_pid=$!
    sleep 7  # the spin's warm-up and a few seconds of samples
  else
    sleep 3  # a few updates
  fi
  unset REGION
  # Scrape while both processes run: the figures of this container's row and of the host GPU.
  metrics=$($PY - "$M/monitor.json" "$uid" <<'PY'
import json, sys, time, urllib.request
for _ in range(300):
    try:
        addr = json.load(open(sys.argv[1]))["metrics"]
        break
    except (OSError, ValueError, KeyError):
        time.sleep(0.05)
text = urllib.request.urlopen("http://%s/metrics" % addr).read().decode()
open(sys.argv[1] + ".metrics", "w").write(text)
want = {"hami_vgpu_memory_limit_bytes": "limit", "hami_vgpu_memory_used_bytes": "used",
        "hami_vgpu_memory_buffer_bytes": "buffer",
        "hami_container_device_utilization_ratio": "util",
        "hami_host_gpu_memory_used_bytes": "host_used"}
out = {}
for line in text.splitlines():
    name = line.split("{", 1)[0].split(" ", 1)[0]
    # Device 0 only: the container sees every GPU of the machine, the probes use the first.
    mine = 'pod="gpu-check"' in line and 'vdevice_index="0"' in line
    host = name.startswith("hami_host") and 'device_index="0"' in line
    if name in want and (mine or host):
        out[want[name]] = "%.0f" % float(line.rsplit(" ", 1)[1])
        if 'device_uuid="' in line:
            out["uuid"] = line.split('device_uuid="', 1)[1].split('"', 1)[0]
print(" ".join("%s=%s" % kv for kv in sorted(out.items())))
PY
)
  smi=
  if command -v nvidia-smi > /dev/null; then
    smi=$(nvidia-smi --query-gpu=uuid,memory.used,memory.reserved --format=csv,noheader,nounits \
      | head -1)
  fi
  [ -n "${spin_pid:-}" ] && wait "$spin_pid"
  kill -9 "$mholder" 2> /dev/null
  wait "${MHOLD_PID:-}" 2> /dev/null
  kill "$mon_pid" "$api_pid" 2> /dev/null
  wait "$mon_pid" "$api_pid" 2> /dev/null
  printf 'holder said: %s\n%s\n' "$line" "$metrics" > "$LOGS/monitor.txt"
  say "$metrics"
  verdict "monitor: container's limit and buffer" \
    "limit=$(kv limit <<< "$metrics") buffer=$(kv buffer <<< "$metrics")" \
    "$([ "$(kv limit <<< "$metrics")" = $((4 * GIB)) ] && \
       [ "$(kv buffer <<< "$metrics")" = $((1 * GIB)) ] && echo 1 || echo 0)"
  if [ -n "$smi" ]; then
    smi_uuid=$(cut -d, -f1 <<< "$smi" | tr -d ' ')
    # The metric is nvmlDeviceGetMemoryInfo's "used" (as upstream's HostGPUMemoryUsage), which
    # counts the driver's reserved memory; nvidia-smi shows the two apart.
    smi_used=$(awk -F, '{ printf "%d", $2 + $3 }' <<< "$smi")
    verdict "monitor: device uuid = nvidia-smi" "$(kv uuid <<< "$metrics")" \
      "$([ "$(kv uuid <<< "$metrics")" = "$smi_uuid" ] && echo 1 || echo 0)"
    # Both read while the two processes run; the driver's figure moves a little between reads.
    host_mib=$(awk -v b="$(kv host_used <<< "$metrics")" 'BEGIN { printf "%d", b / 1048576 }')
    verdict "monitor: host memory used = nvidia-smi used + reserved" \
      "$host_mib MiB vs $smi_used MiB" "$(approx "$host_mib" "$smi_used" 64)"
    verdict "monitor: container SM share at limit 50 %" \
      "util=$(kv util <<< "$metrics") (spin: sm_util=$(kv sm_util < "$M/spin.txt"))" \
      "$(approx "$(kv util <<< "$metrics")" 50 8)"
    cp "$M/spin.txt" "$LOGS/monitor-spin.txt"
  fi
  cp "$M/monitor.json.metrics" "$LOGS/monitor-metrics.txt" 2> /dev/null
fi

say ""
say "== summary"
printf '%s\n' "${SUMMARY[@]}" | tee "$LOGS/summary.txt"
exit $FAILED
