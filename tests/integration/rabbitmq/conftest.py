"""Fixtures for RabbitMQ Streams integration tests: a client on the harness broker and a
fresh stream per test (deleted afterwards)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

import streamwire.rabbitmq as rmq
from tests.brokers import BrokerInfo, require

#: The lanes this run covers (``STREAMWIRE_TEST_RABBITMQ_LANES``, comma-separated; default:
#: all three). ``make test``'s pure-Python pass runs 4.3 only: what differs between the
#: broker versions is the broker's behaviour, the same whichever core encodes the bytes
#: (the both_cores property tests hold the two cores' bytes equal).
LANES = frozenset(
    os.environ.get("STREAMWIRE_TEST_RABBITMQ_LANES", "rabbitmq,rabbitmq40,rabbitmq310").split(",")
)


@pytest.fixture(params=["rabbitmq", "rabbitmq40", "rabbitmq310"])
def broker(request: pytest.FixtureRequest) -> BrokerInfo:
    """RabbitMQ 4.3 and, for the compatibility matrix, trixie's 4.0 and bookworm's 3.10 when
    they are up (and among :data:`LANES`)."""
    if request.param not in LANES:
        pytest.skip(f"{request.param}: not among STREAMWIRE_TEST_RABBITMQ_LANES in this pass")
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
