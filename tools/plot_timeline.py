#!/usr/bin/python3
"""Draws a Chrome trace (JSON: an array of events, or {"traceEvents": [...]}) as a PNG timeline:
one row per thread (pid, tid; named by "thread_name"/"process_name" metadata events, rows in the
order those appear, then by pid and tid), one bar per complete event ("ph": "X", with ts and dur
in microseconds), coloured by its category ("cat", else the first word of its name), with the
rest of its name written inside when it fits. Other events are ignored. Nothing here knows about
pipelines: `ferry bench-pipeline --timeline out.png` runs it on its trace, and any command that
writes such a trace (copy-stream groups, compute layers, waits) can use it unchanged.

Usage: plot_timeline.py TRACE.json OUT.png [--title TEXT]
       plot_timeline.py --check        (exit 0 when matplotlib can be imported)
"""

import sys

import plot_common as pc

# Stable colours for the categories ferry's traces use; others take the palette in turn.
KNOWN = {"forward": "#4C72B0", "backward": "#DD8452", "recompute": "#8172B3",
         "copy": "#55A868", "wait": "#B0B0B0", "compute": "#4C72B0"}


def events_of(data):
    if isinstance(data, dict):
        data = data.get("traceEvents", [])
    if not isinstance(data, list):
        pc.fail("plot_timeline.py", "expected a Chrome trace (a JSON array of events or an object "
                "with traceEvents), but got %s" % type(data).__name__)
    return [e for e in data if isinstance(e, dict)]


def category(e):
    cat = e.get("cat")
    if cat:
        return str(cat)
    return str(e.get("name", "")).split(" ")[0] or "event"


def main():
    args, plt, data = pc.parse_args(__doc__)
    events = events_of(data)
    thread_names, process_names, rows = {}, {}, []
    for e in events:
        if e.get("ph") != "M":
            continue
        key = (e.get("pid", 0), e.get("tid", 0))
        name = e.get("args", {}).get("name")
        if e.get("name") == "thread_name" and name is not None:
            thread_names[key] = str(name)
            if key not in rows:
                rows.append(key)
        elif e.get("name") == "process_name" and name is not None:
            process_names[key[0]] = str(name)
    spans = [e for e in events if e.get("ph") == "X" and "ts" in e]
    if not spans:
        pc.fail("plot_timeline.py", "%s has no complete (\"ph\": \"X\") event to draw"
                % args.results)
    for key in sorted({(e.get("pid", 0), e.get("tid", 0)) for e in spans}):
        if key not in rows:
            rows.append(key)
    rows = [k for k in rows if any((e.get("pid", 0), e.get("tid", 0)) == k for e in spans)]
    pids = {k[0] for k in rows}

    def row_label(key):
        name = thread_names.get(key, "tid %s" % key[1])
        if len(pids) > 1:
            name = "%s / %s" % (process_names.get(key[0], "pid %s" % key[0]), name)
        return name

    t0 = min(float(e["ts"]) for e in spans)
    t1 = max(float(e["ts"]) + float(e.get("dur", 0)) for e in spans)
    total_ms = max((t1 - t0) / 1000, 1e-9)
    colors, palette = {}, [c for c in pc.COLORS if c not in KNOWN.values()] + pc.COLORS
    for e in spans:
        cat = category(e)
        if cat not in colors:
            colors[cat] = KNOWN.get(cat, palette[len(colors) % len(palette)])

    fig, ax = plt.subplots(figsize=(13, 1.4 + 0.45 * len(rows)))
    index = {k: i for i, k in enumerate(rows)}
    for e in spans:
        y = index[(e.get("pid", 0), e.get("tid", 0))]
        start = (float(e["ts"]) - t0) / 1000
        width = float(e.get("dur", 0)) / 1000
        cat = category(e)
        ax.barh(y, width, left=start, height=0.7, color=colors[cat], edgecolor="white",
                linewidth=0.4)
        label = str(e.get("name", ""))
        if label.startswith(cat + " "):
            label = label[len(cat) + 1:]
        if label and width / total_ms * 13 * 72 > 6 * len(label):  # fits at ~6 points a character
            ax.text(start + width / 2, y, label, ha="center", va="center", fontsize=6,
                    color="white")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([row_label(k) for k in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, total_ms)
    ax.set_xlabel("ms from the first event", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    ax.legend(handles, list(colors), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("%s\n%d events on %d rows, %.2f ms" % (
        args.title or "timeline", len(spans), len(rows), total_ms), fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
