"""What the `ferry bench*` figure scripts (tools/plot_*.py) share: the command line every one of
them takes (RESULTS.json OUT.png [--title TEXT], or --check), Debian's matplotlib without a
display, the CPU's name for the heading, and horizontal grouped bars with a reference line.
Not a script itself; each plot_<kind>.py imports it from the folder it sits in.
"""

import argparse
import json
import sys

COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3"]


def load_matplotlib(script):
    """matplotlib.pyplot on the Agg backend; exits with status 3 and says what to install when
    matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        sys.stderr.write(
            "%s: matplotlib is not installed for %s; install Debian's python3-matplotlib "
            "(scripts/install-deps.sh does)\n" % (script, sys.executable))
        sys.exit(3)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def parse_args(doc):
    """(args, plt, data): the parsed command line, pyplot, and the JSON document; exits 0 after
    a successful --check."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("results", nargs="?")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--title", default="")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    plt = load_matplotlib(parser.prog)
    if args.check:
        sys.exit(0)
    if not args.results or not args.out:
        parser.error("expected RESULTS.json and OUT.png")
    with open(args.results) as f:
        data = json.load(f)
    return args, plt, data


def fail(script, message):
    sys.stderr.write("%s: %s\n" % (script, message))
    sys.exit(1)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def grouped_hbars(ax, cases, groups, value, title, note, label, ref=1.0, fmt="%.2f"):
    """One group of horizontal bars per case, one bar per entry of `groups` (value[(case, group)]
    when present, labelled label(group)); a dashed line at `ref` (None: none)."""
    height = 0.8 / max(len(groups), 1)
    for k, group in enumerate(groups):
        ys, xs = [], []
        for i, case in enumerate(cases):
            v = value.get((case, group))
            if v is not None:
                ys.append(i + (k - (len(groups) - 1) / 2) * height)
                xs.append(v)
        bars = ax.barh(ys, xs, height=height * 0.95, color=COLORS[k % len(COLORS)],
                       label=label(group))
        for bar, x in zip(bars, xs):
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, " " + fmt % x,
                    va="center", fontsize=7)
    if ref is not None:
        ax.axvline(ref, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(cases)))
    ax.set_yticklabels(cases, fontsize=8)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(note, fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    right = max(list(value.values()) + [ref or 0.0, 1e-9])
    ax.set_xlim(0, right * 1.18)


def threads_label(n):
    return "%d thread%s" % (n, "" if n == 1 else "s")


def save_panels(plt, panels, groups, label, heading, footnote, out):
    """Side-by-side grouped_hbars panels, each (cases, value, title, note[, ref, fmt]), under a
    two-line heading, with an optional grey footnote; saved to `out`."""
    n_rows = max(len(p[0]) for p in panels)
    fig, axes = plt.subplots(1, len(panels), squeeze=False,
                             figsize=(6.5 * len(panels),
                                      1.4 + 0.32 * n_rows * max(len(groups), 1)))
    for ax, p in zip(axes[0], panels):
        cases, value, title, note = p[:4]
        ref = p[4] if len(p) > 4 else 1.0
        fmt = p[5] if len(p) > 5 else "%.2f"
        grouped_hbars(ax, cases, groups, value, title, note, label, ref, fmt)
    bottom = add_footnote(fig, footnote)
    fig.suptitle(heading, fontsize=11)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(out, dpi=110)


def add_footnote(fig, text):
    """Grey small text along the figure's bottom, wrapped to its width; returns the share of
    the figure's height it takes (0 without text), for tight_layout's rect."""
    if not text:
        return 0.0
    import textwrap
    width_in, height_in = fig.get_size_inches()
    lines = textwrap.wrap(text, width=max(40, int(width_in * 17)))  # ~17 characters an inch at 7 pt
    fig.text(0.01, 0.005, "\n".join(lines), fontsize=7, color="gray", va="bottom")
    return min(0.5, (0.06 + 0.12 * len(lines)) / height_in)
