"""pytest plugin for applications built on streamwire (registered as ``pytest11``).

Fixtures:

* ``await streamwire_url(broker)`` — the URL of a broker for the tests: the environment variable
  ``STREAMWIRE_<BROKER>_URL`` (``RABBITMQ``, ``LIFTBRIDGE``, ``IGGY``), else the default
  local address the project's ``docker-compose.yml`` publishes. The test is skipped, with the
  reason, when nothing answers there.
* ``streamwire_stream`` — ``await streamwire_stream("rabbitmq")`` creates a throwaway stream
  on that broker and returns ``(client, name)``; stream and client are removed after the test.

Example::

    async def test_orders_round_trip(streamwire_stream):
        client, stream = await streamwire_stream("rabbitmq")
        async with client.producer(stream) as producer:
            await producer.send_and_wait(b"order")
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import streamwire
from streamwire._url import parse_url
from streamwire.errors import StreamwireError
from streamwire.transport.tcp import open_tcp

__all__ = ("DEFAULT_URLS", "broker_url", "streamwire_stream", "streamwire_url")

DEFAULT_URLS = {
    "rabbitmq": "rabbitmq-stream://guest:guest@127.0.0.1:5552/",
    "liftbridge": "liftbridge://127.0.0.1:9292?nats=nats://127.0.0.1:4222",
    "iggy": "iggy://iggy:iggy@127.0.0.1:8090",
}

StreamFactory = Callable[..., Awaitable[tuple[streamwire.Client, str]]]

try:  # async fixtures need pytest-asyncio's decorator in its strict mode
    import pytest_asyncio

    _async_fixture: Callable[[Callable[..., Any]], Any] = pytest_asyncio.fixture
except ImportError:  # pragma: no cover - without pytest-asyncio only auto-mode plugins help
    _async_fixture = pytest.fixture


async def broker_url(broker: str) -> str:
    """The URL for ``broker`` (environment first, then the local default); skips the
    calling test when no broker answers there."""
    if broker not in DEFAULT_URLS:
        raise pytest.UsageError(f"unknown broker {broker!r}; expected {sorted(DEFAULT_URLS)}")
    url = os.environ.get(f"STREAMWIRE_{broker.upper()}_URL", DEFAULT_URLS[broker])
    parsed = parse_url(url)
    try:
        stream = await open_tcp(parsed.host, parsed.port, timeout=2.0)
    except StreamwireError as exc:
        pytest.skip(f"no {broker} broker at {parsed} ({exc})")
    await stream.aclose()
    return url


@pytest.fixture
def streamwire_url() -> Callable[[str], Awaitable[str]]:
    """``await streamwire_url("rabbitmq")`` -> the broker's URL (or skip)."""
    return broker_url


@_async_fixture
async def streamwire_stream() -> AsyncIterator[StreamFactory]:
    """``client, name = await streamwire_stream("rabbitmq", **create_options)``."""
    made: list[tuple[streamwire.Client, str]] = []

    async def make(broker: str, **options: Any) -> tuple[streamwire.Client, str]:
        client = await streamwire.connect(await broker_url(broker), timeout=10)
        name = f"test-{uuid.uuid4().hex[:12]}"  # a bare name works on every broker
        try:
            await client.create_stream(name, **options)
        except BaseException:
            await client.close()
            raise
        made.append((client, name))
        return client, name

    yield make
    for client, name in made:
        try:
            await client.delete_stream(name, missing_ok=True)
        except StreamwireError:
            pass
        finally:
            await client.close()
