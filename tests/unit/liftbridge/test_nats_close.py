"""NatsLink.close: a close cancelled while nats-py closes still drops the socket (nats-py
marks itself closed as its close starts, so calling it again would not finish the job)."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from nats.aio.client import Client as NatsClient

from streamwire.liftbridge._nats import NatsLink


class _Transport:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class _SlowNats:
    """What NatsLink.close uses of nats-py's client: a close that hangs while flushing."""

    def __init__(self, hang: bool) -> None:
        self._transport = _Transport()
        self.is_closed = False
        self.hang = hang
        self.closes = 0

    async def close(self) -> None:
        self.closes += 1
        self.is_closed = True
        if self.hang:
            await asyncio.Event().wait()
        self._transport.close()


async def test_a_cancelled_close_drops_the_socket() -> None:
    nc = _SlowNats(hang=True)
    link = NatsLink(cast(NatsClient, nc), ["nats://127.0.0.1:4222"])
    closing = asyncio.create_task(link.close())
    await asyncio.sleep(0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await closing
    assert nc._transport.closed
    await link.close()  # idempotent
    assert nc.closes == 1


async def test_a_clean_close_is_nats_py_s_own() -> None:
    nc = _SlowNats(hang=False)
    link = NatsLink(cast(NatsClient, nc), ["nats://127.0.0.1:4222"])
    async with asyncio.timeout(5):
        await link.close()
    assert nc._transport.closed
    assert nc.closes == 1
