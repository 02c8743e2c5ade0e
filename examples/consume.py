"""Read a stream with a named consumer, committing as it goes. ``first`` reads from the
start; ``next`` (the default) resumes after the offset committed under NAME.

    python examples/consume.py URL STREAM NAME [first|next]
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
                    print(
                        message.offset,
                        message.key,
                        message.value.decode(),
                        message.headers["seq"].as_int(),
                    )
                total += len(batch)
                await consumer.commit(batch[-1].offset)
        print(f"consumed {total} messages")


if __name__ == "__main__":
    asyncio.run(
        main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "next")
    )
