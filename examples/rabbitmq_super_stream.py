"""A super stream of 3 partitions: route by key (Java-compatible hashing), consume them all.

python examples/rabbitmq_super_stream.py [URL]
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import streamwire.rabbitmq as rmq
from streamwire import Message


async def main(url: str) -> None:
    name = f"invoices-{uuid.uuid4().hex[:6]}"
    async with await rmq.connect(url, timeout=10) as client:
        await client.create_stream(name, partitions=3)
        try:
            async with client.super_stream_producer(name) as producer:
                for customer in ("alice", "bob", "carol", "dave"):
                    await producer.send(f"invoice for {customer}".encode(), key=customer.encode())
                await producer.flush()
            async with client.super_stream_consumer(name) as consumer:
                seen: list[Message] = []
                while len(seen) < 4:
                    seen += await consumer.next_batch(10, timeout=5)
            for m in sorted(seen, key=lambda m: m.value):
                print(f"partition {m.partition}: {m.value.decode()}")
        finally:
            await client.delete_stream(name, super_stream=True)


if __name__ == "__main__":
    asyncio.run(
        main(sys.argv[1] if len(sys.argv) > 1 else "rabbitmq-stream://guest:guest@localhost:5552/")
    )
