#!/usr/bin/python3
"""Draws `ferry bench-pipeline --json` results as a PNG bar chart, one group per configuration
(stages x chunks): the utilization measured (speed-up over one device / stages) beside the
ideal schedule's m / (m + n - 1), and their ratio against the 0.9 target; the copy-overlap and
real-compute figures go in a footnote. `ferry bench-pipeline --plot out.png` runs it.

Usage: plot_pipeline.py RESULTS.json OUT.png [--title TEXT]
       plot_pipeline.py --check        (exit 0 when matplotlib can be imported)
"""

import sys

import plot_common as pc


def main():
    args, plt, data = pc.parse_args(__doc__)
    rows = data.get("cases", [])
    if not rows:
        pc.fail("plot_pipeline.py", "%s has no throughput case to plot" % args.results)
    cases = [r["case"] for r in rows]
    util, ratio = {}, {}
    for r in rows:
        util[(r["case"], "utilization")] = r["utilization"]
        util[(r["case"], "ideal")] = r["ideal"]
        ratio[(r["case"], "ratio")] = r["ratio"]
    target = rows[0].get("target_ratio", 0.9)
    labels = {"utilization": "measured", "ideal": "ideal m/(m+n-1)", "ratio": "measured / ideal"}
    notes = []
    c = data.get("copy_overlap")
    if c:
        notes.append("copy overlap (%d stages, %d chunks, link %s B/s): %.1f of %.1f ms of copies "
                     "hidden" % (c["stages"], c["chunks"], c["link"], c["copy_ms_hidden"],
                                 c["copy_ms_total"]))
    r = data.get("real_compute")
    if r:
        notes.append("real compute on 2 devices: speed-up %.2f (ideal %.2f)" % (r["speedup"],
                                                                               r["ideal"]))
    details = "sim compute %s FLOP/s, link %s B/s%s" % (
        data.get("compute", "?"), data.get("bandwidth", "?"),
        "; --quick: figures are not meaningful" if data.get("quick") else "")
    fig, axes = plt.subplots(1, 2, figsize=(13, 1.6 + 0.5 * len(cases)))
    pc.grouped_hbars(axes[0], cases, ["utilization", "ideal"], util,
                     "utilization (speed-up over one device / stages)",
                     "1.0 = every stage busy all the time", labels.get, ref=None, fmt="%.3f")
    pc.grouped_hbars(axes[1], cases, ["ratio"], ratio, "measured / ideal (target >= %.2f)" % target,
                     "dashed: the target", labels.get, ref=target, fmt="%.3f")
    bottom = pc.add_footnote(fig, "; ".join(notes))
    fig.suptitle("%s\n%s" % (args.title or "ferry bench-pipeline", details), fontsize=11)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(args.out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
