"""Fixtures for Liftbridge integration tests: a client on the harness broker (Liftbridge
v1.9.0 on nats-server 2.15.1) and fresh, uniquely named streams (deleted afterwards)."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

import streamwire
import streamwire.liftbridge as lb
from streamwire.liftbridge._stream_reader import THREAD_NAME
from tests.brokers import BrokerInfo, require

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge]

NewStream = Callable[..., Awaitable[str]]


@pytest.fixture
def broker() -> BrokerInfo:
    return require("liftbridge")


@pytest.fixture
def url(broker: BrokerInfo) -> str:
    nats_url = broker.extra.get("NATS_URL", f"nats://{broker.host}:4222")
    return f"liftbridge://{broker.host}:{broker.port}?nats={nats_url}"


@pytest.fixture
def subscribe_transport() -> str:
    """How the ``client`` fixture's consumers read Subscribe streams: the connect default
    (``auto``: HTTP/2), or ``STREAMWIRE_LIFTBRIDGE_SUBSCRIBE`` (``grpcio`` runs the suite
    over grpcio's reading threads)."""
    return os.environ.get("STREAMWIRE_LIFTBRIDGE_SUBSCRIBE", "auto")


@pytest.fixture
async def client(url: str, subscribe_transport: str) -> AsyncIterator[lb.Client]:
    c = await lb.connect(url, timeout=10, subscribe_transport=subscribe_transport)
    try:
        yield c
    finally:
        await c.close()


def unique(prefix: str = "sw-lb") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def reader_threads() -> list[object]:
    """The consumers' subscription readers still running: grpcio's threads (see
    ``_stream_reader``) and the HTTP/2 subscriptions' tasks (``_h2_subscription``)."""
    threads = [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]
    try:
        tasks = [t for t in asyncio.all_tasks() if t.get_name().startswith("streamwire h2 ")]
    except RuntimeError:  # no running loop
        tasks = []
    return [*threads, *tasks]


@pytest.fixture
async def new_stream(client: lb.Client) -> AsyncIterator[NewStream]:
    """``await new_stream(partitions=..., **options)`` creates a stream named and attached
    to a unique subject; every stream made is deleted at the end."""
    made: list[str] = []

    async def make(**kwargs: object) -> str:
        name = unique()
        await client.create_stream(name, **kwargs)  # type: ignore[arg-type]
        made.append(name)
        return name

    try:
        yield make
    finally:
        for name in made:
            await client.delete_stream(name, missing_ok=True)


@pytest.fixture
async def stream(new_stream: NewStream) -> str:
    return await new_stream()


async def leader_metadata(
    client: lb.Client, stream: str, partition: int = 0, *, timeout: float = 30.0
) -> lb.PartitionInfo:
    """``partition_metadata`` once the partition has a leader again, for a ``stream`` that
    exists: a server restarted on its data answers FAILED_PRECONDITION ("not the partition
    leader", a retriable ``ServerError``) until it has elected one, and its metadata may
    not list the stream yet (``StreamNotFoundError``) while it applies its Raft log again;
    both seen in clean-clone rehearsals, where the server had many streams behind it. Past
    ``timeout`` seconds the last error is raised."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            return await client.partition_metadata(stream, partition)
        except streamwire.StreamNotFoundError:
            if asyncio.get_running_loop().time() >= deadline:
                raise
        except streamwire.ServerError as exc:
            if not exc.retriable or asyncio.get_running_loop().time() >= deadline:
                raise
        await asyncio.sleep(0.2)
