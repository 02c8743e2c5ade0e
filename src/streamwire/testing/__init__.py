"""pytest plugin for applications built on streamwire (registered as ``pytest11``; install
``streamwire[testing]`` for pytest and pytest-asyncio).

Fixtures:

* ``await streamwire_url(broker)`` — the URL of a broker for the tests: the environment variable
  ``STREAMWIRE_<BROKER>_URL`` (``RABBITMQ``, ``LIFTBRIDGE``, ``IGGY``), else the default
  local address the project's ``docker-compose.yml`` publishes. The test is skipped, with the
  reason, when nothing answers there — or fails, with ``--streamwire-require`` (or
  ``STREAMWIRE_REQUIRE=1``), so that CI cannot pass without its brokers.
* ``streamwire_stream`` — ``await streamwire_stream("rabbitmq")`` creates a throwaway stream
  on that broker and returns ``(client, name)``; stream and client are removed after the test.

Tests that request these fixtures run on pytest-asyncio in its strict mode and in its auto mode
alike: the plugin marks them ``asyncio`` itself. Example (README.md, "Test your application")::

    async def test_orders_round_trip(streamwire_stream):
        client, stream = await streamwire_stream("rabbitmq")
        async with client.producer(stream) as producer:
            await producer.send_and_wait(b"order")
"""

from __future__ import annotations

import inspect
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, Unpack

import pytest

import streamwire
from streamwire._api import StreamKwargs
from streamwire._url import parse_url
from streamwire.errors import StreamwireError
from streamwire.transport.tcp import open_tcp

__all__ = ("DEFAULT_URLS", "StreamFactory", "broker_url", "streamwire_stream", "streamwire_url")

DEFAULT_URLS = {
    "rabbitmq": "rabbitmq-stream://guest:guest@127.0.0.1:5552/",
    "liftbridge": "liftbridge://127.0.0.1:9292?nats=nats://127.0.0.1:4222",
    "iggy": "iggy://iggy:iggy@127.0.0.1:8090",
}

FIXTURES = frozenset({"streamwire_stream", "streamwire_url"})
INSTALL = "pip install 'streamwire[testing]'"
_REQUIRE_OPTION = "--streamwire-require"


class StreamFactory(Protocol):
    """``client, name = await streamwire_stream(broker, **create_stream_options)``."""

    def __call__(
        self, broker: str, **options: Unpack[StreamKwargs]
    ) -> Awaitable[tuple[streamwire.Client, str]]: ...


try:  # async fixtures need pytest-asyncio's decorator in its strict mode
    import pytest_asyncio

    _async_fixture: Callable[[Callable[..., Any]], Any] = pytest_asyncio.fixture
    _HAVE_PYTEST_ASYNCIO = True
except ImportError:  # checked at collection: see pytest_pycollect_makeitem
    _async_fixture = pytest.fixture
    _HAVE_PYTEST_ASYNCIO = False

_required = False
_asyncio_active = _HAVE_PYTEST_ASYNCIO


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streamwire")
    group.addoption(
        _REQUIRE_OPTION,
        action="store_true",
        default=False,
        help="fail, rather than skip, tests whose streamwire broker does not answer "
        "(also: STREAMWIRE_REQUIRE=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    global _required, _asyncio_active
    _asyncio_active = _HAVE_PYTEST_ASYNCIO and config.pluginmanager.has_plugin("asyncio")
    _required = bool(config.getoption(_REQUIRE_OPTION)) or os.environ.get(
        "STREAMWIRE_REQUIRE", ""
    ).lower() in {"1", "true", "yes"}


def _uses_our_fixtures(obj: object) -> bool:
    if not inspect.iscoroutinefunction(obj):
        return False
    try:
        parameters = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return False
    return not FIXTURES.isdisjoint(parameters)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> None:
    """Marks ``async def`` tests that request a streamwire fixture ``asyncio``, so they run
    in pytest-asyncio's strict mode without the marker; says what to install without it."""
    if not _uses_our_fixtures(obj):
        return
    if not _asyncio_active:
        raise pytest.UsageError(
            f"{collector.nodeid}::{name} uses streamwire's async fixtures, which need "
            f"pytest-asyncio: {INSTALL}"
        )
    marks = getattr(obj, "pytestmark", [])
    if not any(getattr(mark, "name", "") == "asyncio" for mark in marks):
        pytest.mark.asyncio(obj)


async def broker_url(broker: str) -> str:
    """The URL for ``broker`` (environment first, then the local default); skips the
    calling test when no broker answers there (fails it with ``--streamwire-require``)."""
    if broker not in DEFAULT_URLS:
        raise pytest.UsageError(f"unknown broker {broker!r}; expected {sorted(DEFAULT_URLS)}")
    url = os.environ.get(f"STREAMWIRE_{broker.upper()}_URL", DEFAULT_URLS[broker])
    parsed = parse_url(url)
    try:
        stream = await open_tcp(parsed.host, parsed.port, timeout=2.0)
    except StreamwireError as exc:
        reason = f"no {broker} broker at {parsed} ({exc})"
        if _required:
            pytest.fail(f"{reason}; {_REQUIRE_OPTION} is set", pytrace=False)
        pytest.skip(reason)
    await stream.aclose()
    return url


@pytest.fixture
def streamwire_url() -> Callable[[str], Awaitable[str]]:
    """``await streamwire_url("rabbitmq")`` -> the broker's URL (or skip)."""
    return broker_url


@_async_fixture
async def streamwire_stream() -> AsyncIterator[StreamFactory]:
    """``client, name = await streamwire_stream("rabbitmq", **create_stream_options)``."""
    made: list[tuple[streamwire.Client, str]] = []

    async def make(broker: str, **options: Unpack[StreamKwargs]) -> tuple[streamwire.Client, str]:
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
