#!/usr/bin/env python3
"""Shows what NVML's per-process utilisation looks like on a real GPU, as the SM limiter reads it.

Polls nvmlDeviceGetProcessUtilization every --period seconds with `since` = the previous poll
(what a controller tick does) and prints each poll's samples (pid, sample time relative to the
poll, smUtil), then once with since=0 to show the driver's buffered history and its spacing.
"""
import argparse
import time

import pynvml as n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--period", type=float, default=0.1)
    a = p.parse_args()
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    since = int(time.time() * 1e6)
    end = time.time() + a.seconds
    while time.time() < end:
        time.sleep(a.period)
        now = int(time.time() * 1e6)
        try:
            s = n.nvmlDeviceGetProcessUtilization(h, since)
            desc = " ".join(f"{x.pid}@{(x.timeStamp - now) / 1000:.0f}ms:sm{x.smUtil}" for x in s)
        except n.NVMLError as e:
            desc = f"err={e}"
        u = n.nvmlDeviceGetUtilizationRates(h)
        print(f"poll t={(now % 100000000) / 1000:.0f}ms dev_gpu={u.gpu} {desc}", flush=True)
        since = now
    try:
        s = n.nvmlDeviceGetProcessUtilization(h, 0)
        ts = sorted(x.timeStamp for x in s)
        gaps = [(b - a) / 1000 for a, b in zip(ts, ts[1:])]
        print(f"history samples={len(s)} gaps_ms={[round(g) for g in gaps[-20:]]}", flush=True)
        print("history sm=" + " ".join(f"{x.pid}:{x.smUtil}" for x in s[-20:]), flush=True)
    except n.NVMLError as e:
        print(f"history err={e}")


if __name__ == "__main__":
    main()
