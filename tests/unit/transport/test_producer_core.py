"""transport/producer_core.py: what the three producers share, on a producer with no wire."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from streamwire.errors import ClosedError, ConfigurationError, FlushTimeout, ProducerBufferFull
from streamwire.transport.producer_core import ProducerCore, and_wait


@dataclass(frozen=True)
class _Options:
    max_block: float | None = 5.0
    confirm_timeout: float | None = 5.0


class _Producer(ProducerCore):
    """Accepts into a list of futures, room for ``room`` of them."""

    def __init__(self, *, room: int = 2, max_bytes: int | None = None) -> None:
        super().__init__("s", max_bytes)
        self.options = _Options()
        self.room = room
        self.futures: list[asyncio.Future[int]] = []
        self.accepted = asyncio.Event()
        self.sent: list[tuple[bytes, int | None, float | None]] = []
        self.aborted = 0
        self.wire_closed = False

    async def start(self) -> _Producer:
        return self

    def _is_started(self) -> bool:
        return True

    @property
    def pending(self) -> int:
        return sum(not f.done() for f in self.futures)

    def _has_room(self, size: int) -> bool:
        return self.pending < self.room

    def abort(self) -> None:
        self.aborted += 1
        self._closed = True

    async def _close_wire(self) -> None:
        self.wire_closed = True

    def _fail_pending(self, exc: BaseException) -> None:
        for future in self.futures:
            if not future.done():
                future.set_exception(exc)

    async def send(
        self, value: bytes, *, partition: int | None = None, timeout: float | None = None
    ) -> asyncio.Future[int]:
        self._check()
        await self._wait_for_room(len(value), timeout)
        self.sent.append((value, partition, timeout))
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        self._idle.clear()
        self.accepted.set()
        return future

    send_and_wait = and_wait(send)


async def test_send_and_wait_passes_send_its_arguments_but_the_timeout() -> None:
    producer = _Producer()
    waiting = asyncio.create_task(producer.send_and_wait(b"abc", partition=3, timeout=5.0))
    await producer.accepted.wait()
    producer.futures[0].set_result(42)
    assert await waiting == 42
    assert producer.sent == [(b"abc", 3, None)]


async def test_send_and_wait_times_out_as_a_flush_timeout() -> None:
    producer = _Producer()
    with pytest.raises(FlushTimeout, match=r"no confirmation within 0\.01 s"):
        await producer.send_and_wait(b"abc", timeout=0.01)
    assert not producer.futures[0].done()  # the message is not cancelled


async def test_room_in_messages_names_what_stays_unacknowledged() -> None:
    producer = _Producer(room=1)
    await producer.send(b"a")
    with pytest.raises(ProducerBufferFull, match=r"1 messages to 's' stayed unacknowledged"):
        await producer.send(b"b", timeout=0.01)


async def test_room_in_bytes_refuses_a_message_that_can_never_fit() -> None:
    producer = _Producer(room=0, max_bytes=2)
    with pytest.raises(ConfigurationError, match="3-byte"):
        await producer.send(b"abc")


async def test_a_fatal_failure_fails_everything_and_every_later_call() -> None:
    producer = _Producer()
    first = await producer.send(b"a")
    producer._fail_all(ClosedError("gone"))
    with pytest.raises(ClosedError, match="gone"):
        await first
    with pytest.raises(ClosedError, match="gone"):
        await producer.send(b"b")
    with pytest.raises(ClosedError, match="gone"):
        await producer.flush()


async def test_flush_raises_the_first_failure_once() -> None:
    producer = _Producer()
    producer._note_failure(ValueError("first"))
    producer._note_failure(ValueError("second"))
    with pytest.raises(ValueError, match="first"):
        await producer.flush()
    await producer.flush()


async def test_close_after_a_flush_that_times_out_closes_the_wire_and_aborts() -> None:
    producer = _Producer()
    await producer.send(b"a")
    await producer.close(timeout=0.01)
    assert producer.wire_closed
    assert producer.aborted == 1
    await producer.close()  # idempotent
    assert producer.aborted == 1


async def test_a_cancelled_close_still_aborts() -> None:
    producer = _Producer()
    await producer.send(b"a")
    closing = asyncio.create_task(producer.close())
    await asyncio.sleep(0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert producer.aborted == 1
    assert not producer.wire_closed
