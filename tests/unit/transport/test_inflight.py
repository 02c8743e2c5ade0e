"""InflightTable and CorrelationIds."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from streamwire.errors import (
    BusyError,
    ClosedError,
    ConfigurationError,
    ConnectionClosed,
    DecodeError,
    FrameTooLargeError,
    LocalProtocolError,
    ReadError,
    RequestTimeout,
)
from streamwire.transport import CorrelationIds, InflightTable


async def settle() -> None:
    """Let done-callbacks run."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_register_and_resolve() -> None:
    table: InflightTable[int, str] = InflightTable()
    future = table.register(7)
    assert 7 in table
    assert len(table) == 1
    assert list(table) == [7]
    assert table.resolve(7, "pong")
    assert await future == "pong"
    assert len(table) == 0
    assert 7 not in table


async def test_late_and_unknown_responses_are_dropped_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table: InflightTable[int, str] = InflightTable(name="query")
    caplog.set_level(logging.DEBUG, logger="streamwire.transport.inflight")
    assert not table.resolve(1, "nobody asked")
    future = table.register(2)
    future.cancel()
    assert not table.resolve(2, "too late")
    assert not table.fail(3, ReadError("x"))
    assert caplog.records
    assert all(record.levelno == logging.DEBUG for record in caplog.records)


async def test_duplicate_key_is_local_protocol_error() -> None:
    table: InflightTable[int, None] = InflightTable()
    table.register(1)
    with pytest.raises(LocalProtocolError, match="already in flight"):
        table.register(1)
    table.discard(1)


async def test_bounded() -> None:
    table: InflightTable[int, None] = InflightTable(max_inflight=2)
    first = table.register(1)
    table.register(2)
    assert len(table) == 2
    with pytest.raises(BusyError):
        table.register(3)
    table.resolve(1, None)
    await first
    assert table.has_room
    assert table.has_room
    table.register(3)
    with pytest.raises(BusyError, match="2 requests already in flight"):
        table.register(4)
    table.fail_all(ConnectionClosed())
    with pytest.raises(ConfigurationError):
        InflightTable(max_inflight=0)


async def test_fail_delivers_the_exception_chained() -> None:
    table: InflightTable[int, bytes] = InflightTable()
    future = table.register(5)
    cause = OSError("boom")
    assert table.fail(5, ReadError("failed"), cause=cause)
    with pytest.raises(ReadError) as info:
        await future
    assert info.value.__cause__ is cause


async def test_fail_all_gives_each_waiter_a_fresh_chained_exception() -> None:
    table: InflightTable[int, bytes] = InflightTable()
    futures = [table.register(i) for i in range(3)]
    cause = ReadError("read from b:1 failed")
    assert table.fail_all(ConnectionClosed("connection lost"), cause=cause) == 3
    assert len(table) == 0
    errors = []
    for future in futures:
        with pytest.raises(ConnectionClosed) as info:
            await future
        errors.append(info.value)
    assert len({id(e) for e in errors}) == 3
    for error in errors:
        assert error.reason == "connection lost"
        assert error.__cause__ is cause


async def test_fail_all_copies_exceptions_with_custom_constructors() -> None:
    table: InflightTable[int, bytes] = InflightTable()
    futures = [table.register(i) for i in range(2)]
    template = FrameTooLargeError(10_000, 100)
    table.fail_all(template)
    for future in futures:
        exc = future.exception()
        assert isinstance(exc, FrameTooLargeError)
        assert exc is not template
        assert (exc.size, exc.limit, str(exc)) == (10_000, 100, str(template))
        assert exc.__cause__ is None


async def test_fail_all_accepts_a_factory_and_keeps_template_cause() -> None:
    table: InflightTable[int, bytes] = InflightTable()
    a, b = table.register(1), table.register(2)
    table.fail_all(lambda: DecodeError("frame", 4))
    assert isinstance(a.exception(), DecodeError)
    assert a.exception() is not b.exception()

    c = table.register(3)
    template = ConnectionClosed("gone")
    template.__cause__ = OSError("original")
    table.fail_all(template)
    exc = c.exception()
    assert isinstance(exc, ConnectionClosed)
    assert exc.__cause__ is template.__cause__

    d = table.register(4)
    table.fail_all(ConnectionClosed)  # a class is a factory too
    assert isinstance(d.exception(), ConnectionClosed)


async def test_cancelled_waiter_removes_its_entry() -> None:
    table: InflightTable[int, bytes] = InflightTable()
    future = table.register(9)

    async def waiter() -> bytes:
        return await future

    task = asyncio.create_task(waiter())
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await settle()
    assert 9 not in table
    assert not table.resolve(9, b"late")
    table.register(9)  # the key is free again


async def test_wait_returns_the_response() -> None:
    table: InflightTable[int, bytes] = InflightTable()
    future = table.register(1)
    asyncio.get_running_loop().call_later(0.01, table.resolve, 1, b"ok")
    assert await table.wait(1, future, timeout=5.0) == b"ok"
    # answered before anyone waited (the reader task can be that fast)
    future = table.register(2)
    table.resolve(2, b"early")
    assert await table.wait(2, future, timeout=5.0) == b"early"


async def test_wait_timeout_raises_request_timeout_and_removes_the_entry() -> None:
    table: InflightTable[int, bytes] = InflightTable(name="query offset")
    future = table.register(11)
    with pytest.raises(RequestTimeout, match="query offset 11") as info:
        await table.wait(11, future, timeout=0.05)
    assert isinstance(info.value, TimeoutError)
    assert 11 not in table
    assert not table.resolve(11, b"late")


async def test_wait_passes_errors_through() -> None:
    table: InflightTable[int, bytes] = InflightTable()
    future = table.register(1)
    table.fail(1, RequestTimeout("server-side timeout"))
    with pytest.raises(RequestTimeout, match="server-side"):
        await table.wait(1, future, timeout=None)


async def test_cancelled_wait_removes_the_entry() -> None:
    table: InflightTable[int, bytes] = InflightTable()
    future = table.register(4)
    task = asyncio.create_task(table.wait(4, future, timeout=None))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 4 not in table
    assert future.cancelled()


async def test_discard_and_close() -> None:
    table: InflightTable[str, int] = InflightTable()
    future = table.register("a")
    assert table.discard("a")
    assert future.cancelled()
    assert not table.discard("a")
    pending = table.register("b")
    assert table.close(ConnectionClosed("closing")) == 1
    assert isinstance(pending.exception(), ConnectionClosed)
    with pytest.raises(ClosedError):
        table.register("c")
    assert table.close(ConnectionClosed("again")) == 0
    assert "InflightTable" in repr(table)


# --- CorrelationIds --------------------------------------------------------------------


def test_ids_count_up_from_first() -> None:
    ids = CorrelationIds()
    assert [ids.next() for _ in range(3)] == [1, 2, 3]
    assert next(ids) == 4
    assert next(iter(ids)) == 5


def test_ids_wrap_around_at_the_bit_width() -> None:
    ids = CorrelationIds(bits=32, start=2**32 - 2)
    assert [ids.next() for _ in range(4)] == [2**32 - 2, 2**32 - 1, 1, 2]
    ids31 = CorrelationIds(bits=31, first=0, start=2**31 - 1)
    assert [ids31.next() for _ in range(2)] == [2**31 - 1, 0]


async def test_ids_skip_those_still_in_flight() -> None:
    table: InflightTable[int, None] = InflightTable()
    ids = CorrelationIds(bits=4, in_use=table)  # ids 1..15
    for _ in range(15):
        table.register(ids.next())
    with pytest.raises(BusyError):
        ids.next()
    for key in (3, 7, 15):
        table.resolve(key, None)
    # the counter wrapped to 1; 1 and 2 are in flight, so 3, then 7, then 15
    assert [ids.next() for _ in range(3)] == [3, 7, 15]
    table.fail_all(ConnectionClosed())


def test_ids_with_a_plain_container() -> None:
    ids = CorrelationIds(bits=8, start=254, in_use={255, 1, 2})
    assert [ids.next() for _ in range(3)] == [254, 3, 4]
    assert "CorrelationIds" in repr(ids)


@pytest.mark.parametrize(
    "kwargs",
    [{"bits": 0}, {"bits": 65}, {"bits": 8, "first": 256}, {"first": 5, "start": 4}],
)
def test_ids_invalid_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        CorrelationIds(**kwargs)


async def test_on_done_runs_once_after_the_entry_is_gone() -> None:
    table: InflightTable[int, str] = InflightTable()
    seen: list[tuple[int, str, bool]] = []

    def watcher(key: int) -> Callable[[asyncio.Future[str]], None]:
        def on_done(f: asyncio.Future[str]) -> None:
            seen.append((key, "cancelled" if f.cancelled() else f.result(), key in table))

        return on_done

    first = table.register(1, watcher(1))
    second = table.register(2, watcher(2))
    assert table.resolve(1, "one")
    second.cancel()  # the waiter gave up: the entry goes, and on_done still runs
    await settle()
    assert await first == "one"
    assert seen == [(1, "one", False), (2, "cancelled", False)]
    assert len(table) == 0
