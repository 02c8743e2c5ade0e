"""Your first round trip: create a stream, send a message, read it back. Any broker.

    python examples/first_message.py [URL]

URL defaults to RabbitMQ Streams on localhost; also try liftbridge://localhost:9292 or
iggy://iggy:iggy@localhost:8090 (README.md, "Get a broker").
"""

import asyncio
import sys

import streamwire


async def main(url: str) -> None:
    async with streamwire.connect(url, timeout=10) as client:
        await client.create_stream("hello", exist_ok=True)
        async with client.producer("hello") as producer:
            await producer.send_and_wait(b"hello, streamwire", headers={"lang": "en", "n": 1})
        async with client.consumer("hello", offset="first") as consumer:
            for message in await consumer.next_batch(max_messages=10, timeout=5.0):
                headers = {name: header.value for name, header in message.headers.items()}
                print(message.offset, message.value.decode(), headers)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "rabbitmq-stream://localhost:5552"))
