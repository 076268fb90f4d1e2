#!/usr/bin/python3
"""Draws `ferry bench --json` results as a PNG bar chart: per case and thread count, ferry's
speed as a multiple of memcpy's (x memcpy) and, when the run had PyTorch, of PyTorch's
(x PyTorch, above 1 means ferry is faster). `ferry bench --plot out.png` runs it with Debian's
python3-matplotlib.

Usage: plot_bench.py RESULTS.json OUT.png [--title TEXT]
       plot_bench.py --check        (exit 0 when matplotlib can be imported)
"""

import sys

import plot_common as pc


def main():
    args, plt, data = pc.parse_args(__doc__)
    cases, threads = [], []
    memcpy, torch = {}, {}
    for r in data.get("cases", []):
        if r["case"] not in cases:
            cases.append(r["case"])
        if r["threads"] not in threads:
            threads.append(r["threads"])
        if "ratio_memcpy" in r:
            memcpy[(r["case"], r["threads"])] = r["ratio_memcpy"]
        if "ratio_torch" in r:
            torch[(r["case"], r["threads"])] = r["ratio_torch"]
    threads.sort()
    panels = []
    if memcpy:
        memcpy_cases = [c for c in cases if any((c, t) in memcpy for t in threads)]
        panels.append((memcpy_cases, memcpy, "x memcpy (ferry GB/s / memcpy GB/s)",
                       "1.0 = as fast as memcpy moving the same bytes"))
    if torch:
        panels.append((cases, torch, "x PyTorch (PyTorch time / ferry time)",
                       "above 1.0: ferry is faster than PyTorch's copy_"))
    if not panels:
        pc.fail("plot_bench.py", "%s has no case with a ratio to plot" % args.results)
    unplotted = [c for c in cases if not any((c, t) in memcpy or (c, t) in torch for t in threads)]
    details = ", ".join(x for x in ["SIMD " + data.get("simd_target", "?"), pc.cpu_model()] if x)
    pc.save_panels(plt, panels, threads, pc.threads_label,
                   "%s\n%s" % (args.title or "ferry bench", details),
                   "not drawn (no ratio without PyTorch): " + ", ".join(unplotted)
                   if unplotted else "", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
