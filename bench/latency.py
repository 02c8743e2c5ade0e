"""End-to-end latency at a fixed rate: publish-to-confirm and publish-to-consume.

Each message carries its send time (``perf_counter_ns``); the consumer runs in the same
process, so both ends read the same clock. Reported as percentiles and as raw samples for the
CDF plot.
"""

from __future__ import annotations

import asyncio
import functools
import struct
import time
import uuid

import streamwire.rabbitmq as rmq

_STAMP = struct.Struct(">q")


async def rabbitmq_latency(
    url: str, *, rate: int = 5_000, seconds: float = 5.0, size: int = 100
) -> dict[str, list[float]]:
    """Confirm and end-to-end latencies in milliseconds, one sample per message."""
    stream = f"bench-lat-{uuid.uuid4().hex[:8]}"
    confirm_ms: list[float] = []
    e2e_ms: list[float] = []
    total = int(rate * seconds)
    pad = b"l" * max(0, size - _STAMP.size)
    async with await rmq.connect(url) as client:
        await client.create_stream(stream)
        try:
            async with client.consumer(stream, offset="first", initial_credit=64) as consumer:

                async def consume() -> None:
                    while len(e2e_ms) < total:
                        batch = await consumer.next_batch(1000, timeout=10)
                        if not batch:
                            raise RuntimeError("consumer stalled")
                        now = time.perf_counter_ns()
                        e2e_ms.extend((now - _STAMP.unpack_from(m.value)[0]) / 1e6 for m in batch)

                reader = asyncio.create_task(consume())
                async with client.producer(stream) as producer:
                    interval = 1.0 / rate
                    start = time.perf_counter()
                    for i in range(total):
                        due = start + i * interval
                        delay = due - time.perf_counter()
                        if delay > 0:
                            await asyncio.sleep(delay)
                        sent = time.perf_counter_ns()
                        future = await producer.send(_STAMP.pack(sent) + pad)
                        future.add_done_callback(functools.partial(_record, confirm_ms, sent))
                    await producer.flush()
                await reader
        finally:
            await client.delete_stream(stream)
    return {"confirm_ms": confirm_ms, "end_to_end_ms": e2e_ms}


def _record(samples: list[float], sent_ns: int, _future: object) -> None:
    samples.append((time.perf_counter_ns() - sent_ns) / 1e6)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {}

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "max": round(ordered[-1], 3)}
