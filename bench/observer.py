"""What metrics and tracing cost: the same workload with no observer (the meters alone) and
with ``streamwire.otel`` on the OpenTelemetry SDK, on every broker, and the meters' own cost
per call.

``python -m bench.observer --rabbitmq URL --liftbridge URL [--iggy URL]`` (Iggy: the
conformance double in a subprocess unless a URL is given). Each round publishes ``--count``
messages of ``--size`` bytes through the unified API (``send_batch`` of ``--batch``, then
``flush``) and consumes them twice from the first offset: ``next_batch(--batch)`` and
``async for`` (one message per call: the meters' worst case). The modes alternate within
each round; medians over ``--rounds``. ``--modes off`` alone runs with whatever streamwire
is importable, so the same script measures a tree without the meters (A/B of the hot
paths, docs/benchmarks/notes/2026-11.md, "Metrics and tracing").

Nothing here is asserted; docs/benchmarks/notes/2026-11.md reports the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import streamwire
from bench._common import Measurement, Stopwatch, fmt_cpu, fmt_rate, markdown_table, median
from bench._common import rotated as rotate

MODES = ("off", "otel")


@contextlib.contextmanager
def observed(mode: str) -> Iterator[Callable[[], int]]:
    """Install the mode's observer; yields a function counting the spans it finished."""
    if mode == "off":
        yield lambda: 0
        return
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from streamwire import otel

    exporter = InMemorySpanExporter()
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(meters, tracers)
    try:
        yield lambda: len(exporter.get_finished_spans())
    finally:
        otel.uninstrument()
        meters.shutdown()
        tracers.shutdown()


async def publish(
    client: streamwire.Client, stream: str, count: int, size: int, batch: int
) -> Measurement:
    body = b"x" * size
    async with client.producer(stream) as producer:
        with Stopwatch() as sw:
            for start in range(0, count, batch):
                await producer.send_batch([body] * min(batch, count - start))
            await producer.flush(timeout=120)
    return sw.result(count)


async def consume_batches(
    client: streamwire.Client, stream: str, count: int, batch: int
) -> Measurement:
    seen = 0
    async with client.consumer(stream, offset="first") as consumer:
        with Stopwatch() as sw:
            while seen < count:
                got = await consumer.next_batch(batch, timeout=10)
                if not got:
                    raise RuntimeError(f"stalled after {seen} messages")
                seen += len(got)
    return sw.result(seen)


async def consume_iterating(client: streamwire.Client, stream: str, count: int) -> Measurement:
    seen = 0
    async with client.consumer(stream, offset="first") as consumer:
        with Stopwatch() as sw:
            async for _ in consumer:
                seen += 1
                if seen >= count:
                    break
    return sw.result(seen)


@contextlib.asynccontextmanager
async def iggy_url(given: str | None) -> AsyncIterator[str]:
    if given is not None:
        yield given
        return
    from bench.iggy import DoubleProcess

    async with DoubleProcess() as double:
        yield double.url


async def run_broker(
    url: str, modes: list[str], rounds: int, count: int, size: int, batch: int
) -> dict[str, dict[str, list[Measurement]]]:
    results: dict[str, dict[str, list[Measurement]]] = {
        d: {m: [] for m in modes} for d in ("publish", "consume", "iterate")
    }
    async with streamwire.connect(url, timeout=30) as client:
        for rnd in range(rounds):
            for mode in rotate(modes, rnd):
                stream = f"obs-{uuid.uuid4().hex[:8]}"
                await client.create_stream(stream)
                try:
                    with observed(mode) as spans:
                        results["publish"][mode].append(
                            await publish(client, stream, count, size, batch)
                        )
                        results["consume"][mode].append(
                            await consume_batches(client, stream, count, batch)
                        )
                        results["iterate"][mode].append(
                            await consume_iterating(client, stream, count)
                        )
                        finished = spans()
                finally:
                    await client.delete_stream(stream, missing_ok=True)
                rates = " ".join(f"{d} {fmt_rate(results[d][mode][-1].rate)}/s" for d in results)
                print(f"  round {rnd + 1} {mode}: {rates}; {finished} spans", file=sys.stderr)
    return results


def meter_cost(calls: int = 200_000) -> dict[str, float]:
    """Nanoseconds per meter call without an observer (the cost every call pays)."""
    from streamwire.metrics import ConsumerMeter, Destination, ProducerMeter

    where = Destination("rabbitmq", "s", "127.0.0.1:5552")
    producer, consumer = ProducerMeter(where), ConsumerMeter(where)
    start = time.perf_counter()
    for _ in range(calls):
        producer.settled(producer.sent(100, 10_000), 100, 0)
    sent = time.perf_counter() - start
    consumer.stream_ends_at(10 * calls)
    start = time.perf_counter()
    for i in range(calls):
        consumer.received(100, 10_000, i)
    received = time.perf_counter() - start
    return {"send+settle": sent * 1e9 / calls, "received": received * 1e9 / calls}


def table(results: dict[str, dict[str, dict[str, list[Measurement]]]], modes: list[str]) -> str:
    rows = []
    for broker, directions in results.items():
        for direction, by_mode in directions.items():
            rates = {m: median(x.rate for x in by_mode[m]) for m in modes}
            cpus = {m: median(x.cpu_us for x in by_mode[m]) for m in modes}
            row = [broker, direction]
            for m in modes:
                row += [fmt_rate(rates[m]), fmt_cpu(cpus[m])]
            if "off" in modes and len(modes) > 1:
                base = cpus["off"]
                for m in modes:
                    if m != "off":
                        other = cpus[m]
                        row.append(
                            "–"
                            if not base or other is None
                            else f"{(other / base - 1) * 100:+.1f}%"
                        )
            rows.append(row)
    header = ["broker", "direction"]
    for m in modes:
        header += [f"{m} msg/s", f"{m} CPU µs/msg"]
    header += [f"{m} CPU vs off" for m in modes if m != "off" and "off" in modes]
    return markdown_table(header, rows, right=range(2, len(header)))


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    modes = args.modes
    results: dict[str, dict[str, dict[str, list[Measurement]]]] = {}
    for broker, url in (("rabbitmq", args.rabbitmq), ("liftbridge", args.liftbridge)):
        if url:
            print(f"{broker}:", file=sys.stderr)
            results[broker] = await run_broker(
                url, modes, args.rounds, args.count, args.size, args.batch
            )
    if not args.no_iggy:
        async with iggy_url(args.iggy) as url:
            print("iggy:", file=sys.stderr)
            results["iggy"] = await run_broker(
                url, modes, args.rounds, args.count, args.size, args.batch
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rabbitmq", help="a RabbitMQ Streams URL")
    parser.add_argument("--liftbridge", help="a Liftbridge URL (with ?nats=...)")
    parser.add_argument("--iggy", help="an Iggy URL (default: the double in a subprocess)")
    parser.add_argument("--no-iggy", action="store_true")
    parser.add_argument("--modes", type=lambda v: v.split(","), default=list(MODES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--json", help="also write the medians here")
    args = parser.parse_args()
    if unknown := set(args.modes) - set(MODES):
        parser.error(f"unknown modes {sorted(unknown)}")
    results = asyncio.run(amain(args))
    print(table(results, args.modes))
    if "otel" in args.modes:
        costs = meter_cost()
        print(
            "\nmeters without an observer: "
            + ", ".join(f"{k} {v:.0f} ns per call" for k, v in costs.items())
        )
    if args.json:
        raw = {
            broker: {
                direction: {m: [dataclasses.asdict(x) for x in v] for m, v in by_mode.items()}
                for direction, by_mode in directions.items()
            }
            for broker, directions in results.items()
        }
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(raw, fh, indent=1)


if __name__ == "__main__":
    main()
