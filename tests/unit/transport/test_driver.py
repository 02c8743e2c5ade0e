"""The shared connection driver over a toy sans-IO machine and a ScriptedStream: the reader
and the timer feed the machine, requests in flight are answered or failed, the end reaches
every waiter and listener (a listener's bug stops no one), close is cancellation-safe."""

from __future__ import annotations

import asyncio

import pytest

from streamwire.errors import ClosedError, ConnectionClosed, StreamwireError
from streamwire.transport.driver import Driver
from streamwire.transport.scripted import ScriptedStream

Event = tuple[str, int]


class Toy:
    """Lines in: ``"<id>"`` answers request ``id``, ``"bye"`` ends; the clock: a tick is due
    at :attr:`deadline`, and each tick queues ``b"tick\\n"``."""

    def __init__(self) -> None:
        self.deadline: float | None = None
        self.out = bytearray()
        self.ticks = 0

    def receive_data(self, data: bytes, now: float) -> list[Event]:
        if not data:
            return [("eof", 0)]
        return [("bye", 0) if x == b"bye" else ("reply", int(x)) for x in data.split()]

    def advance_time(self, now: float) -> list[Event]:
        if self.deadline is None or now < self.deadline:
            return []
        self.deadline = None
        self.ticks += 1
        self.out += b"tick\n"
        return [("tick", self.ticks)]

    def next_deadline(self) -> float | None:
        return self.deadline

    def data_to_send(self) -> bytes:
        out, self.out = bytes(self.out), bytearray()
        return out


class ToyConnection(Driver[Toy, Event, int]):
    wire = "toy"

    def __init__(self, stream: ScriptedStream) -> None:
        super().__init__(stream, Toy(), "toy:1")
        self.events: list[Event] = []
        self.goodbye = asyncio.Event()
        self.said_goodbye = False

    def _dispatch(self, events: list[Event]) -> None:
        for kind, value in events:
            self.events.append((kind, value))
            if kind == "reply":
                self._inflight.resolve(value, f"answer {value}")
            elif kind == "bye":
                self._fail(ConnectionClosed("the peer said bye"))
            elif kind == "eof":
                self._fail(ConnectionClosed("end of stream"))

    async def _goodbye(self, timeout: float) -> None:
        self.said_goodbye = True
        await self.goodbye.wait()

    async def ask(self, key: int) -> object:
        future = self._inflight.register(key)
        return await self._inflight.wait(key, future, 5)


@pytest.fixture
async def conn() -> ToyConnection:
    c = ToyConnection(ScriptedStream(name="toy"))
    c._start_tasks()
    return c


async def test_replies_resolve_and_the_end_fails_each_waiter_with_its_own_error(
    conn: ToyConnection,
) -> None:
    stream = conn._stream
    assert isinstance(stream, ScriptedStream)
    first = asyncio.create_task(conn.ask(1))
    others = [asyncio.create_task(conn.ask(k)) for k in (2, 3)]
    await asyncio.sleep(0)
    stream.feed(b"1")
    assert await asyncio.wait_for(first, 5) == "answer 1"
    stream.feed(b"bye")
    errors = []
    for task in others:
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(task, 5)
        errors.append(info.value)
    assert errors[0] is not errors[1]
    assert all(e.__cause__ is conn.error for e in errors)
    assert isinstance(conn.error, ConnectionClosed)
    async with asyncio.timeout(5):
        await conn._closed.wait()
    await conn.close()


async def test_a_failing_listener_stops_no_one(conn: ToyConnection) -> None:
    heard: list[StreamwireError] = []

    def broken(exc: StreamwireError) -> None:
        raise RuntimeError("listener bug")

    conn.on_lost += [broken, heard.append]
    stream = conn._stream
    assert isinstance(stream, ScriptedStream)
    stream.feed_eof()
    async with asyncio.timeout(5):
        await conn._closed.wait()
    assert heard == [conn.error]
    assert stream.closed
    await conn.close()


async def test_the_timer_wakes_the_machine_at_its_deadline(conn: ToyConnection) -> None:
    stream = conn._stream
    assert isinstance(stream, ScriptedStream)
    conn.machine.deadline = asyncio.get_running_loop().time() + 0.01
    conn._wakeup.set()
    assert await stream.wait_written(5, timeout=5) == b"tick\n"
    assert ("tick", 1) in conn.events
    conn.goodbye.set()
    await conn.close()


async def _timer_sleeping(conn: ToyConnection) -> None:
    """Let the timer task reach its wait."""
    for _ in range(20):
        await asyncio.sleep(0)


async def test_only_an_earlier_deadline_wakes_the_timer(conn: ToyConnection) -> None:
    stream = conn._stream
    assert isinstance(stream, ScriptedStream)
    loop = asyncio.get_running_loop()
    conn.machine.deadline = loop.time() + 3600
    conn._wakeup.set()
    await _timer_sleeping(conn)
    assert conn._timer_until == pytest.approx(conn.machine.deadline, abs=60)
    assert not conn._wakeup.is_set()
    conn.machine.deadline += 10  # later than the timer's: it need not wake now
    conn._deadline_moved()
    assert not conn._wakeup.is_set()
    conn.machine.deadline = loop.time() + 0.01  # earlier: it must
    conn._deadline_moved()
    assert conn._wakeup.is_set()
    assert await stream.wait_written(5, timeout=5) == b"tick\n"
    await _timer_sleeping(conn)
    assert conn._timer_until is None  # no deadline, no idle wait: until woken
    conn.machine.deadline = loop.time() + 3600  # any deadline is earlier than never
    conn._deadline_moved()
    assert conn._wakeup.is_set()
    conn.goodbye.set()
    await conn.close()


async def test_close_says_goodbye_then_drops_everything(conn: ToyConnection) -> None:
    stream = conn._stream
    assert isinstance(stream, ScriptedStream)
    pending = asyncio.create_task(conn.ask(7))
    await asyncio.sleep(0)
    closing = asyncio.create_task(conn.close())
    await asyncio.sleep(0)
    assert conn.said_goodbye
    conn.goodbye.set()
    async with asyncio.timeout(5):
        await closing
    with pytest.raises(ClosedError):
        await asyncio.wait_for(pending, 5)
    assert stream.closed
    assert all(task.done() for task in conn._tasks)
    with pytest.raises(ClosedError):
        conn.check()


async def test_a_cancelled_close_aborts(conn: ToyConnection) -> None:
    stream = conn._stream
    assert isinstance(stream, ScriptedStream)
    closing = asyncio.create_task(conn.close(timeout=30))
    await asyncio.sleep(0)
    assert conn.said_goodbye  # waiting for the peer's answer
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await closing
    assert stream.aborted
    assert isinstance(conn.error, ClosedError)
    async with asyncio.timeout(5):
        await conn.close()  # again: waits for the tasks to end
    assert all(task.done() for task in conn._tasks)


async def test_a_bug_in_the_timer_ends_the_connection_loudly(
    conn: ToyConnection, caplog: pytest.LogCaptureFixture
) -> None:
    """The timer drives heartbeats and deadlines: a foreign exception there used to end the
    timer task quietly while the connection lived on, so a dead link went unnoticed. Now the
    connection ends with ConnectionClosed (its cause kept) and every waiter hears it."""

    def broken(now: float) -> list[Event]:
        raise RuntimeError("machine bug")

    waiting = asyncio.create_task(conn.ask(7))
    await asyncio.sleep(0)
    conn.machine.advance_time = broken  # type: ignore[method-assign]
    conn.machine.deadline = asyncio.get_running_loop().time()
    conn._wakeup.set()
    with pytest.raises(ConnectionClosed, match="timer failed"):
        await asyncio.wait_for(waiting, 5)
    assert isinstance(conn.error, ConnectionClosed)
    assert isinstance(conn.error.__cause__, RuntimeError)
    assert "toy timer for toy:1 failed" in caplog.text
    await conn.close()
