#!/usr/bin/env python3
"""PyTorch checks of libvgpu.so on a real NVIDIA GPU (run by scripts/gpu_check.sh).

Each mode prints `key=value` tokens on one line per result, like vgpu_probe, so the driver
script can read them. The script itself enforces nothing: run it under the library
(LD_PRELOAD + CUDA_DEVICE_* variables, or `hamictl run`) and compare with a plain run.

  mem    --expect-limit BYTES   mem_get_info, fill in chunks until OOM, free, allocate again
  rate   --seconds S --n N      bf16 N x N x N matmul loop: TFLOP/s over S seconds
  graph  --seconds S --n N      the same loop captured in a CUDA graph and replayed
  launch --count C              tiny kernels back to back: host time per launch
"""
import argparse
import os
import sys
import threading
import time

import torch

try:  # nvidia-ml-py: optional, for the process's NVML utilisation and the SM clock
    import pynvml
except ImportError:
    pynvml = None

MiB = 1 << 20


def mode_mem(args):
    free, total = torch.cuda.mem_get_info()
    print(f"mem_get_info free={free} total={total} expect_limit={args.expect_limit}", flush=True)
    held = []
    chunk = args.chunk_mib * MiB
    oom = None
    while True:
        try:
            held.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError as e:  # the quota, seen as an ordinary CUDA OOM
            oom = e
            break
        if len(held) * chunk > 4 * total:  # no quota stopped us: do not run the card dry
            break
    reached = len(held) * chunk
    first_line = str(oom).splitlines()[0][:160] if oom else ""
    print(f"fill chunks={len(held)} reached={reached} oom={'yes' if oom else 'no'} "
          f"oom_type={type(oom).__name__ if oom else '-'}", flush=True)
    print(f"oom_message={first_line!r}", flush=True)
    free_full, _ = torch.cuda.mem_get_info()
    print(f"mem_get_info_full free={free_full}", flush=True)
    del held
    torch.cuda.empty_cache()
    free_after, _ = torch.cuda.mem_get_info()
    again_ok = True
    try:
        x = torch.empty(chunk, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        torch.cuda.synchronize()
        del x
    except torch.OutOfMemoryError:
        again_ok = False
    print(f"after_free free={free_after} realloc_ok={'yes' if again_ok else 'no'}", flush=True)


def matmul_setup(n):
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    return a, b, c


class NvmlWatch:
    """Samples this process's NVML SM utilisation (each new sample weighted by the time it
    covers) and the SM clock while the timed loop runs, so a run reports the share the limiter
    steers (NVML's) next to the throughput. Under partial load the GPU clocks up, so throughput
    shares run above SM-time shares."""

    def __init__(self):
        self.ok = False
        self.util_sum = self.util_w = 0.0
        self.clocks = []
        self.stop = threading.Event()
        if pynvml is None:
            return
        try:
            pynvml.nvmlInit()
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
            self.ok = True
        except Exception:  # no NVML: report nothing rather than fail the run
            pass

    def __enter__(self):
        if self.ok:
            self.last = int(time.time() * 1e6)
            self.t = threading.Thread(target=self.run, daemon=True)
            self.t.start()
        return self

    def run(self):
        me = os.getpid()
        while not self.stop.wait(0.05):
            try:
                self.clocks.append(pynvml.nvmlDeviceGetClockInfo(self.h, pynvml.NVML_CLOCK_SM))
                samples = pynvml.nvmlDeviceGetProcessUtilization(self.h, self.last)
            except Exception:
                continue
            newest = max((x.timeStamp for x in samples), default=self.last)
            if newest <= self.last:
                continue
            mine = sum(x.smUtil for x in samples if x.pid == me and x.timeStamp > self.last)
            self.util_sum += (newest - self.last) * mine
            self.util_w += newest - self.last
            self.last = newest

    def __exit__(self, *exc):
        self.stop.set()
        if self.ok:
            self.t.join()

    def tokens(self):
        util = f"{self.util_sum / self.util_w:.1f}" if self.util_w else "-"
        clk = sorted(self.clocks)
        return f"nvml_sm={util} sm_clock_mhz={clk[len(clk) // 2] if clk else '-'}"


def timed_loop(step, seconds, flops_per_step):
    # Warm-up: cuBLAS handle, kernel selection, and the limiter's first measurement windows.
    # Both loops wait for the GPU every 8 steps, as a training loop does when it reads its
    # loss: without that, the first loop would queue ~1024 products (1.6 s of GPU time) that
    # the GPU runs at full speed while the timed loop counts them, and the figure would measure
    # that queue rather than the limit (see scripts/gpu_check.sh's full-queue check for it).
    t_end = time.perf_counter() + min(2.0, seconds / 3)
    n = 0
    while time.perf_counter() < t_end:
        step()
        n += 1
        if n % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    steps = 0
    with NvmlWatch() as watch:
        t0 = time.perf_counter()
        while True:
            step()
            steps += 1
            if steps % 8 == 0:
                torch.cuda.synchronize()
                if time.perf_counter() - t0 >= seconds:
                    break
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    return steps, dt, steps * flops_per_step / dt / 1e12, watch.tokens()


def mode_rate(args):
    a, b, c = matmul_setup(args.n)
    steps, dt, tflops, nv = timed_loop(lambda: torch.matmul(a, b, out=c), args.seconds,
                                       2.0 * args.n ** 3)
    print(f"rate mode=eager n={args.n} steps={steps} seconds={dt:.2f} tflops={tflops:.1f} {nv}",
          flush=True)


def mode_graph(args):
    a, b, c = matmul_setup(args.n)
    per_graph = 4
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            torch.matmul(a, b, out=c)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(per_graph):
            torch.matmul(a, b, out=c)
    steps, dt, tflops, nv = timed_loop(g.replay, args.seconds, per_graph * 2.0 * args.n ** 3)
    print(f"rate mode=graph n={args.n} replays={steps} seconds={dt:.2f} tflops={tflops:.1f} {nv}",
          flush=True)


def mode_launch(args):
    x = torch.zeros(1, device="cuda")
    for _ in range(1000):
        x.add_(1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.count):
        x.add_(1)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    ok = int(x.item()) == 1000 + args.count
    print(f"launch count={args.count} host_us_per_launch={(t1 - t0) / args.count * 1e6:.2f} "
          f"total_us_per_launch={(t2 - t0) / args.count * 1e6:.2f} result_ok={'yes' if ok else 'no'}",
          flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["mem", "rate", "graph", "launch"])
    p.add_argument("--expect-limit", type=int, default=0)
    p.add_argument("--chunk-mib", type=int, default=256)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--count", type=int, default=200000)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("error=no_cuda", flush=True)
        return 3
    print(f"torch={torch.__version__} device={torch.cuda.get_device_name(0)!r}", flush=True)
    {"mem": mode_mem, "rate": mode_rate, "graph": mode_graph, "launch": mode_launch}[args.mode](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
