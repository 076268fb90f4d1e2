#!/usr/bin/python3
"""What a call into ferry costs from Python, beside torch: the per-call time of `empty` and of
`copy_` on a tiny tensor (the binding's overhead, not bandwidth), and how long a DLPack exchange
takes for 1 KiB and for 1 GiB (zero-copy: it should not depend on the size). A benchmark to run
by hand, never a timed test; it prints the CPU model with the figures.

Usage: PYTHONPATH=build/release/python /usr/bin/python3 bench/python_overhead.py [--quick]
"""

import argparse
import gc
import platform
import subprocess
import sys
import time

import numpy as np

import ferry

try:
    import torch
except ImportError:  # the ferry figures alone
    torch = None


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown CPU"


def per_call_ns(fn, calls, repeat):
    """Median over `repeat` samples of the time per call, in nanoseconds."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter_ns() - t0) / calls)
    samples.sort()
    return samples[len(samples) // 2]


def exchange_us(make, exchange, repeat):
    """Median time of one exchange of a tensor made once (the producer stays alive)."""
    src = make()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        out = exchange(src)
        samples.append((time.perf_counter_ns() - t0) / 1e3)
        del out
    samples.sort()
    return samples[len(samples) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, a smoke run")
    args = parser.parse_args()
    calls, repeat = (2000, 5) if args.quick else (50000, 15)
    ferry.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)

    print("ferry %s, Python %s, numpy %s%s" % (
        ferry.__version__, platform.python_version(), np.__version__,
        ", torch %s" % torch.__version__ if torch else " (no torch)"))
    print("CPU: %s (lscpu); one thread; medians of %d samples of %d calls" % (
        cpu_model(), repeat, calls))

    rows = []
    f_src, f_dst = ferry.ones(64), ferry.empty(64)
    rows.append(("empty(64)", per_call_ns(lambda: ferry.empty(64), calls, repeat),
                 per_call_ns(lambda: torch.empty(64), calls, repeat) if torch else None))
    rows.append(("dst.copy_(src), 64 float32",
                 per_call_ns(lambda: f_dst.copy_(f_src), calls, repeat),
                 (lambda s, d: per_call_ns(lambda: d.copy_(s), calls, repeat))(
                     torch.ones(64), torch.empty(64)) if torch else None))
    rows.append(("empty(64) + copy_",
                 per_call_ns(lambda: ferry.empty(64).copy_(f_src), calls, repeat),
                 (lambda s: per_call_ns(lambda: torch.empty(64).copy_(s), calls, repeat))(
                     torch.ones(64)) if torch else None))
    print("\n%-34s %12s %12s %8s" % ("per call", "ferry ns", "torch ns", "ratio"))
    for name, f_ns, t_ns in rows:
        ratio = "%.2f" % (f_ns / t_ns) if t_ns else "-"
        print("%-34s %12.0f %12s %8s" % (name, f_ns, "%.0f" % t_ns if t_ns else "-", ratio))
    print("ratio = ferry / torch (the target is at most 1.5)")

    kib, gib = 1 << 10, 1 << 30
    exchanges = [("ferry -> numpy", lambda n: ferry.empty(n // 4), np.from_dlpack),
                 ("numpy -> ferry", lambda n: np.empty(n // 4, np.float32), ferry.from_dlpack),
                 ("ferry -> ferry", lambda n: ferry.empty(n // 4), ferry.from_dlpack)]
    if torch is not None:
        exchanges += [("ferry -> torch", lambda n: ferry.empty(n // 4), torch.from_dlpack),
                      ("torch -> ferry", lambda n: torch.empty(n // 4), ferry.from_dlpack)]
    print("\n%-34s %12s %12s" % ("DLPack exchange (zero-copy)", "1 KiB us", "1 GiB us"))
    ex_repeat = 50 if args.quick else 500
    for name, make, exchange in exchanges:
        small = exchange_us(lambda: make(kib), exchange, ex_repeat)
        gc.collect()
        large = exchange_us(lambda: make(gib), exchange, ex_repeat)
        gc.collect()
        print("%-34s %12.2f %12.2f" % (name, small, large))
    return 0


if __name__ == "__main__":
    sys.exit(main())
