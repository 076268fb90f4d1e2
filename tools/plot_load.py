#!/usr/bin/python3
"""Draws `ferry bench-load --json` results as a PNG bar chart: per load, x baseline (the
baseline's time / the load's, above 1 means faster than it; the baseline is named beside the
case) with the case's target marked, and the cold-cache loads in a footnote.
`ferry bench-load --plot out.png` runs it.

Usage: plot_load.py RESULTS.json OUT.png [--title TEXT]
       plot_load.py --check        (exit 0 when matplotlib can be imported)
"""

import re
import sys

import plot_common as pc


def main():
    args, plt, data = pc.parse_args(__doc__)
    rows = data.get("cases", [])
    if not rows:
        pc.fail("plot_load.py", "%s has no load to plot" % args.results)
    labels = ["%s\nvs %s" % (r["case"], r["baseline"]) for r in rows]
    ratio = {(label, "ratio"): r["ratio"] for label, r in zip(labels, rows)}
    fig, ax = plt.subplots(figsize=(10, 1.4 + 0.55 * len(rows)))
    pc.grouped_hbars(ax, labels, ["ratio"], ratio, "x baseline (baseline ms / ms)",
                     "above 1.0: faster than the baseline; red ticks: the targets",
                     lambda g: "x baseline")
    values = [r["ratio"] for r in rows if r["ratio"] > 0]
    if values and max(values) > 20 * min(values):  # a zero-copy map beside real reads
        ax.set_xscale("log")
        ax.set_xlim(min(values + [1.0]) / 2, max(values) * 3)
        ax.set_xlabel("above 1.0: faster than the baseline (log scale); red ticks: the targets",
                      fontsize=8)
    for i, r in enumerate(rows):
        m = re.fullmatch(r">=? ?([0-9.]+)", r.get("target", ""))
        if m:
            ax.plot([float(m.group(1))] * 2, [i - 0.45, i + 0.45], color="#C44E52", linewidth=2)
    cold = data.get("cold", {})
    notes = []
    if cold.get("buffered_ms", -1) > 0:
        gb = data.get("bytes", 0) / 1e9
        notes.append("cold cache, pinned: buffered %.1f ms (%.2f GB/s)" % (
            cold["buffered_ms"], gb / (cold["buffered_ms"] / 1e3)))
        if cold.get("direct_ms", -1) > 0:
            notes.append("O_DIRECT %.1f ms (%.2f GB/s)" % (
                cold["direct_ms"], gb / (cold["direct_ms"] / 1e3)))
    bottom = pc.add_footnote(fig, ", ".join(notes))
    details = "%.0f MiB file%s" % (data.get("bytes", 0) / (1 << 20),
                                   "; --quick: figures are not meaningful"
                                   if data.get("quick") else "")
    fig.suptitle("%s\n%s" % (args.title or "ferry bench-load", details), fontsize=11)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(args.out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
