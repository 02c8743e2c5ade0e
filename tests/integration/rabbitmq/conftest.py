"""Fixtures for RabbitMQ Streams integration tests: a client on the harness broker and a
fresh stream per test (deleted afterwards)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

import streamwire.rabbitmq as rmq
from tests.brokers import BrokerInfo, require


@pytest.fixture(params=["rabbitmq", "rabbitmq40", "rabbitmq310"])
def broker(request: pytest.FixtureRequest) -> BrokerInfo:
    """RabbitMQ 4.3 and, for the compatibility matrix, trixie's 4.0 and bookworm's 3.10 when
    they are up."""
    return require(request.param)


@pytest.fixture
async def client(broker: BrokerInfo) -> AsyncIterator[rmq.Client]:
    c = await rmq.connect(broker.url, timeout=10)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def stream(client: rmq.Client) -> AsyncIterator[str]:
    name = f"sw-test-{uuid.uuid4().hex[:12]}"
    await client.create_stream(name)
    try:
        yield name
    finally:
        await client.delete_stream(name, missing_ok=True)
