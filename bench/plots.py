"""PNG plots for docs/benchmarks.md (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_throughput(results: dict[str, Any], path: Path) -> None:
    """Median msg/s per client against message size, publish and consume side by side."""
    plt = _pyplot()
    sizes = sorted(int(s) for s in results)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, direction in zip(axes, ("publish", "consume"), strict=True):
        clients = sorted({c for s in sizes for c in results[str(s)][direction]})
        for client in clients:
            ys = [results[str(s)][direction].get(client) for s in sizes]
            ax.plot(sizes, ys, marker="o", label=client)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("messages / s (median)")
        ax.set_title(f"RabbitMQ Streams: {direction}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_latency(samples: dict[str, list[float]], rate: int, path: Path) -> None:
    """Cumulative distribution of the latency samples."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, values in samples.items():
        ordered = sorted(values)
        n = len(ordered)
        if n:
            ax.plot(ordered, [(i + 1) / n for i in range(n)], label=name.replace("_ms", ""))
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("fraction of messages")
    ax.set_title(f"streamwire on RabbitMQ Streams, {rate} msg/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_comparison(
    result: dict[str, Any], directions: tuple[str, str], title: str, path: Path
) -> None:
    """Median msg/s per client as bars, one panel per direction (Liftbridge, Iggy)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(directions), figsize=(11, 4))
    for ax, direction in zip(axes, directions, strict=True):
        rows = result.get(direction, {})
        names = list(rows)
        values = [rows[name]["msg_per_s"] for name in names]
        bars = ax.bar(range(len(names)), values, color="tab:blue")
        if "streamwire" in names:
            bars[names.index("streamwire")].set_color("tab:orange")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=15, ha="right", fontsize=8)
        ax.set_ylim(bottom=0)  # linear from zero: bar heights compare honestly
        ax.set_ylabel("messages / s (median)")
        ax.set_title(f"{title}: {direction}")
        ax.grid(True, axis="y", alpha=0.3)
        for x, value in enumerate(values):
            ax.annotate(f"{value:,.0f}", (x, value), ha="center", va="bottom", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
