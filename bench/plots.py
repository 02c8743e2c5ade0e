"""PNG plots for docs/benchmarks.md (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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


def _colour(name: str) -> str:
    if name == "raw ceiling":
        return "tab:gray"
    return "tab:orange" if name.startswith("streamwire") else "tab:blue"


def plot_broker(
    panels: Sequence[tuple[str, Mapping[str, Mapping[str, Any]]]], title: str, core: str, path: Path
) -> None:
    """One figure per broker: a column per panel (a direction, or a direction and size),
    messages per second on top and client CPU µs per message below, one bar per client
    (streamwire's calls orange, peers blue, the raw ceiling grey). ``panels`` are
    ``(title, rows)`` with rows as ``bench._common.summarize`` gives them; a client whose
    CPU is not measured (it runs in its own process and does not report it) has no lower
    bar and says so. Both axes start at zero, so bar heights compare honestly."""
    plt = _pyplot()
    ncols = len(panels)
    fig, axes = plt.subplots(2, ncols, figsize=(4.2 * ncols + 0.6, 7.4), squeeze=False)
    for col, (panel, rows) in enumerate(panels):
        names = list(rows)
        colours = [_colour(n) for n in names]
        for row, (key, label, fmt) in enumerate(
            (
                ("msg_per_s", "messages / s (median)", "{:,.0f}"),
                ("cpu_us_per_msg", "client CPU µs / message (median)", "{:.2f}"),
            )
        ):
            ax = axes[row][col]
            values = [rows[n].get(key) for n in names]
            heights = [v or 0.0 for v in values]
            ax.bar(range(len(names)), heights, color=colours)
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels(names, rotation=30, ha="right", fontsize=7)
            ax.set_ylim(bottom=0)
            if col == 0:
                ax.set_ylabel(label, fontsize=8)
            ax.set_title(panel if row == 0 else f"{panel}: CPU", fontsize=9)
            ax.grid(True, axis="y", alpha=0.3)
            ax.tick_params(axis="y", labelsize=7)
            for x, value in enumerate(values):
                text = "n/a" if value is None else fmt.format(value)
                ax.annotate(text, (x, heights[x]), ha="center", va="bottom", fontsize=6)
    fig.suptitle(f"{title} ({core} core; lower row: lower is better)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_headline(rows: Sequence[Any], core: str, path: Path) -> None:
    """The headline as one figure: each path's rate ratio against its fastest peer (a bar;
    above 1, streamwire is faster), the lowest and highest round as an error bar, a line at
    1 (and at the raw ceiling's 0.9 goal). ``rows`` are ``bench.headline.Row``s; paths
    without a ratio are left out. Green: a goal met; red: missed; grey: no goal."""
    plt = _pyplot()
    shown = [r for r in rows if r.ratio is not None]
    labels = [f"{r.broker} {r.size} B {r.direction} {r.call}  vs {r.peer}" for r in reversed(shown)]
    values = [r.ratio for r in reversed(shown)]
    low = [r.ratio - (r.spread[0] if r.spread else r.ratio) for r in reversed(shown)]
    high = [(r.spread[1] if r.spread else r.ratio) - r.ratio for r in reversed(shown)]
    colours = [
        {True: "tab:green", False: "tab:red", None: "tab:gray"}[r.met] for r in reversed(shown)
    ]
    fig, ax = plt.subplots(figsize=(8.5, 0.36 * len(shown) + 1.6))
    positions = list(range(len(shown)))
    ax.barh(positions, values, color=colours, alpha=0.8)
    ax.errorbar(values, positions, xerr=[low, high], fmt="none", ecolor="black", capsize=3)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.axvline(0.9, color="black", linewidth=0.6, linestyle=":")
    ax.set_yticks(positions, labels, fontsize=8)
    ax.set_xlim(left=0)
    ax.set_xlabel("streamwire ÷ fastest peer, rate (bar: median round; whiskers: min–max)")
    ax.set_title(
        f"streamwire against the fastest peer per path ({core} core)\n"
        "green: goal met · red: missed · grey: no goal; solid line 1x, dotted 0.9x",
        fontsize=9,
    )
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
