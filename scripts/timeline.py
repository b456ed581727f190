#!/usr/bin/python3
"""Merges the per-rank traces that STRATA_TIMELINE writes and draws them as a Gantt chart.

    STRATA_TIMELINE=/tmp/run.json mpirun -np 2 ./build/examples/fashion_mnist ...
    /usr/bin/python3 scripts/timeline.py /tmp/run.json --merge /tmp/run.merged.json --png timeline.png

The merged file is one Chrome trace with every rank as a process (Perfetto or chrome://tracing
open it); the PNG has a row per rank and thread, a bar per span coloured by category, and
instants (bucket launches, parked pulls) as ticks. --from/--to pick a window in milliseconds.
"""
import argparse
import glob
import json
import re
import sys

COLOURS = {"step": "#d9d9d9", "collective": "#4c72b0", "ps": "#55a868", "optimizer": "#c44e52",
           "wait": "#dd8452", "checkpoint": "#8172b3"}


def rank_files(path):
    """The files STRATA_TIMELINE=path made: path's stem followed by .rank<r>.json."""
    stem = path[:-5] if path.endswith(".json") else path
    files = glob.glob(glob.escape(stem) + ".rank*.json")
    rank = lambda f: int(re.search(r"\.rank(\d+)\.json$", f).group(1))
    return sorted((f for f in files if re.search(r"\.rank\d+\.json$", f)), key=rank)


def load(path):
    files = rank_files(path)
    if not files:
        sys.exit(f"timeline.py: no {path} rank files (expected names like <stem>.rank0.json)")
    events = []
    for f in files:
        with open(f) as handle:
            events += json.load(handle)["traceEvents"]
    return events


def draw(events, png, start_ms, end_ms):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    rows = sorted({(e["pid"], e["tid"]) for e in events if e["ph"] in ("X", "i")})
    row_of = {key: i for i, key in enumerate(rows)}
    shown = lambda t: (start_ms is None or t >= start_ms) and (end_ms is None or t <= end_ms)
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(rows) + 1.2))
    for e in events:
        if e["ph"] not in ("X", "i"):
            continue
        y, begin = row_of[(e["pid"], e["tid"])], e["ts"] / 1e3
        colour = COLOURS.get(e["cat"], "#999999")
        if e["ph"] == "X":
            end = begin + e["dur"] / 1e3
            if shown(begin) or shown(end):
                # Steps span everything beneath them: drawn low and thin, behind their contents.
                height, base = (0.2, y - 0.4) if e["cat"] == "step" else (0.6, y - 0.3)
                ax.broken_barh([(begin, end - begin)], (base, height), facecolors=colour, edgecolor="none")
        elif shown(begin):
            ax.plot([begin, begin], [y - 0.35, y + 0.35], color=colour, linewidth=0.6)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"rank {pid} {names.get((pid, tid), tid)}" for pid, tid in rows])
    ax.invert_yaxis()
    if start_ms is not None or end_ms is not None:
        ax.set_xlim(left=start_ms, right=end_ms)
    ax.set_xlabel("ms since the ranks started recording")
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLOURS.items()], loc="upper center",
              bbox_to_anchor=(0.5, -0.25 if len(rows) < 8 else -0.1), ncol=len(COLOURS), frameon=False)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("timeline", help="the STRATA_TIMELINE path the run was given")
    parser.add_argument("--merge", help="write every rank's events into this one Chrome trace")
    parser.add_argument("--png", help="draw a Gantt chart into this PNG")
    parser.add_argument("--from", dest="start", type=float, help="window start, ms")
    parser.add_argument("--to", dest="end", type=float, help="window end, ms")
    args = parser.parse_args()
    if not args.merge and not args.png:
        parser.error("nothing to do: give --merge and/or --png")
    events = load(args.timeline)
    if args.merge:
        with open(args.merge, "w") as out:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, out)
    if args.png:
        draw(events, args.png, args.start, args.end)


if __name__ == "__main__":
    main()
