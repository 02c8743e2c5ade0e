"""Fixtures for the Iggy integration tests, on every lane (``tests/iggy_lanes.py``): the
conformance double as the notes describe it, the double with a real sharded server's habits,
and the real server the harness started (skipped with its reason when there is none).

Tests that need the double's internals (its state, injected faults, a restart) ask for
``double``, which skips on the real lane. On the real lane every stream is deleted before
and after each test: the harness's server belongs to the tests, and fixed names
(``"orders/eu"``) must not meet a leftover.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import streamwire.iggy as iggy
from tests.iggy_double import IggyDouble
from tests.iggy_lanes import LANES, Lane, lane


async def _delete_every_stream(url: str) -> None:
    async with await iggy.connect(url, timeout=10, reconnect=None) as admin:
        for stream in await admin.streams():
            await admin.delete_stream(stream.name, missing_ok=True)


@pytest.fixture(params=LANES)
async def server(request: pytest.FixtureRequest) -> AsyncIterator[Lane]:
    async with lane(request.param) as found:
        if found.is_real:
            await _delete_every_stream(found.url)
        yield found
        if found.is_real:
            await _delete_every_stream(found.url)


@pytest.fixture
def double(server: Lane) -> IggyDouble:
    if server.double is None:
        pytest.skip("needs the conformance double's internals (state, faults, restarts)")
    return server.double


@pytest.fixture
async def client(server: Lane) -> AsyncIterator[iggy.Client]:
    c = await iggy.connect(server.url, timeout=5, request_timeout=10, reconnect=None)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def wheel(server: Lane) -> Any:
    """The official client, connected and logged in as iggy/iggy."""
    apache_iggy = pytest.importorskip("apache_iggy")
    c = apache_iggy.IggyClient(server.address)
    await c.connect()
    await c.login_user("iggy", "iggy")
    return c
