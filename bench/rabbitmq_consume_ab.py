"""RabbitMQ consuming, ``async for`` against ``next_batch``, each run in a fresh process:
``python -m bench.rabbitmq_consume_ab [--rounds 7] [--messages 400000] [--size 100]``.

Publishes ``--messages`` bodies of ``--size`` bytes to a fresh stream once, then consumes
all of them from the first offset, round after round, in a fresh process per run: with
``next_batch(1000)`` (counting each batch's length, as ``bench.rabbitmq`` does) and with
``async for message in consumer`` (counting each message), each with the native core and
with ``STREAMWIRE_PURE=1``, in an order that rotates per round. Timed in the child from
subscribing to the last message (connecting and closing left out: they are the same for
both and would only dilute the difference). Reported per client: the median rate and client
CPU per message (with the lowest and highest), and the median over rounds of the rate ratio
to ``next_batch`` of the same round and core. With ``--base-src DIR`` (the ``src`` of
another tree, its native core built) every client also runs against that tree, as
"(base)", in the same rounds: before and after a change under the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

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
TIMEOUT = 120.0
CLIENTS: Mapping[str, tuple[str, Mapping[str, str]]] = {
    "next_batch": ("batch", {"STREAMWIRE_PURE": ""}),
    "async for": ("iter", {"STREAMWIRE_PURE": ""}),
    "next_batch pure": ("batch", {"STREAMWIRE_PURE": "1"}),
    "async for pure": ("iter", {"STREAMWIRE_PURE": "1"}),
}
"""Each client of the A/B: how it consumes and its environment."""
BASE = " (base)"
"""The client each one's rate is compared with, round by round."""


async def _consume(url: str, stream: str, mode: str, count: int) -> Measurement:
    """Consume ``count`` messages of ``stream`` from the first offset, timed from subscribing
    to the last message."""
    import streamwire.rabbitmq as rmq

    async with await rmq.connect(url) as client:
        seen = 0
        with Stopwatch() as watch:
            consumer = await client.consumer(stream, offset="first").start()
            async with asyncio.timeout(TIMEOUT):
                if mode == "batch":
                    while seen < count:
                        batch = await consumer.next_batch(1000, timeout=10)
                        if not batch:
                            raise RuntimeError(f"stalled after {seen} messages")
                        seen += len(batch)
                else:
                    async for _message in consumer:
                        seen += 1
                        if seen >= count:
                            break
            watch.stop()
        await consumer.close()
        return watch.result(seen)


async def _publish(url: str, stream: str, count: int, size: int) -> None:
    import streamwire.rabbitmq as rmq

    async with await rmq.connect(url) as client:
        await client.create_stream(stream)
        async with client.producer(stream) as producer:
            body = b"x" * size
            futures = [
                await producer.send_many([body] * min(10_000, count - start))
                for start in range(0, count, 10_000)
            ]
            await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)


async def _delete(url: str, stream: str) -> None:
    import streamwire.rabbitmq as rmq

    async with await rmq.connect(url) as client:
        await client.delete_stream(stream, missing_ok=True)


def _baseline(name: str) -> str | None:
    """The client ``name``'s rate is compared with in each round (``next_batch`` of the same
    core and tree), or None."""
    if not name.startswith("async for"):
        return None
    return name.replace("async for", "next_batch")


def _spawn(name: str, url: str, stream: str, count: int, base_src: str | None) -> Measurement:
    """Run client ``name`` in a fresh process; its measurement."""
    src = str(ROOT / "src")
    if name.endswith(BASE):
        name, src = name.removesuffix(BASE), base_src or src
    mode, env = CLIENTS[name]
    args = ["--one", mode, "--stream", stream, "--rabbitmq", url, "--messages", str(count)]
    return run_child(ROOT, src, "bench.rabbitmq_consume_ab", args, env)


def _spread(values: Sequence[float], fmt: str) -> str:
    return f"{format(min(values), fmt)} – {format(max(values), fmt)}" if values else "–"


def report(rounds: Sequence[Mapping[str, Measurement]]) -> str:
    """The Markdown table of an A/B: per client, median rate and CPU per message (lowest –
    highest), and the per-round rate ratio to its baseline (median, lowest – highest)."""
    rows: list[list[str]] = []
    names = list(dict.fromkeys(name for one in rounds for name in one))
    for name in names:
        runs = [one[name] for one in rounds if name in one]
        base = _baseline(name)
        ratios = [] if base is None else paired_ratios(rounds, name, base)
        rates = [m.rate for m in runs]
        cpus = [m.cpu_us for m in runs]
        rows.append(
            [
                name,
                f"{median(rates) or 0:,.0f}",
                _spread([r / 1e6 for r in rates], ".2f"),
                f"{median(cpus) or 0:.3f}",
                _spread(cpus, ".3f"),
                fmt_ratio(median(ratios)) if ratios else "–",
                f"{fmt_ratio(min(ratios))} – {fmt_ratio(max(ratios))}" if ratios else "–",
            ]
        )
    header = [
        "client",
        "msg/s",
        "M msg/s lowest – highest",
        "CPU µs/msg",
        "lowest – highest",
        "rate ÷ next_batch, per round",
        "lowest – highest",
    ]
    return markdown_table(header, rows, right=(1, 3, 5))


def main() -> int:
    parser = ab_parser(__doc__, rounds=7, messages=400_000, clients=CLIENTS)
    parser.add_argument("--base-src", help="another tree's src: every client runs against it too")
    parser.add_argument("--stream", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        m = asyncio.run(_consume(args.rabbitmq, args.stream, args.one, args.messages))
        print(
            json.dumps({"messages": m.messages, "seconds": m.seconds, "cpu_seconds": m.cpu_seconds})
        )
        return 0
    names = [n.strip() for n in args.clients.split(",") if n.strip()]
    unknown = [n for n in names if n not in CLIENTS]
    if unknown:
        parser.error(f"unknown clients {unknown} (choose from {', '.join(CLIENTS)})")
    if args.base_src:
        names += [name + BASE for name in names]
    stream = f"bench-consume-ab-{uuid.uuid4().hex[:10]}"
    asyncio.run(_publish(args.rabbitmq, stream, args.messages, args.size))
    rounds: list[dict[str, Measurement]] = []
    try:
        for rnd in range(args.rounds):
            one: dict[str, Measurement] = {}
            for name in rotated(names, rnd):
                one[name] = m = _spawn(name, args.rabbitmq, stream, args.messages, args.base_src)
                print(
                    f"  round {rnd + 1} {name:<22} {m.rate:>10,.0f}/s  {m.cpu_us:.3f} µs/msg",
                    file=sys.stderr,
                )
            rounds.append(one)
    finally:
        asyncio.run(_delete(args.rabbitmq, stream))
    print(f"{args.messages} × {args.size} B, {args.rounds} rounds, a fresh process per run\n")
    print(report(rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
