"""The pieces the producers and consumers share: wait_for_bytes (room for one message),
wait_flushed (flush) and AutoCommit (when a named consumer stores its offset)."""

from __future__ import annotations

import asyncio

import pytest

from streamwire.errors import (
    ConfigurationError,
    FlushTimeout,
    ProducerBufferFull,
    RequestTimeout,
)
from streamwire.transport.resources import AutoCommit, wait_flushed, wait_for_bytes


async def test_a_message_that_can_never_fit_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="101-byte"):
        await wait_for_bytes(
            101,
            5,
            has_room=lambda n: False,
            wake=asyncio.Event(),
            max_bytes=100,
            check=lambda: None,
            what="s",
        )


async def test_room_for_bytes_times_out_naming_the_producer() -> None:
    with pytest.raises(ProducerBufferFull, match=r"'orders' stayed full for 0\.02 s"):
        async with asyncio.timeout(5):
            await wait_for_bytes(
                10,
                0.02,
                has_room=lambda n: False,
                wake=asyncio.Event(),
                max_bytes=100,
                check=lambda: None,
                what="orders",
            )


async def test_room_for_bytes_asks_with_the_message_size() -> None:
    asked: list[int] = []

    def has_room(n: int) -> bool:
        asked.append(n)
        return True

    await wait_for_bytes(
        42,
        0,
        has_room=has_room,
        wake=asyncio.Event(),
        max_bytes=100,
        check=lambda: None,
        what="s",
    )
    assert asked == [42]


async def test_flushed_raises_the_first_failure_once() -> None:
    idle = asyncio.Event()
    idle.set()
    failures: list[BaseException | None] = [ValueError("first"), None]

    def take() -> BaseException | None:
        return failures.pop(0)

    with pytest.raises(ValueError, match="first"):
        await wait_flushed(idle, 5, pending=lambda: 0, take_failure=take)
    await wait_flushed(idle, 5, pending=lambda: 0, take_failure=take)


async def test_flushed_times_out_naming_what_is_pending() -> None:
    with pytest.raises(FlushTimeout, match=r"3 messages unconfirmed after 0\.02 s"):
        async with asyncio.timeout(5):
            await wait_flushed(asyncio.Event(), 0.02, pending=lambda: 3, take_failure=lambda: None)


async def test_flushed_keeps_an_error_of_the_first_step() -> None:
    async def first() -> None:
        raise RequestTimeout("the NATS flush timed out")

    with pytest.raises(RequestTimeout, match="NATS"):
        async with asyncio.timeout(5):
            await wait_flushed(
                asyncio.Event(), 5, pending=lambda: 0, take_failure=lambda: None, first=first
            )


def test_auto_commit_by_count() -> None:
    auto = AutoCommit(3, None)
    assert auto.enabled
    owed = [auto.owed]
    assert [auto.handed_out(1) for _ in range(3)] == [False, False, True]
    owed.append(auto.owed)
    auto.stored()
    owed.append(auto.owed)
    assert owed == [False, True, False]
    assert not auto.handed_out(2)
    assert auto.handed_out(5)


def test_auto_commit_by_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr("streamwire.transport.resources.time.monotonic", lambda: now[0])
    auto = AutoCommit(None, 2.0)
    assert not auto.handed_out(1)  # the interval starts at the first message
    now[0] = 101.0
    assert not auto.handed_out(1)
    now[0] = 102.0
    assert auto.handed_out(1)
    auto.stored()
    now[0] = 103.0
    assert not auto.handed_out(1)  # a new interval starts


def test_without_auto_commit_nothing_is_due_but_counts_are_kept() -> None:
    auto = AutoCommit(None, None)
    assert not auto.enabled
    assert not auto.handed_out(1000)
    assert auto.uncommitted == 1000
    assert not auto.owed
