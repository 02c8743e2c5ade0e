"""Probe, run in a child process by test_non_ascii.py: can rstream and rbfly create a stream
with a non-ASCII name? Prints one JSON object: each peer's outcome ("created", "timeout"
or "error: <type>: <message>").

A child process because a hung rstream connection is left behind (its unclosed transport
would only warn at garbage collection, inside whatever test runs next).

Usage: python -m tests.interop.rabbitmq._non_ascii_probe HOST PORT USER PASSWORD NAME TIMEOUT
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import rstream
from rbfly.streams import streams_client


async def _rstream(host: str, port: int, user: str, password: str, name: str, wait: float) -> str:
    producer = rstream.Producer(host, port, username=user, password=password)
    try:
        async with asyncio.timeout(wait):
            await producer.start()
            await producer.create_stream(name)
        return "created"
    except TimeoutError:
        return "timeout"
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    finally:
        try:
            async with asyncio.timeout(wait):
                await producer.close()
        except BaseException:  # noqa: S110 - best effort; the process ends next
            pass


async def _rbfly(host: str, port: int, user: str, password: str, name: str, wait: float) -> str:
    client: Any = streams_client(f"rabbitmq-stream://{user}:{password}@{host}:{port}/")
    try:
        async with asyncio.timeout(wait):
            await client.create_stream(name)
        return "created"
    except TimeoutError:
        return "timeout"
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    finally:
        try:
            async with asyncio.timeout(wait):
                await client.disconnect()
        except BaseException:  # noqa: S110 - best effort; the process ends next
            pass


async def main(argv: list[str]) -> None:
    host, port, user, password, name, wait = argv
    args = (host, int(port), user, password, name, float(wait))
    result = {"rstream": await _rstream(*args), "rbfly": await _rbfly(*args)}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
