"""A bounded soak over every available broker: publish and consume at the same time, at a
set rate, for a set time, reporting throughput per broker and the process's resident memory
every interval, then a verdict whether RSS stayed flat.

    python -m bench.soak [--seconds 300] [--interval 10] [--rate 5000] [--size 100]
                         [--brokers rabbitmq,liftbridge,iggy] [--max-growth-mb 5]

* **RabbitMQ Streams**: ``send_many`` chunks, a consumer from the first offset on a stream
  capped at 200 MB (``max_length_bytes``).
* **Liftbridge**: ``send_batch`` chunks with LEADER acks (``flush`` waits for them), a
  consumer from the first offset on a stream with 64 MiB retention.
* **Iggy**: ``send_batch`` chunks and a polling consumer on the server from ``--iggy``, or
  else on the conformance double in a subprocess (its memory is not ours). The topic is
  replaced every ``--iggy-rotate`` seconds (the consumer drains it, then it is deleted), so
  the double's in-memory log stays bounded.

All loads share one event loop in this process, so the RSS is theirs together; run one
``--brokers`` at a time to tell them apart. A broker that cannot be reached is skipped with
the reason. Each load paces its publishing at ``--rate`` messages/s (0: as fast as
confirmations come back, chunks of 1 000); every chunk waits for its confirmations. After
``--seconds`` the consumers drain what is left (giving up after 30 s without progress).

RSS is *flat* when its peak over the second half of the run exceeds the RSS at the start
of the second half by at most ``--max-growth-mb`` (the first half is warm-up: allocator
pools, socket and gRPC buffers, caches). Results go to ``bench/results/soak.json``
(``--output``). The exit status is 1 when RSS was not flat or no broker ran.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import streamwire.iggy as iggy
import streamwire.liftbridge as lb
import streamwire.rabbitmq as rmq
from bench import iggy as iggy_bench
from bench import liftbridge as liftbridge_bench
from bench._common import first_line, rss_mb, rss_verdict

__all__ = ("BROKERS", "Counters", "mixed_load", "soak")

RESULTS = Path(__file__).resolve().parent / "results"
BROKERS = ("rabbitmq", "liftbridge", "iggy")
CHUNK = 1_000
TICK = 0.01
"""Pacing granularity (seconds)."""
TIMEOUT = 60.0
"""Bound of every single wait: a confirmation, a connection, a stream operation."""
DRAIN_IDLE = 30.0
RETRY_PAUSE = 1.0


@dataclass(slots=True)
class Counters:
    """What one broker's load did so far."""

    published: int = 0
    consumed: int = 0
    errors: int = 0
    last_error: str | None = None
    skipped: str | None = None
    done: bool = False
    drain_s: float | None = None
    """Seconds the load ran past the set time (consumers catching up, closing)."""

    def failed(self, exc: BaseException) -> None:
        self.errors += 1
        self.last_error = first_line(exc)


Send = Callable[[int], Awaitable[None]]
"""Publish ``n`` messages and wait for their confirmations."""
Receive = Callable[[], Awaitable[int]]
"""Wait (boundedly) for the next messages; returns how many arrived (0 if none)."""


async def mixed_load(
    send: Send, receive: Receive, *, until: float, rate: int, counters: Counters
) -> None:
    """Publish (paced at ``rate`` msg/s; 0: chunk after chunk) and consume concurrently
    until ``until`` (``time.monotonic()``), then drain: consume until everything published
    here was received or nothing arrived for ``DRAIN_IDLE`` seconds. Failures are counted
    (``counters.errors``) and retried after a pause; they do not end the load."""
    published = 0
    producing = True

    async def produce() -> None:
        nonlocal published, producing
        start = time.monotonic()
        try:
            while (now := time.monotonic()) < until:
                if rate > 0:
                    due = min(int((now - start) * rate) - published, CHUNK)
                    if due <= 0:
                        await asyncio.sleep(TICK)
                        continue
                else:
                    due = CHUNK
                try:
                    await send(due)
                except Exception as exc:
                    counters.failed(exc)
                    await asyncio.sleep(RETRY_PAUSE)
                    continue
                published += due
                counters.published += due
        finally:
            producing = False

    async def consume() -> None:
        received = 0
        idle_since: float | None = None
        while producing or received < published:
            try:
                n = await receive()
            except Exception as exc:
                counters.failed(exc)
                n = 0
                await asyncio.sleep(RETRY_PAUSE)
            received += n
            counters.consumed += n
            if n or producing:
                idle_since = None
            else:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > DRAIN_IDLE:
                    return

    async with asyncio.TaskGroup() as group:
        group.create_task(produce())
        group.create_task(consume())


# --- the loads --------------------------------------------------------------------------


async def rabbitmq_load(url: str, size: int, rate: int, until: float, c: Counters) -> None:
    stream = f"soak-{uuid.uuid4().hex[:8]}"
    body = b"s" * size
    async with await rmq.connect(url, timeout=10) as client:
        await client.create_stream(stream, max_length_bytes=200_000_000)
        try:
            async with (
                client.producer(stream) as producer,
                client.consumer(stream, offset="first") as consumer,
            ):

                async def send(n: int) -> None:
                    future = await producer.send_many([body] * n)
                    async with asyncio.timeout(TIMEOUT):
                        await future

                async def receive() -> int:
                    return len(await consumer.next_batch(5000, timeout=1.0))

                await mixed_load(send, receive, until=until, rate=rate, counters=c)
        finally:
            await client.delete_stream(stream, missing_ok=True)


async def liftbridge_load(url: str, size: int, rate: int, until: float, c: Counters) -> None:
    stream = f"soak-{uuid.uuid4().hex[:8]}"
    body = b"s" * size
    async with await lb.connect(url, timeout=10, request_timeout=TIMEOUT) as client:
        await client.create_stream(
            stream, retention_max_bytes=64 * 2**20, segment_max_bytes=8 * 2**20
        )
        try:
            async with (
                client.producer(stream, ack_policy=lb.AckPolicy.LEADER) as producer,
                client.consumer(stream, offset="first") as consumer,
            ):

                async def send(n: int) -> None:
                    await producer.send_batch([body] * n, timeout=TIMEOUT)
                    await producer.flush(timeout=TIMEOUT)

                async def receive() -> int:
                    return len(await consumer.next_batch(5000, timeout=1.0))

                await mixed_load(send, receive, until=until, rate=rate, counters=c)
        finally:
            await client.delete_stream(stream, missing_ok=True)


async def iggy_load(
    url: str | None, size: int, rate: int, until: float, c: Counters, *, rotate: float
) -> None:
    stream = f"soak-{uuid.uuid4().hex[:8]}"
    body = b"s" * size
    async with (
        iggy_bench.server(url) as (sw_url, _, _double),
        await iggy.connect(sw_url, timeout=10, request_timeout=TIMEOUT, reconnect=None) as client,
    ):
        await client.create_stream(stream)
        try:
            epoch = 0
            while time.monotonic() < until:
                address = f"{stream}/t{epoch}"
                await client.create_stream(address, partitions=1)
                async with (
                    client.producer(address, partition=0) as producer,
                    client.consumer(
                        address, offset="first", partition=0, batch_size=1000
                    ) as consumer,
                ):

                    async def send(n: int, producer: iggy.Producer = producer) -> None:
                        await producer.send_batch([body] * n, timeout=TIMEOUT)
                        await producer.flush(timeout=TIMEOUT)

                    async def receive(consumer: iggy.Consumer = consumer) -> int:
                        return len(await consumer.next_batch(1000, timeout=1.0))

                    end = min(until, time.monotonic() + rotate)
                    await mixed_load(send, receive, until=end, rate=rate, counters=c)
                await client.delete_stream(address, missing_ok=True)
                epoch += 1
        finally:
            await client.delete_stream(stream, missing_ok=True)


# --- the soak ---------------------------------------------------------------------------


@dataclass(slots=True)
class Settings:
    seconds: float = 300.0
    interval: float = 10.0
    rate: int = 5_000
    size: int = 100
    brokers: list[str] = field(default_factory=lambda: list(BROKERS))
    rabbitmq: str = "rabbitmq-stream://guest:guest@127.0.0.1:5552/"
    liftbridge: str = liftbridge_bench.DEFAULT_URL
    iggy: str | None = None
    iggy_rotate: float = 20.0
    max_growth_mb: float = 5.0


async def _guarded(name: str, load: Awaitable[None], counters: Counters, until: float) -> None:
    """Run one broker's load; a load that fails before moving any message (no broker, no
    client library) is *skipped*, a later failure ends it and is counted."""
    try:
        await load
    except Exception as exc:
        if counters.published or counters.consumed:
            counters.failed(exc)
            print(f"{name}: stopped: {first_line(exc)}", flush=True)
        else:
            counters.skipped = first_line(exc)
            print(f"{name}: skipped: {counters.skipped}", flush=True)
    finally:
        counters.done = True
        counters.drain_s = round(max(0.0, time.monotonic() - until), 1)


async def soak(settings: Settings) -> dict[str, Any]:
    start = time.monotonic()
    until = start + settings.seconds
    counters = {name: Counters() for name in settings.brokers}
    loads: dict[str, Awaitable[None]] = {}
    s = settings
    for name in settings.brokers:
        c = counters[name]
        if name == "rabbitmq":
            loads[name] = rabbitmq_load(s.rabbitmq, s.size, s.rate, until, c)
        elif name == "liftbridge":
            loads[name] = liftbridge_load(s.liftbridge, s.size, s.rate, until, c)
        else:
            loads[name] = iggy_load(s.iggy, s.size, s.rate, until, c, rotate=s.iggy_rotate)
    samples: list[dict[str, Any]] = []

    async def report() -> None:
        last = dict.fromkeys(counters, (0, 0))
        previous = time.monotonic()
        while time.monotonic() < until:
            await asyncio.sleep(min(settings.interval, max(0.0, until - time.monotonic())))
            now = time.monotonic()
            span = max(now - previous, 1e-9)
            previous = now
            sample: dict[str, Any] = {"t": round(now - start, 1), "rss_mb": round(rss_mb(), 1)}
            parts = []
            for name, c in counters.items():
                p, q = last[name]
                pub, con = (c.published - p) / span, (c.consumed - q) / span
                last[name] = (c.published, c.consumed)
                if c.skipped:
                    continue
                backlog = c.published - c.consumed
                sample[name] = {
                    "publish_per_s": round(pub, 1),
                    "consume_per_s": round(con, 1),
                    "backlog": backlog,
                }
                parts.append(f"{name} pub {pub:>7,.0f}/s con {con:>7,.0f}/s backlog {backlog:>7,}")
            samples.append(sample)
            print(
                f"t={sample['t']:>6}s rss {sample['rss_mb']:>6} MiB | " + " | ".join(parts),
                flush=True,
            )

    async with asyncio.TaskGroup() as group:
        for name, load in loads.items():
            group.create_task(_guarded(name, load, counters[name], until))
        group.create_task(report())
    points = [(float(x["t"]), float(x["rss_mb"])) for x in samples]
    verdict = rss_verdict(points, max_growth_mb=settings.max_growth_mb)
    ran = [name for name, c in counters.items() if not c.skipped]
    return {
        "settings": asdict(settings),
        "ran": ran,
        "brokers": {
            name: {k: v for k, v in asdict(c).items() if k != "done"}
            for name, c in counters.items()
        },
        "samples": samples,
        "rss_first_mb": points[0][1] if points else None,
        "rss_last_mb": points[-1][1] if points else None,
        "rss_verdict": asdict(verdict),
    }


def _brokers(value: str) -> list[str]:
    names = [b.strip().lower() for b in value.split(",") if b.strip()]
    if names == ["all"]:
        return list(BROKERS)
    unknown = [b for b in names if b not in BROKERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(BROKERS)} or all")
    return list(dict.fromkeys(names))


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--seconds", type=float, default=300, help="how long to load (s)")
    parser.add_argument("--interval", type=float, default=10, help="seconds between samples")
    parser.add_argument(
        "--rate", type=int, default=5000, help="messages/s per broker (0: as fast as possible)"
    )
    parser.add_argument("--size", type=int, default=100, help="message size (bytes)")
    parser.add_argument(
        "--brokers", type=_brokers, default=list(BROKERS), help="rabbitmq,liftbridge,iggy or all"
    )
    parser.add_argument(
        "--rabbitmq",
        default=os.environ.get(
            "STREAMWIRE_RABBITMQ_URL", "rabbitmq-stream://guest:guest@127.0.0.1:5552/"
        ),
    )
    parser.add_argument(
        "--liftbridge",
        default=os.environ.get("STREAMWIRE_LIFTBRIDGE_URL", liftbridge_bench.DEFAULT_URL),
    )
    parser.add_argument(
        "--iggy",
        default=os.environ.get("STREAMWIRE_IGGY_URL") or None,
        help="a real Iggy 0.9 server (default: the conformance double in a subprocess)",
    )
    parser.add_argument(
        "--iggy-rotate", type=float, default=20, help="seconds per Iggy topic before replacing it"
    )
    parser.add_argument(
        "--max-growth-mb",
        type=float,
        default=5.0,
        help="RSS growth over the second half still called flat (MiB)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS / "soak.json")
    args = parser.parse_args()
    if args.seconds <= 0 or args.interval <= 0:
        parser.error("--seconds and --interval must be > 0")
    settings = Settings(
        seconds=args.seconds,
        interval=args.interval,
        rate=args.rate,
        size=args.size,
        brokers=args.brokers,
        rabbitmq=args.rabbitmq,
        liftbridge=args.liftbridge,
        iggy=args.iggy,
        iggy_rotate=args.iggy_rotate,
        max_growth_mb=args.max_growth_mb,
    )
    result = asyncio.run(soak(settings))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))
    for name, c in result["brokers"].items():
        if c["skipped"]:
            print(f"{name}: skipped ({c['skipped']})")
            continue
        lag = c["published"] - c["consumed"]
        errors = f", {c['errors']} errors (last: {c['last_error']})" if c["errors"] else ""
        print(
            f"{name}: published {c['published']:,} consumed {c['consumed']:,} (lag {lag:,}), "
            f"done {c['drain_s']} s after the set time{errors}"
        )
    verdict = result["rss_verdict"]
    print(
        f"RSS {result['rss_first_mb']} → {result['rss_last_mb']} MiB; {verdict['reason']}"
        + (
            f"; slope {verdict['slope_mb_per_min']} MiB/min"
            if verdict["slope_mb_per_min"] is not None
            else ""
        )
    )
    print(f"results written to {args.output}")
    if not result["ran"] or verdict["flat"] is False:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
