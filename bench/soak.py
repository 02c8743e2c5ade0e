"""A bounded soak: publish and consume at the same time for a set time, reporting throughput
and the process's resident memory every interval. RSS must stay flat.

    python -m bench.soak [--seconds 300] [--interval 10] [--rabbitmq URL]

Runs against RabbitMQ Streams (the broker from integration/brokers.sh); prints one line per
interval and a summary, and writes bench/results/soak.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import time
import uuid
from pathlib import Path
from typing import Any

import streamwire.rabbitmq as rmq

RESULTS = Path(__file__).resolve().parent / "results"


def rss_mb() -> float:
    """Current resident set size in MiB (from /proc; falls back to the peak)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def soak(url: str, seconds: float, interval: float, size: int) -> dict[str, Any]:
    stream = f"soak-{uuid.uuid4().hex[:8]}"
    samples: list[dict[str, float]] = []
    published = consumed = 0
    async with await rmq.connect(url) as client:
        await client.create_stream(stream, max_length_bytes=200_000_000)
        stop = time.monotonic() + seconds

        async def produce() -> None:
            nonlocal published
            async with client.producer(stream) as producer:
                body = b"s" * size
                while time.monotonic() < stop:
                    future = await producer.send_many([body] * 1000)
                    await future
                    published += 1000

        async def consume() -> None:
            nonlocal consumed
            async with client.consumer(stream, offset="first") as consumer:
                idle_since = None
                while time.monotonic() < stop or consumed < published:
                    batch = await consumer.next_batch(5000, timeout=1.0)
                    consumed += len(batch)
                    if batch:
                        idle_since = None
                    elif time.monotonic() >= stop:  # draining: give up after 30 s idle
                        idle_since = idle_since or time.monotonic()
                        if time.monotonic() - idle_since > 30:
                            break

        async def report() -> None:
            last_p = last_c = 0
            start = time.monotonic()
            while time.monotonic() < stop:
                await asyncio.sleep(interval)
                sample = {
                    "t": round(time.monotonic() - start, 1),
                    "publish_per_s": (published - last_p) / interval,
                    "consume_per_s": (consumed - last_c) / interval,
                    "rss_mb": round(rss_mb(), 1),
                }
                last_p, last_c = published, consumed
                samples.append(sample)
                print(
                    f"t={sample['t']:>6}s publish {sample['publish_per_s']:>10,.0f}/s "
                    f"consume {sample['consume_per_s']:>10,.0f}/s rss {sample['rss_mb']} MiB",
                    flush=True,
                )

        await asyncio.gather(produce(), consume(), report())
        await client.delete_stream(stream)
    rss = [s["rss_mb"] for s in samples]
    later = rss[len(rss) // 2 :] or rss
    return {
        "seconds": seconds,
        "published": published,
        "consumed": consumed,
        "samples": samples,
        "rss_first_mb": rss[0] if rss else None,
        "rss_last_mb": rss[-1] if rss else None,
        "rss_growth_second_half_mb": round(max(later) - min(later), 1) if later else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument(
        "--rabbitmq",
        default=os.environ.get(
            "STREAMWIRE_RABBITMQ_URL", "rabbitmq-stream://guest:guest@127.0.0.1:5552/"
        ),
    )
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--interval", type=float, default=10)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    result = asyncio.run(soak(args.rabbitmq, args.seconds, args.interval, args.size))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "soak.json").write_text(json.dumps(result, indent=2))
    print(
        f"published {result['published']:,} consumed {result['consumed']:,}; "
        f"RSS {result['rss_first_mb']} → {result['rss_last_mb']} MiB "
        f"(second-half spread {result['rss_growth_second_half_mb']} MiB)"
    )


if __name__ == "__main__":
    main()
