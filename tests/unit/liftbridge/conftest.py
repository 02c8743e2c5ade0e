"""Fixtures of the Liftbridge unit tests."""

from __future__ import annotations

import pytest

from streamwire.liftbridge._acks import AckRouter

from .support import FakeLink


@pytest.fixture
async def router() -> tuple[AckRouter, FakeLink]:
    """A started ack router on a fake NATS link (``FakeLink.deliver`` hands it acks)."""
    link = FakeLink()
    r = AckRouter(link)
    await r.start()
    return r, link
