"""``send_batch``'s lazy futures rest on how CPython's ``asyncio.Future`` is built: checked
once at import (``streamwire.transport.pending.LAZY``). This Python passes (else this fails
saying which step broke); a Future that does not allow the late initialisation is reported;
and with the check failed a ledger hands out plain asyncio futures with the same outcomes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamwire.codec.message import Confirmation
from streamwire.errors import ConnectionClosed
from streamwire.transport import pending
from streamwire.transport.pending import LazyFuture, Ledger, lazy_future_problems


def test_this_pythons_future_takes_lazy_futures() -> None:
    assert lazy_future_problems() == ()
    assert pending.LAZY


def _init_nothing(future: Any, *, loop: Any = None) -> None:
    """A ``Future.__init__`` that initialises nothing (asyncio's state stays unset)."""


def _init_refused(future: Any, *, loop: Any = None) -> None:
    raise TypeError("Future.__init__() on an object of another class")


@pytest.mark.parametrize(
    ("init", "named"),
    [
        (_init_nothing, "LazyFuture on this asyncio.Future"),
        (_init_refused, "Future.__init__() on an object of another class"),
    ],
)
def test_a_future_that_cannot_be_made_late_is_reported(init: Any, named: str) -> None:
    problems = lazy_future_problems(init)
    assert len(problems) == 1
    assert named in problems[0]
    assert lazy_future_problems() == ()  # the stand-in was only for that call


async def test_without_lazy_futures_a_ledger_hands_out_plain_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pending, "LAZY", False)
    loop = asyncio.get_running_loop()
    ledger = Ledger(loop, 4, "s", first_id=10, offsets=True)
    futures = ledger.futures()
    assert [type(f) for f in futures] == [asyncio.Future] * 4
    assert not any(isinstance(f, LazyFuture) for f in futures)
    assert all(f.get_loop() is loop and not f.done() for f in futures)
    ledger.confirm(0, 2, first_offset=100, partition=3)
    error = ConnectionClosed("gone")
    assert ledger.fail(1, 3, error) == 2
    got = await asyncio.gather(*futures, return_exceptions=True)
    assert got == [
        Confirmation(10, 100, "s", 3),
        Confirmation(11, 101, "s", 3),
        error,
        error,
    ]
