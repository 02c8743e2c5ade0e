"""Server-side filtering (with the client-side check it needs) and zstd sub-batches.

python examples/rabbitmq_filtering_and_compression.py [URL]
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import streamwire.rabbitmq as rmq
from streamwire import Message


def region(message: Message) -> str | None:
    value = message.headers.get("region")
    return value.as_str() if value is not None else None


async def main(url: str) -> None:
    async with await rmq.connect(url, timeout=10) as client:
        orders, logs = f"orders-{uuid.uuid4().hex[:6]}", f"logs-{uuid.uuid4().hex[:6]}"
        await client.create_stream(orders)
        await client.create_stream(logs)
        try:
            async with client.producer(orders, filter_value=region) as producer:
                for r in ("eu", "us", "eu"):
                    await producer.send_batch(
                        [Message(f"order {r}".encode(), headers={"region": r})]
                    )
                    await producer.flush()
            async with client.consumer(
                orders, filter_values=["eu"], post_filter=lambda m: region(m) == "eu"
            ) as consumer:
                eu = await consumer.next_batch(10, timeout=5)
            print("eu orders:", len(eu))

            async with client.producer(logs, sub_batch_size=500, compression="zstd") as producer:
                confirmation = await (await producer.send_many([b"log line"] * 2000))
            print("log batches stored, last publishing id", confirmation.last_publishing_id)
        finally:
            await client.delete_stream(orders)
            await client.delete_stream(logs)


if __name__ == "__main__":
    asyncio.run(
        main(sys.argv[1] if len(sys.argv) > 1 else "rabbitmq-stream://guest:guest@localhost:5552/")
    )
