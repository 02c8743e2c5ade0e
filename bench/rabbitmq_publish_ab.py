"""RabbitMQ publishing against the raw-socket ceiling, each run in a fresh process:
``python -m bench.rabbitmq_publish_ab [--rounds 9] [--messages 200000] [--size 100]``.

The runner (``python -m bench``) runs every client in one process, round after round, so a
run's numbers also carry what the runs before it left behind, and one round's rate moves
with whatever else the two cores do meanwhile. Here each round runs streamwire's
``send_many`` with the native core, the same with ``STREAMWIRE_PURE=1``, ``send_batch`` (a
future per message, "streamwire futures") both ways, and the raw ceiling
(``bench/raw_rabbitmq.py``), each in a process of its own, in an order that rotates per
round. Reported per client: the median rate and client CPU per message (connect and close
included, as the runner counts them), and the median over rounds of the rate ratio to the
raw ceiling *of the same round* (with the lowest and highest), which a slow drift of the
machine's load moves much less than a ratio of medians; for ``send_batch`` also its ratio to
``send_many`` with the same core in the same round (the issue's goal: at least 0.9x).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench import rabbitmq
from bench._common import (
    Measurement,
    Stopwatch,
    ab_parser,
    fmt_ratio,
    markdown_table,
    median,
    paired_ratios,
    rotated,
    run_child,
)

ROOT = Path(__file__).resolve().parent.parent
CLIENTS: Mapping[str, tuple[str, Mapping[str, str]]] = {
    "streamwire": ("streamwire", {"STREAMWIRE_PURE": ""}),
    "streamwire pure": ("streamwire", {"STREAMWIRE_PURE": "1"}),
    "streamwire futures": ("streamwire futures", {"STREAMWIRE_PURE": ""}),
    "streamwire futures pure": ("streamwire futures", {"STREAMWIRE_PURE": "1"}),
    "raw ceiling": ("raw ceiling", {}),
}
"""Each client of the A/B: the publisher of ``bench.rabbitmq`` it runs and its environment."""
RAW = "raw ceiling"
SEND_MANY = {
    "streamwire futures": "streamwire",
    "streamwire futures pure": "streamwire pure",
}
"""The ``send_batch`` clients and the ``send_many`` client of the same core they are paired
with."""


async def _one(url: str, publisher: str, count: int, size: int) -> Measurement:
    """One publish run to a fresh stream, in this process."""
    import streamwire.rabbitmq as rmq

    stream = f"bench-ab-{uuid.uuid4().hex[:10]}"
    async with await rmq.connect(url) as client:
        await client.create_stream(stream)
    try:
        with Stopwatch() as watch:
            rate = await rabbitmq.PUBLISHERS[publisher](url, stream, count, size)
        cpu = watch.result(count).cpu_seconds
        return Measurement(count, count / rate, cpu)
    finally:
        async with await rmq.connect(url) as client:
            await client.delete_stream(stream, missing_ok=True)


def _spawn(name: str, url: str, count: int, size: int) -> Measurement:
    """Run client ``name`` in a fresh process; its measurement."""
    publisher, env = CLIENTS[name]
    args = ["--one", publisher, "--rabbitmq", url, "--messages", str(count), "--size", str(size)]
    return run_child(ROOT, str(ROOT / "src"), "bench.rabbitmq_publish_ab", args, env)


def _spread(ratios: Sequence[float]) -> str:
    return f"{fmt_ratio(min(ratios))} – {fmt_ratio(max(ratios))}" if ratios else "–"


def report(rounds: Sequence[Mapping[str, Measurement]]) -> str:
    """The Markdown table of an A/B: per client, median rate and CPU per message, the
    per-round rate ratio to the raw ceiling (median, lowest, highest), and for a
    ``send_batch`` client the per-round rate ratio to ``send_many`` (median, lowest –
    highest)."""
    rows: list[list[str]] = []
    names = list(dict.fromkeys(name for one in rounds for name in one))
    for name in names:
        runs = [one[name] for one in rounds if name in one]
        ratios = [] if name == RAW else paired_ratios(rounds, name, RAW)
        paired = paired_ratios(rounds, name, SEND_MANY[name]) if name in SEND_MANY else []
        rows.append(
            [
                name,
                f"{median(m.rate for m in runs) or 0:,.0f}",
                f"{median(m.cpu_us for m in runs) or 0:.3f}",
                fmt_ratio(median(ratios)),
                _spread(ratios),
                f"{fmt_ratio(median(paired))} ({_spread(paired)})" if paired else "–",
            ]
        )
    header = [
        "client",
        "msg/s",
        "client CPU µs/msg",
        "rate ÷ raw, per round",
        "lowest – highest",
        "rate ÷ send_many, per round",
    ]
    return markdown_table(header, rows, right=(1, 2, 3))


def main() -> int:
    parser = ab_parser(__doc__, rounds=9, messages=200_000, clients=CLIENTS)
    args = parser.parse_args()
    if args.one:
        m = asyncio.run(_one(args.rabbitmq, args.one, args.messages, args.size))
        print(
            json.dumps({"messages": m.messages, "seconds": m.seconds, "cpu_seconds": m.cpu_seconds})
        )
        return 0
    names = [n.strip() for n in args.clients.split(",") if n.strip()]
    unknown = [n for n in names if n not in CLIENTS]
    if unknown:
        parser.error(f"unknown clients {unknown} (choose from {', '.join(CLIENTS)})")
    rounds: list[dict[str, Measurement]] = []
    for rnd in range(args.rounds):
        one: dict[str, Measurement] = {}
        for name in rotated(names, rnd):
            one[name] = _spawn(name, args.rabbitmq, args.messages, args.size)
            m = one[name]
            print(
                f"  round {rnd + 1} {name:<16} {m.rate:>10,.0f}/s  {m.cpu_us:.3f} µs/msg",
                file=sys.stderr,
            )
        rounds.append(one)
    print(f"{args.messages} × {args.size} B, {args.rounds} rounds, a fresh process per run\n")
    print(report(rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
