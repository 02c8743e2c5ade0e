"""NatsLink.publish_many on a real nats-server: the bytes it writes straight into nats-py's
buffer are the messages nats-py's own ``publish`` would send (subjects, reply subjects,
payloads, order), with or without the bulk path; bad subjects and oversized payloads are
refused before anything is queued."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from streamwire.errors import ConfigurationError
from streamwire.liftbridge import _nats
from streamwire.liftbridge._nats import NatsLink, flush_in_order
from streamwire.transport.deadline import Deadline
from tests.brokers import require

pytestmark = [pytest.mark.integration, pytest.mark.nats]


@pytest.fixture
async def link() -> AsyncIterator[NatsLink]:
    link = await NatsLink.connect([require("nats").url], deadline=Deadline(10))
    try:
        yield link
    finally:
        await link.close()


async def received_after(
    link: NatsLink, base: str, count: int, send: object
) -> list[tuple[str, bytes, str]]:
    """What a second connection subscribed to ``<base>.>`` receives while ``send`` runs."""
    got: list[tuple[str, bytes, str]] = []
    done = asyncio.Event()

    async def on_message(msg: Msg) -> None:
        got.append((msg.subject, msg.data, msg.reply))
        if len(got) >= count:
            done.set()

    nc = await nats.connect(require("nats").url)
    try:
        await nc.subscribe(f"{base}.>", cb=on_message)
        await flush_in_order(nc, 10)
        await send  # type: ignore[misc]
        await link.flush(10)
        try:
            async with asyncio.timeout(10):
                await done.wait()
        except TimeoutError as exc:
            raise AssertionError(
                f"{len(got)} of {count} messages arrived in 10 s (last: {got[-3:]}); "
                f"publisher {link.stats}, nats-py {link._nc.stats}, subscriber {nc.stats}"
            ) from exc
        await asyncio.sleep(0.05)  # anything extra would show up here
    finally:
        await nc.close()
    return got


@pytest.mark.parametrize("bulk", [True, False])
async def test_publish_many_sends_what_publish_sends(link: NatsLink, bulk: bool) -> None:
    # the nats-py in use has the internals the bulk path writes through, unless switched off
    assert link.bulk == _nats._FAST.bulk
    link.bulk = bulk
    base = f"bulk-{uuid.uuid4().hex[:8]}"
    messages = [
        (
            f"{base}.{'a' if i % 3 else 'b.c'}",
            bytes([i % 256]) * (i * 37 % 300),
            "" if i % 2 else f"{base}-reply.{i}",
        )
        for i in range(500)
    ]
    messages.append((f"{base}.a", b"", ""))
    messages.append((f"{base}.a", "é\r\nPUB x 3\r\n".encode(), ""))  # payload bytes stay payload
    got = await received_after(link, base, len(messages), link.publish_many(messages))
    assert got == messages


@pytest.mark.parametrize("bulk", [True, False])
async def test_bad_subjects_and_oversized_payloads_queue_nothing(
    link: NatsLink, bulk: bool
) -> None:
    link.bulk = bulk
    base = f"bulk-{uuid.uuid4().hex[:8]}"
    good = (f"{base}.ok", b"1", "")
    for bad in (
        (f"{base}.a b", b"x", ""),
        (f"{base}.a\r\nPUB", b"x", ""),
        ("", b"x", ""),
        (f"{base}.a", b"x", "re ply"),
        (f"{base}.a", bytes(link.max_payload + 1), ""),
    ):
        with pytest.raises(ConfigurationError):
            await link.publish_many([good, bad])
    got = await received_after(link, base, 1, link.publish_many([good]))
    assert got == [good]


class WireLog:
    """What a nats-py connection writes to its socket, in order (first line of each write)."""

    def __init__(self, nc: NatsClient) -> None:
        self.lines: list[bytes] = []
        transport = nc._transport
        assert transport is not None
        write, writelines = transport.write, transport.writelines

        def logged_write(payload: bytes) -> None:
            self.lines += bytes(payload).splitlines()
            write(payload)

        def logged_writelines(payload: list[bytes]) -> None:
            self.lines += b"".join(payload).splitlines()
            writelines(payload)

        transport.write = logged_write  # type: ignore[method-assign]
        transport.writelines = logged_writelines  # type: ignore[method-assign]

    def commands(self) -> list[bytes]:
        return [line.split(b" ")[0] for line in self.lines if line]


async def test_flush_follows_what_was_queued_before_it() -> None:
    """``flush_in_order`` (NatsLink.flush) puts its PING after a SUB and PUBs still queued
    for nats-py's flusher, so its PONG means the server processed them; a publish from
    another connection right after it reaches the subscription."""
    url = require("nats").url
    subscriber, publisher = await nats.connect(url), await nats.connect(url)
    try:
        wire = WireLog(subscriber)
        got: asyncio.Queue[bytes] = asyncio.Queue()

        async def on_message(msg: Msg) -> None:
            await got.put(msg.data)

        subject = f"order-{uuid.uuid4().hex[:8]}"
        await subscriber.subscribe(subject, cb=on_message)
        await subscriber.publish(f"{subject}.other", b"queued")
        await flush_in_order(subscriber, 10)
        assert wire.commands() == [b"SUB", b"PUB", b"queued", b"PING"]
        await publisher.publish(subject, b"right after")
        await flush_in_order(publisher, 10)
        assert await asyncio.wait_for(got.get(), 10) == b"right after"
    finally:
        await subscriber.close()
        await publisher.close()
