"""Publish lines of stdin (or generated messages) to any broker through the unified API.

    python examples/produce.py URL STREAM [COUNT]

URL: rabbitmq-stream://…, liftbridge://…?nats=…, or iggy://… (an Iggy stream is "stream/topic").
"""

from __future__ import annotations

import asyncio
import sys

import streamwire


async def main(url: str, stream: str, count: int) -> None:
    async with streamwire.connect(url, timeout=10) as client:
        await client.create_stream(stream, exist_ok=True)
        async with client.producer(stream) as producer:
            futures = await producer.send_batch(
                [
                    streamwire.Message(
                        f"event {i}".encode(), key=f"user-{i % 3}".encode(), headers={"seq": i}
                    )
                    for i in range(count)
                ]
            )
            await producer.flush()
        print(f"published {len(futures)} messages to {stream}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 10))
