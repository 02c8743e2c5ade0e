"""Secrets that change (OAuth 2 tokens): re-authenticating open connections with SASL PLAIN,
by hand (``update_secret``) and on a token provider's schedule (against the scripted broker;
tests/integration/rabbitmq/test_tokens.py does it on real brokers)."""

from __future__ import annotations

import asyncio
import time

import pytest

import streamwire.rabbitmq as rmq
from streamwire.errors import UnsupportedByBroker
from streamwire.rabbitmq.credentials import refresh_delay
from streamwire.rabbitmq.protocol import frames as f
from streamwire.rabbitmq.protocol.errors import AuthenticationFailure
from tests.rabbitmq_double import RabbitMQDouble


def reauthentications(broker: RabbitMQDouble) -> list[bytes]:
    """The PLAIN secrets sent on connections that were already open."""
    opened: set[int] = set()
    secrets: list[bytes] = []
    for session, frame in broker.received:
        if isinstance(frame, f.OpenRequest):
            opened.add(session)
        elif isinstance(frame, f.SaslAuthenticateRequest) and session in opened:
            secrets.append((frame.data or b"").rpartition(b"\0")[2])
    return secrets


async def test_update_secret_reauthenticates_every_open_connection(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    await client.create_stream("s")
    async with client.producer("s") as producer:
        await producer.send_and_wait(b"before")
        broker.password = "rotated"
        await client.update_secret("rotated")
        assert reauthentications(broker) == [b"rotated", b"rotated"]  # locator and producer
        await producer.send_and_wait(b"after")  # the connections stay usable
    assert client.settings.password == "rotated"  # and new connections use it
    async with client.consumer("s", offset="first") as consumer:
        assert len(await consumer.next_batch(10, timeout=5)) == 2


async def test_a_refused_secret_is_an_authentication_failure(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    with pytest.raises(AuthenticationFailure):
        await client.update_secret("not-the-password")


async def test_brokers_before_3_13_cannot_reauthenticate() -> None:
    async with RabbitMQDouble(version="3.12.14") as old:
        client = await rmq.connect(old.url, timeout=5.0, reconnect=None)
        try:
            with pytest.raises(UnsupportedByBroker, match=r"3\.13"):
                await client.update_secret("guest")
        finally:
            await client.close()


async def test_a_token_provider_is_asked_again_before_the_token_expires(
    broker: RabbitMQDouble,
) -> None:
    issued: list[str] = []
    refreshed = asyncio.Event()

    async def provider() -> rmq.Token:
        if not issued:
            issued.append("token-1")
            broker.password = "token-1"
            return rmq.Token("token-1", time.time() + 1.5)  # refreshed after ~0.5 s
        issued.append("token-2")
        broker.password = "token-2"  # what the authorization server now accepts
        refreshed.set()
        return rmq.Token("token-2", None)  # no expiry: no further refresh

    client = await rmq.connect(
        f"rabbitmq-stream://guest@127.0.0.1:{broker.port}/",
        timeout=5.0,
        reconnect=None,
        token_provider=provider,
    )
    try:
        assert issued == ["token-1"]
        async with asyncio.timeout(10):
            await refreshed.wait()
            while reauthentications(broker) != [b"token-2"]:
                await broker.changed.wait()
                broker.changed.clear()
        await client.create_stream("still-open")  # the locator survived its first token
        assert "still-open" in broker.state.streams
    finally:
        await client.close()
    assert issued == ["token-1", "token-2"]
    assert client._refresh is not None
    assert client._refresh.done()


@pytest.mark.parametrize(
    ("remaining", "delay"),
    [
        (3600.0, 2880.0),  # an hour's token: at 80 %, 12 minutes to spare
        (10.0, 8.0),
        (5.0, 4.0),  # where a second to spare and 80 % meet
        (4.0, 3.0),  # a short token: a second to spare, not 0.8 s
        (1.2, 0.5),  # about to expire: soon, but not in a busy loop
        (-3.0, 0.5),  # already expired (a provider that hands out stale tokens)
    ],
)
def test_a_token_is_refreshed_at_80_percent_or_a_second_before_it_ends(
    remaining: float, delay: float
) -> None:
    assert refresh_delay(remaining) == pytest.approx(delay)
