"""Fixtures for the offline driver tests: a scripted broker on loopback and a client on it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import streamwire.rabbitmq as rmq
from tests.rabbitmq_double import RabbitMQDouble


@pytest.fixture
async def broker() -> AsyncIterator[RabbitMQDouble]:
    async with RabbitMQDouble() as double:
        yield double


@pytest.fixture
async def client(broker: RabbitMQDouble) -> AsyncIterator[rmq.Client]:
    """A client without reconnection (failures surface at once)."""
    c = await rmq.connect(broker.url, timeout=5.0, reconnect=None)
    try:
        yield c
    finally:
        async with asyncio.timeout(10):
            await c.close()
