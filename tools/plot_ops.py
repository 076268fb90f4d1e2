#!/usr/bin/python3
"""Draws `ferry bench-ops --json` results as a PNG bar chart, per case and thread count: ferry
against PyTorch (x PyTorch = PyTorch time / ferry time, above 1 means ferry is faster; only when
the run had PyTorch), against the case's own target (x target, 1.0 = just met: the ratio over
its floor, the share of the FMA peak over the share asked for, or the ns limit over the ns
taken), and ferry's GFLOP/s for the FLOP-bound cases. `ferry bench-ops --plot out.png` runs it.

Usage: plot_ops.py RESULTS.json OUT.png [--title TEXT]
       plot_ops.py --check        (exit 0 when matplotlib can be imported)
"""

import re
import sys

import plot_common as pc


def against_target(r):
    """How far the case is from its target (1.0 = just met), or None when the run lacks what
    the target needs (a ratio without PyTorch)."""
    t = r.get("target", "")
    m = re.fullmatch(r">= ([0-9.]+)% peak", t)
    if m and "peak_fraction" in r:
        return r["peak_fraction"] / (float(m.group(1)) / 100)
    m = re.fullmatch(r"ratio >= ([0-9.]+)", t)
    if m and "ratio" in r:
        return r["ratio"] / float(m.group(1))
    m = re.fullmatch(r"<= ([0-9.]+) ns", t)
    if m and r.get("ns_per_call", 0) > 0:
        return float(m.group(1)) / r["ns_per_call"]
    return None


def main():
    args, plt, data = pc.parse_args(__doc__)
    cases, threads = [], []
    torch, target, gflops = {}, {}, {}
    for r in data.get("cases", []):
        key = (r["case"], r["threads"])
        if r["case"] not in cases:
            cases.append(r["case"])
        if r["threads"] not in threads:
            threads.append(r["threads"])
        if "ratio" in r:
            torch[key] = r["ratio"]
        score = against_target(r)
        if score is not None:
            target[key] = score
        if "gflops" in r:
            gflops[key] = r["gflops"]
    threads.sort()

    def having(values):
        return [c for c in cases if any((c, t) in values for t in threads)]

    panels = []
    if torch:
        panels.append((having(torch), torch, "x PyTorch (PyTorch time / ferry time)",
                       "above 1.0: ferry is faster than PyTorch"))
    if target:
        panels.append((having(target), target, "x target (1.0 = target just met)",
                       "ratio / its floor, % peak / % asked, ns allowed / ns taken"))
    if gflops:
        panels.append((having(gflops), gflops, "ferry GFLOP/s", "FLOP-bound cases", None,
                       "%.1f"))
    if not panels:
        pc.fail("plot_ops.py", "%s has no case with a figure to plot" % args.results)
    missing = [c for c in cases if c not in having(target)]
    footnote = ""
    if missing:
        footnote = "no x target (%s): %s" % (
            "its target is a ratio to PyTorch, which this build lacks" if not data.get("torch")
            else "not measured", ", ".join(missing))
    details = ", ".join(x for x in [
        "PyTorch" if data.get("torch") else "no PyTorch (configure with -DFERRY_BENCH_TORCH=ON)",
        pc.cpu_model()] if x)
    pc.save_panels(plt, panels, threads, pc.threads_label,
                   "%s\n%s" % (args.title or "ferry bench-ops", details), footnote, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
