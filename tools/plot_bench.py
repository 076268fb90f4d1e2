#!/usr/bin/python3
"""Draws `ferry bench --json` results as a PNG bar chart: per case and thread count, ferry's
speed as a multiple of memcpy's (x memcpy) and, when the run had PyTorch, of PyTorch's
(x PyTorch, above 1 means ferry is faster). `ferry bench --plot out.png` runs it with Debian's
python3-matplotlib.

Usage: plot_bench.py RESULTS.json OUT.png [--title TEXT]
       plot_bench.py --check        (exit 0 when matplotlib can be imported)
"""

import argparse
import json
import sys


def load_matplotlib():
    try:
        import matplotlib
    except ImportError:
        sys.stderr.write(
            "plot_bench.py: matplotlib is not installed for %s; install Debian's "
            "python3-matplotlib (scripts/install-deps.sh does)\n" % sys.executable)
        sys.exit(3)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def panel(ax, cases, threads, value, title, note):
    """Horizontal grouped bars: one group per case, one bar per thread count."""
    height = 0.8 / max(len(threads), 1)
    colors = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]
    for k, thr in enumerate(threads):
        ys, xs = [], []
        for i, case in enumerate(cases):
            v = value.get((case, thr))
            if v is not None:
                ys.append(i + (k - (len(threads) - 1) / 2) * height)
                xs.append(v)
        bars = ax.barh(ys, xs, height=height * 0.95, color=colors[k % len(colors)],
                       label="%d thread%s" % (thr, "" if thr == 1 else "s"))
        for bar, x in zip(bars, xs):
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, " %.2f" % x,
                    va="center", fontsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(cases)))
    ax.set_yticklabels(cases, fontsize=8)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(note, fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    right = max(list(value.values()) + [1.0])
    ax.set_xlim(0, right * 1.18)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--title", default="")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    plt = load_matplotlib()
    if args.check:
        return 0
    if not args.results or not args.out:
        parser.error("expected RESULTS.json and OUT.png")
    with open(args.results) as f:
        data = json.load(f)
    rows = data.get("cases", [])
    cases, threads = [], []
    memcpy, torch = {}, {}
    for r in rows:
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
        sys.stderr.write("plot_bench.py: %s has no case with a ratio to plot\n" % args.results)
        return 1
    n_rows = max(len(p[0]) for p in panels)
    fig, axes = plt.subplots(1, len(panels), squeeze=False,
                             figsize=(6.5 * len(panels), 1.2 + 0.32 * n_rows * max(len(threads), 1)))
    for ax, (pcases, values, title, note) in zip(axes[0], panels):
        panel(ax, pcases, threads, values, title, note)
    unplotted = [c for c in cases if not any((c, t) in memcpy or (c, t) in torch for t in threads)]
    if unplotted:
        fig.text(0.01, 0.005, "not drawn (no ratio without PyTorch): " + ", ".join(unplotted),
                 fontsize=7, color="gray")
    heading = args.title or "ferry bench"
    details = ", ".join(x for x in ["SIMD " + data.get("simd_target", "?"), cpu_model()] if x)
    fig.suptitle("%s\n%s" % (heading, details), fontsize=11)
    fig.tight_layout(rect=(0, 0.02 if unplotted else 0, 1, 1))
    fig.savefig(args.out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
