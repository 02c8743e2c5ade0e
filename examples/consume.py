"""Read a stream with a named consumer, committing as it goes. ``first`` (the default) reads
from the start; ``next`` resumes after the offset committed under NAME by an earlier run.

    python examples/consume.py [URL] [STREAM] [NAME] [first|next]

Defaults: RabbitMQ on localhost, the stream "events" that produce.py writes, the name "reader",
and "first".
"""

from __future__ import annotations

import asyncio
import sys

import streamwire


async def main(url: str, stream: str, name: str, start: str) -> None:
    async with streamwire.connect(url, timeout=10) as client:
        async with client.consumer(stream, offset=start, name=name) as consumer:
            total = 0
            while batch := await consumer.next_batch(500, timeout=2.0):
                for message in batch:
                    headers = {name: header.value for name, header in message.headers.items()}
                    print(message.offset, message.key, message.value.decode(), headers)
                total += len(batch)
                await consumer.commit(batch[-1].offset)
        print(f"consumed {total} messages")


if __name__ == "__main__":
    defaults = ("rabbitmq-stream://localhost:5552", "events", "reader", "first")
    url, stream, name, start = [*sys.argv[1:5], *defaults[len(sys.argv[1:5]) :]]
    asyncio.run(main(url, stream, name, start))
