"""Fixtures for the double-backed Iggy tests: a fresh loopback double per test, in each of its
modes (as the notes describe, and with a real sharded server's habits), a streamwire client
and an official apache-iggy 0.9.0 client logged in to it. No external broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import streamwire.iggy as iggy
from tests.iggy_double import HABITS, Habits, IggyDouble


@pytest.fixture(params=HABITS)
async def double(request: pytest.FixtureRequest) -> AsyncIterator[IggyDouble]:
    habits: Habits = request.param
    async with IggyDouble(habits=habits) as server:
        yield server


@pytest.fixture
async def client(double: IggyDouble) -> AsyncIterator[iggy.Client]:
    c = await iggy.connect(double.url, timeout=5, request_timeout=5, reconnect=None)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def wheel(double: IggyDouble) -> Any:
    """The official client, connected and logged in as iggy/iggy."""
    apache_iggy = pytest.importorskip("apache_iggy")
    c = apache_iggy.IggyClient(double.address)
    await c.connect()
    await c.login_user("iggy", "iggy")
    return c
