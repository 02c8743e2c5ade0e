"""Publish with deduplication, then read back: the README quickstart, runnable.

python examples/rabbitmq_quickstart.py [URL]
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import streamwire


async def main(url: str) -> None:
    stream = f"orders-{uuid.uuid4().hex[:8]}"
    async with streamwire.connect(url, timeout=10) as client:
        await client.create_stream(stream, exist_ok=True)
        async with client.producer(stream, name="orders-writer") as producer:
            confirmation = await producer.send_and_wait(
                b"order #1", key=b"customer-7", headers={"qty": 3}
            )
            print("stored, publishing id", confirmation.publishing_id)
        async with client.consumer(stream, offset="first") as consumer:
            for message in await consumer.next_batch(max_messages=100, timeout=5.0):
                headers = {name: header.value for name, header in message.headers.items()}
                print(message.offset, message.value, message.key, headers)
        await client.delete_stream(stream)


if __name__ == "__main__":
    asyncio.run(
        main(sys.argv[1] if len(sys.argv) > 1 else "rabbitmq-stream://guest:guest@localhost:5552/")
    )
