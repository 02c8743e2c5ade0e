"""Run the benchmarks: ``python -m bench [--rounds 3] [--messages 200000] [--sizes 100,1000]``.

Each round runs every client against the same broker, alternating: each publishes to a fresh
stream; all consume one shared stream written once per round (the same chunk layout for
all). Medians over the rounds are reported with ratios to the peers, as a table, as JSON
(``bench/results/latest.json``) and as PNG plots (``docs/img``). Numbers are for this
machine; compare ratios, not rates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import streamwire.rabbitmq as rmq
from bench import rabbitmq
from bench.latency import percentiles, rabbitmq_latency
from bench.plots import plot_latency, plot_throughput

RESULTS = Path(__file__).resolve().parent / "results"


async def _fresh_stream(url: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:10]}"
    async with await rmq.connect(url) as client:
        await client.create_stream(name)
    return name


async def _drop(url: str, name: str) -> None:
    async with await rmq.connect(url) as client:
        await client.delete_stream(name, missing_ok=True)


async def run_rabbitmq(url: str, rounds: int, count: int, sizes: list[int]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for size in sizes:
        pub: dict[str, list[float]] = {name: [] for name in rabbitmq.PUBLISHERS}
        con: dict[str, list[float]] = {name: [] for name in rabbitmq.CONSUMERS}
        for rnd in range(rounds):
            # consumers all read the same stream, written once per round, so that every
            # client sees the same chunk layout
            shared = await _fresh_stream(url)
            await rabbitmq.streamwire_futures_publish(url, shared, count, size)
            try:
                for name in rabbitmq.PUBLISHERS:
                    stream = await _fresh_stream(url)
                    try:
                        pub[name].append(await rabbitmq.PUBLISHERS[name](url, stream, count, size))
                        con[name].append(await rabbitmq.CONSUMERS[name](url, shared, count))
                    except Exception as exc:  # a peer that fails is reported, not fatal
                        print(f"  {name} failed: {exc!r}", file=sys.stderr)
                    finally:
                        await _drop(url, stream)
                    print(
                        f"  size {size} round {rnd + 1} {name:<12} "
                        f"publish {pub[name][-1] if pub[name] else 0:>10,.0f}/s  "
                        f"consume {con[name][-1] if con[name] else 0:>10,.0f}/s",
                        file=sys.stderr,
                    )
            finally:
                await _drop(url, shared)
        results[str(size)] = {
            "publish": {k: statistics.median(v) for k, v in pub.items() if v},
            "consume": {k: statistics.median(v) for k, v in con.items() if v},
        }
    return results


def ratios(res: dict[str, float], against: list[str]) -> dict[str, float]:
    mine = res.get("streamwire", 0.0)
    return {peer: mine / res[peer] for peer in against if res.get(peer)}


def table(results: dict[str, Any]) -> str:
    names = list(rabbitmq.PUBLISHERS)
    lines = [
        "| size | direction | " + " | ".join(names) + " | vs rbfly | vs rstream | vs raw |",
        "|---:|---|" + "---:|" * (len(names) + 3),
    ]
    for size, by_dir in results.items():
        for direction in ("publish", "consume"):
            r = by_dir[direction]
            q = ratios(r, ["rbfly", "rstream", "raw ceiling"])
            cells = [f"{r[k]:,.0f}" if k in r else "–" for k in rabbitmq.PUBLISHERS]
            rats = [f"{q[k]:.2f}x" if k in q else "–" for k in ("rbfly", "rstream", "raw ceiling")]
            lines.append(f"| {size} B | {direction} | " + " | ".join(cells + rats) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument(
        "--rabbitmq",
        default=os.environ.get(
            "STREAMWIRE_RABBITMQ_URL", "rabbitmq-stream://guest:guest@127.0.0.1:5552/"
        ),
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--rate", type=int, default=5000, help="messages/s for latency")
    parser.add_argument(
        "--plots",
        type=lambda value: Path(value) if value else None,
        default=Path(__file__).resolve().parent.parent / "docs" / "img",
        help="where to write PNG plots ('' to skip)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    started = time.time()
    results = asyncio.run(run_rabbitmq(args.rabbitmq, args.rounds, args.messages, sizes))
    latency = asyncio.run(rabbitmq_latency(args.rabbitmq, rate=args.rate, seconds=5.0))
    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "messages": args.messages,
        "rounds": args.rounds,
        "rabbitmq": results,
        "rabbitmq_latency": {
            "rate_per_s": args.rate,
            **{name: percentiles(samples) for name, samples in latency.items()},
        },
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(report, indent=2))
    print(table(results))
    lat = report["rabbitmq_latency"]
    print(
        f"\nlatency at {args.rate} msg/s (ms): publish→confirm {lat['confirm_ms']}, "
        f"publish→consume {lat['end_to_end_ms']}"
    )
    if args.plots:
        plot_throughput(results, args.plots / "rabbitmq-throughput.png")
        plot_latency(latency, args.rate, args.plots / "rabbitmq-latency-cdf.png")
        print(f"plots written to {args.plots}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
