"""Re-authenticating open connections on real brokers (RabbitMQ 3.13+ allows SaslAuthenticate
after Open): by hand and on a token provider's schedule. The secret here is the internal
user's password; an OAuth 2 token takes the same path (docs/rabbitmq.md, "Tokens that
expire")."""

from __future__ import annotations

import asyncio
import time

import pytest

import streamwire.rabbitmq as rmq
from streamwire.errors import UnsupportedByBroker
from streamwire.rabbitmq.protocol.errors import AuthenticationFailure
from tests.brokers import BrokerInfo

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]


async def test_update_secret_on_the_broker(broker: BrokerInfo, stream: str) -> None:
    client = await rmq.connect(broker.url, timeout=10, reconnect=None)
    try:
        async with client.producer(stream) as producer:
            await producer.send_and_wait(b"before")
            if client.server_version < (3, 13):
                with pytest.raises(UnsupportedByBroker):
                    await client.update_secret("guest")
                return
            await client.update_secret("guest")  # accepted: the connections carry on
            await producer.send_and_wait(b"after")
        with pytest.raises(AuthenticationFailure):
            await client.update_secret("not-the-password")
    finally:
        await client.close()


async def test_a_token_provider_refreshes_before_expiry(broker: BrokerInfo, stream: str) -> None:
    asked: list[float] = []

    async def provider() -> rmq.Token:
        asked.append(time.time())
        return rmq.Token("guest", time.time() + 1.5 if len(asked) == 1 else None)

    client = await rmq.connect(broker.url, timeout=10, token_provider=provider)
    try:
        if client.server_version < (3, 13):
            pytest.skip(f"RabbitMQ {broker.version} cannot re-authenticate (needs 3.13)")
        async with client.producer(stream) as producer:
            async with asyncio.timeout(10):
                while len(asked) < 2:
                    await producer.send_and_wait(b"tick")
                    await asyncio.sleep(0.1)
            assert client._refresh is not None
            async with asyncio.timeout(10):
                await client._refresh  # the second token has no expiry: the loop ends
            await producer.send_and_wait(b"after the refresh")
    finally:
        await client.close()
    assert len(asked) == 2  # once to connect, once before the first token expired
