#!/usr/bin/python3
"""Charts of strata's benchmark results, drawn from the benchmarks' saved text outputs.

    /usr/bin/python3 scripts/plots.py [DATA_DIR] [--out DIR]

DATA_DIR (default docs/plots/data) holds what scripts/plots.sh saved:
  allreduce_bw_np2.txt (and optionally allreduce_bw_np4.txt)  -> allreduce_busbw.png
  compression_np2.txt                                          -> compression_sync.png
  fashion_mnist_*.txt, one run per strategy                    -> accuracy_per_strategy.png
The PNGs go to --out (default docs/plots). Needs Debian's python3-matplotlib.
"""
import argparse
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed or wanted
import matplotlib.pyplot as plt  # noqa: E402 (must follow the backend choice)
from matplotlib.ticker import FixedLocator, FuncFormatter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


class Unparsable(Exception):
    pass


def read(path):
    if not path.is_file():
        raise Unparsable(f"{path}: missing (scripts/plots.sh produces it)")
    return path.read_text(errors="replace")


def size_label(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def parse_allreduce(path):
    """allreduce_bw's table: ranks, message sizes and bus bandwidth (GB/s) per algorithm."""
    text = read(path)
    header = re.search(r"^\s*bytes\s+ring\s+tree\s+hier\s+native\s+MPI\b.*?(\d+) ranks\)", text, re.M)
    if not header:
        raise Unparsable(f"{path}: no allreduce_bw table header ('bytes ring tree hier native MPI ...')")
    algorithms = ["ring", "tree", "hier", "native", "MPI"]
    sizes, busbw = [], {a: [] for a in algorithms}
    # A row: bytes, five bandwidths, three ratios (the ratios are not plotted).
    for m in re.finditer(r"^[ \t]*(\d+)((?:[ \t]+[-+\w.]+){8})[ \t]*$", text[header.end():], re.M):
        try:
            values = [float(v) for v in m.group(2).split()[:5]]
        except ValueError:
            raise Unparsable(f"{path}: unreadable row '{m.group(0).strip()}'") from None
        sizes.append(int(m.group(1)))
        for a, v in zip(algorithms, values):
            busbw[a].append(v)
    if not sizes:
        raise Unparsable(f"{path}: allreduce_bw table has no rows")
    return int(header.group(1)), sizes, busbw


def parse_compression(path):
    """compression's tables: {model: (ranks, {codec: (ms, MiB sent per rank, time/fp32, bytes/fp32)})}."""
    text = read(path)
    models = {}
    for section in re.split(r"^(?=\w+: \d+ tensors)", text, flags=re.M):
        head = re.match(r"(\w+): \d+ tensors, \d+ parameters; (\d+) ranks", section)
        if not head:
            continue
        rows = re.findall(r"^[ \t]+(\S+)[ \t]+([\d.]+)[ \t]+([\d.]+)[ \t]+([\d.]+)[ \t]+([\d.]+)[ \t]*$", section, re.M)
        if not rows:
            raise Unparsable(f"{path}: no codec rows under '{head.group(0)}'")
        models[head.group(1)] = (int(head.group(2)), {r[0]: tuple(map(float, r[1:])) for r in rows})
    if not models:
        raise Unparsable(f"{path}: no compression table ('<model>: N tensors, ...; R ranks; ...')")
    return models


def parse_fashion(path):
    """One fashion_mnist run: ranks, strategy and test accuracy (%) per epoch."""
    text = read(path)
    head = re.search(r"fashion_mnist: (\d+) ranks, strategy (\S+),", text)
    epochs = re.findall(r"epoch\s+(\d+)\s+loss\s+\S+\s+test accuracy\s+([\d.]+)%", text)
    if not head or not epochs:
        raise Unparsable(f"{path}: no fashion_mnist header or no 'epoch N loss ... test accuracy X%' lines")
    # Every strategy of the example replicates the model; "Replicate," only lengthens the legend.
    strategy = head.group(2).removeprefix("Replicate,")
    return int(head.group(1)), strategy, [int(e) for e, _ in epochs], [float(a) for _, a in epochs]


def plot_allreduce(data, out):
    runs = [parse_allreduce(data / "allreduce_bw_np2.txt")]
    if (data / "allreduce_bw_np4.txt").exists():
        runs.append(parse_allreduce(data / "allreduce_bw_np4.txt"))
    fig, axes = plt.subplots(1, len(runs), figsize=(6.5 * len(runs), 4.5), sharey=True, squeeze=False)
    styles = {"ring": "o-", "tree": "s-", "hier": "^-", "native": "D-", "MPI": "k--"}
    for ax, (ranks, sizes, busbw) in zip(axes[0], runs):
        for algorithm, values in busbw.items():
            ax.plot(sizes, values, styles[algorithm], ms=4, label="MPI_Allreduce" if algorithm == "MPI" else algorithm)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(sizes[::2]))  # every other size keeps the labels apart
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: size_label(x)))
        ax.tick_params(axis="x", labelrotation=45)
        ax.set_title(f"All-reduce of float32, {ranks} ranks")
        ax.set_xlabel("message size (bytes, log2 scale)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("bus bandwidth (GB/s, median)")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(out / "allreduce_busbw.png", dpi=120)
    plt.close(fig)


def plot_compression(data, out):
    models = parse_compression(data / "compression_np2.txt")
    names = {"resnet50": "ResNet-50", "vgg16": "VGG-16"}
    codecs = list(next(iter(models.values()))[1])
    fig, (time_ax, bytes_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(models)
    for i, (model, (ranks, rows)) in enumerate(models.items()):
        xs = [c + (i - (len(models) - 1) / 2) * width for c in range(len(codecs))]
        label = f"{names.get(model, model)}, {ranks} ranks"
        bars = time_ax.bar(xs, [rows[c][0] for c in codecs], width, label=label)
        time_ax.bar_label(bars, fmt="%.0f", fontsize=8)
        bars = bytes_ax.bar(xs, [rows[c][3] for c in codecs], width, label=label)
        bytes_ax.bar_label(bars, fmt="%.3g", fontsize=8)
    # Log scales: the sparse codecs are ~10x slower and ~100x smaller than fp32.
    for ax in (time_ax, bytes_ax):
        ax.set_yscale("log")
        ax.set_xticks(range(len(codecs)), codecs, rotation=20, ha="right")
        ax.grid(axis="y", alpha=0.3)
        ax.legend()
    time_ax.set_title("Gradient sync time per step, ring all-reduce, 25 MiB buckets")
    time_ax.set_ylabel("sync time (ms, median, log scale)")
    bytes_ax.set_title("Bytes sent per rank, relative to fp32")
    bytes_ax.set_ylabel("bytes / fp32 bytes (log scale)")
    fig.tight_layout()
    fig.savefig(out / "compression_sync.png", dpi=120)
    plt.close(fig)


def plot_accuracy(data, out):
    files = sorted(data.glob("fashion_mnist_*.txt"))
    if not files:
        raise Unparsable(f"{data}/fashion_mnist_*.txt: missing (scripts/plots.sh produces them)")
    runs = [parse_fashion(f) for f in files]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for _, strategy, epochs, accuracy in runs:
        ax.plot(epochs, accuracy, "o-", ms=4, label=f"{strategy} (final {accuracy[-1]:.2f}%)")
    ranks = sorted({r[0] for r in runs})
    ax.set_title(f"Fashion-MNIST MLP, {'/'.join(map(str, ranks))} ranks, global batch 128")
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy (%)")
    ax.xaxis.set_major_locator(FixedLocator(sorted({e for r in runs for e in r[2]})))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "accuracy_per_strategy.png", dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=ROOT / "docs/plots/data", help="saved outputs")
    parser.add_argument("--out", type=Path, default=ROOT / "docs/plots", help="where the PNGs go")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        for plot in (plot_allreduce, plot_compression, plot_accuracy):
            plot(args.data, args.out)
    except Unparsable as e:
        sys.exit(f"plots.py: {e}")
    print(f"plots.py: wrote allreduce_busbw.png, compression_sync.png, accuracy_per_strategy.png to {args.out}")


if __name__ == "__main__":
    main()
