"""Publish lines of stdin (or generated messages) to any broker through the unified API.

    python examples/produce.py [URL] [STREAM] [COUNT]

URL: rabbitmq-stream://… (the default, RabbitMQ on localhost), liftbridge://…, or iggy://…;
STREAM defaults to "events", COUNT to 10.
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
    defaults = ("rabbitmq-stream://localhost:5552", "events", "10")
    url, stream, count = [*sys.argv[1:4], *defaults[len(sys.argv[1:4]) :]]
    asyncio.run(main(url, stream, int(count)))
