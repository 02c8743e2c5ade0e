"""A Subscribe stream read off the event loop: one thread per subscription, batched hand-over.

grpc.aio costs one completion-queue round trip and at least one event-loop iteration per
message, so a loop kept busy by other work read about one message per iteration (see
docs/reliability.md). Here a thread iterates the call over grpc's synchronous API, decodes
each message into a ``streamwire.Message`` and appends it to a :class:`Handover`; the loop
is woken only when a consumer waits and no wake-up is pending already, so one wake-up drains
whatever the thread appended meanwhile.

* :class:`Handover`: the bounded buffer between the reading thread and the event loop. The
  thread blocks (``threading.Condition``, polled so that it notices a stop) while it holds
  ``capacity`` messages; gRPC flow control then holds the server back. In a run of messages
  (the loop found two or more queued) a waiting task is woken by ``wake_batch`` messages or
  by its own ``linger`` timer (1 ms), whichever comes first, rather than by the first
  message: a thread and a loop that wake each other per message or two spend most of their
  time handing the GIL back and forth (22 µs of CPU per message against 13 µs, measured in
  docs/benchmarks/notes/2026-11.md). The first message after a quiet spell still wakes the
  loop at once.
* :class:`Subscription`: one call and its thread. ``ready`` resolves at the server's
  handshake (the empty first message), ``finished`` with how the stream ended; ``stop``
  cancels the call (the blocked iterator raises) and waits, bounded, for the thread to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import traceback
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final, Generic, Protocol, TypeVar

import grpc

from streamwire.errors import (
    ClosedError,
    ConnectionClosed,
    DecodeError,
    RequestTimeout,
    UnindexedRecordsError,
)
from streamwire.liftbridge._grpc import RpcFailed, translate
from streamwire.liftbridge.protocol.messages import decode_message

__all__ = (
    "ENDED",
    "STOPPED",
    "OffsetRegression",
    "THREAD_NAME",
    "UNDECODABLE",
    "Handover",
    "Outcome",
    "Subscription",
    "handshake",
)

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

#: How often a thread blocked on a full buffer looks at its stop flag (it is also notified).
_ROOM_POLL: Final = 0.1
#: How often ``Subscription.stop`` looks whether the thread has ended.
_JOIN_POLL: Final = 0.002
#: Bound on the events ``_drain`` consumes (a cancelled call has one or two pending).
_MAX_DRAIN: Final = 8
#: How long a task waiting in a run of messages lets them gather before it looks (at most).
LINGER: Final = 0.001
#: In a run of messages, a waiting task is woken once this many are buffered (at most a
#: quarter of the buffer's capacity), or by its linger timer.
WAKE_BATCH: Final = 256
#: Reading threads are named ``f"{THREAD_NAME} <stream>/<partition>"``.
THREAD_NAME: Final = "streamwire-liftbridge-subscription"


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


ENDED: Final = _Marker("ENDED")
"""The server ended the stream normally."""
STOPPED: Final = _Marker("STOPPED")
"""The subscription was stopped locally (closing)."""
UNDECODABLE: Final = _Marker("UNDECODABLE")
"""A message did not decode as ``liftbridge.Message``; the call was cancelled."""


class OffsetRegression:
    """The server sent a message at ``offset`` after the one at ``expected - 1``: offsets
    it handed out already, so the messages read at ``offset .. expected - 1`` were records
    its log holds past its index (a crash between writing them to its log and to its
    index). The subscription ends (its call is cancelled)."""

    __slots__ = ("expected", "offset")

    def __init__(self, expected: int, offset: int) -> None:
        self.expected = expected
        self.offset = offset

    def __repr__(self) -> str:
        return f"OffsetRegression(expected={self.expected}, offset={self.offset})"

    def error(self, what: str, stream: str, partition: int) -> UnindexedRecordsError:
        """The typed error for the consumer ``what`` reading ``stream``/``partition``."""
        first, last = self.offset, self.expected - 1
        count = max(last - first + 1, 0)
        return UnindexedRecordsError(
            f"{what}: the Liftbridge server sent offset {first} after offset {last}: its log "
            f"holds records past the offsets it reports, under offsets it has given again to "
            f"later messages. It lost their index entries in a crash between writing them to "
            f"its log and to its index, and acknowledged none of them (docs/liftbridge.md, "
            f"'After a crash'). The {count} messages handed out at offsets {first}..{last} "
            f"were such records; the message now at offset {first} and those after it are "
            f"what the server reports. Read from offset {first} on with a new consumer for "
            f"them; the partition's log stays so: copy what you need into a new stream",
            stream,
            partition,
            first,
            count,
        )


Outcome = _Marker | OffsetRegression | RpcFailed | Exception
"""How a subscription ended: a marker, an offset sent twice, the RPC's status, or a bug
(any other exception)."""


class Handover(Generic[_T]):
    """A bounded buffer from reading threads to the event loop.

    ``put`` (any thread) blocks while ``capacity`` items are held. The loop side takes items
    in batches with ``take``/``get``; a thread wakes the loop (``call_soon_threadsafe``) only
    when a task waits in ``get`` and no wake-up is pending, and counts it in ``wakeups``.
    A task that waits in a run of items (the last ``take`` found two or more, and no linger
    came back empty since) lingers: the thread wakes it only once ``wake_batch`` items are
    buffered, otherwise its own timer does after ``linger`` seconds; a task that waits after
    a quiet spell is woken by the first item. ``finish`` (loop side) queues one last item
    after the buffered ones (an end marker or the error that ends consumption); afterwards
    ``put`` refuses everything.
    """

    def __init__(
        self, capacity: int, *, linger: float = LINGER, wake_batch: int | None = None
    ) -> None:
        self.capacity = capacity
        self.linger = linger
        self.wake_batch = max(
            1, min(WAKE_BATCH, capacity // 4) if wake_batch is None else wake_batch
        )
        self._eager = 0  # waiting tasks that want the first item at once
        self._run = False  # the loop side is in a run of items: it lingers when it waits
        self._items: deque[_T] = deque()
        self._final: _T | None = None
        self._finished = False
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._waiters: list[asyncio.Future[None]] = []
        self._wake_pending = False
        self.wakeups = 0
        """Hand-over callbacks the event loop ran (each drains every item appended so far)."""
        self.received_bytes = 0
        """Bytes of the messages the reading threads handed over, as the server sent them
        (one thread at a time writes it; the loop reads it for the consumer's stats)."""
        self.room_listeners: set[Callable[[], None]] = set()
        """Called (on the loop) after ``take`` made room: readers on the event loop (the
        HTTP/2 subscriptions) credit the server back then."""

    def __len__(self) -> int:
        """Items buffered (the final item not counted)."""
        return len(self._items)

    # --- the reading thread ----------------------------------------------------------

    def put(self, item: _T, stop: threading.Event, nbytes: int = 0) -> bool:
        """Append ``item`` (``nbytes`` as received, counted with it: a consumer never sees
        the item before its bytes), waiting while the buffer is full. False (``item``
        dropped) once ``stop`` is set, after ``finish``, or when the event loop is gone."""
        with self._lock:
            while len(self._items) >= self.capacity and not stop.is_set() and not self._finished:
                self._room.wait(_ROOM_POLL)
            if stop.is_set() or self._finished:
                return False
            self._items.append(item)
            self.received_bytes += nbytes
            loop = None
            if (
                self._waiters
                and not self._wake_pending
                and (self._eager or len(self._items) >= self.wake_batch)
            ):
                self._wake_pending = True
                loop = self._waiters[0].get_loop()
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._wake)
            except RuntimeError:  # the event loop is closed: nobody will take anything
                return False
        return True

    def offer(self, items: list[_T], nbytes: int) -> bool:
        """On the event loop: append ``items`` (``nbytes`` as received) without waiting.
        Waiting tasks are woken as ``put`` wakes them (a task that waits after a quiet spell
        at once, one in a run of items once ``wake_batch`` are buffered or by its linger
        timer; counted in ``wakeups``). False (nothing appended) after ``finish``. The
        caller keeps the buffer bounded by holding the server back while ``room()`` is
        False."""
        with self._lock:
            if self._finished:
                return False
            self._items.extend(items)
            self.received_bytes += nbytes
            if not self._waiters or not (self._eager or len(self._items) >= self.wake_batch):
                return True
        self._wake()
        return True

    def room(self) -> bool:
        """Whether fewer than ``capacity`` items are buffered."""
        return len(self._items) < self.capacity

    def release(self) -> None:
        """Wake threads blocked in ``put`` so that they look at their stop flag."""
        with self._lock:
            self._room.notify_all()

    # --- the event loop --------------------------------------------------------------

    def _wake(self) -> None:
        with self._lock:
            self._wake_pending = False
            waiters, self._waiters = self._waiters, []
            self._eager = 0
        self.wakeups += 1
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def ready(self) -> bool:
        """Whether ``take`` would return something."""
        return bool(self._items) or self._final is not None

    def take(self, limit: int) -> list[_T]:
        """Up to ``limit`` items without waiting; the final item comes after all others."""
        with self._lock:
            items = self._items
            if len(items) > 1:
                self._run = True
            count = min(limit, len(items))
            out = [items.popleft() for _ in range(count)]
            if count:
                self._room.notify()
            if count < limit and not items and self._final is not None:
                out.append(self._final)
                self._final = None
        if count and self.room_listeners:
            for listener in tuple(self.room_listeners):
                listener()
        return out

    async def get(self, limit: int, timeout: float | None) -> list[_T]:
        """Up to ``limit`` items, waiting at most ``timeout`` seconds for the first one
        (an empty list if none came). Cancellation: nothing is taken."""
        out = self.take(limit)
        if out:
            return out
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                while not out:
                    lingering = self._run and self.linger > 0
                    waiter: asyncio.Future[None] = loop.create_future()
                    with self._lock:
                        idle = not self._items and self._final is None
                        if idle:
                            self._waiters.append(waiter)
                            self._eager += not lingering
                    if idle:
                        timer = (
                            loop.call_later(self.linger, _resolve, waiter, None)
                            if lingering
                            else None
                        )
                        try:
                            await waiter
                        finally:
                            if timer is not None:
                                timer.cancel()
                            with self._lock, contextlib.suppress(ValueError):
                                self._waiters.remove(waiter)
                                self._eager -= not lingering
                    out = self.take(limit)
                    if lingering and not out:
                        self._run = False  # the run is over: the next wait is woken at once
        except TimeoutError:
            pass
        return out

    def finish(self, item: _T) -> None:
        """Queue ``item`` after everything buffered as the last one (the first call wins),
        refuse further ``put``s, and wake waiting tasks and threads."""
        with self._lock:
            if not self._finished:
                self._finished = True
                self._final = item
            waiters, self._waiters = self._waiters, []
            self._eager = 0
            self._room.notify_all()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _drain(call: Any) -> None:
    """Consume what is left of a cancelled call's events.

    A single-threaded stream call (``SingleThreadedUnaryStream``) only makes progress when
    its own thread consumes its events; once cancelled, iterating it raises at once, so the
    final status event stays unconsumed, and grpc (1.85) then keeps the channel's HTTP/2
    connection open for good, even after the channel is closed and the call freed
    (``tests/integration/liftbridge/test_faults.py`` found the socket). Nothing public
    consumes it, hence the private ``_consume_next_event``/``_state.due`` of grpc's
    ``_SingleThreadedRendezvous``; without them (another call type, another grpc) this
    does nothing. After a cancel the core completes every pending operation at once.
    """
    consume = getattr(call, "_consume_next_event", None)
    due = getattr(getattr(call, "_state", None), "due", None)
    if consume is None or not isinstance(due, set):
        return
    for _ in range(_MAX_DRAIN):  # one event per pending batch: a couple at most
        if not due:
            return
        try:
            consume()
        except Exception as exc:  # best effort: the call is over either way
            logger.debug("draining a cancelled subscription call failed: %r", exc)
            return


def _resolve(future: asyncio.Future[Any], value: object) -> None:
    if not future.done():
        future.set_result(value)


class Subscription:
    """One Subscribe call read by its own thread into ``handover``.

    ``open_call`` runs in the thread and returns the synchronous call (iterating it yields
    each response's bytes; ``cancel()`` works from any thread). The first message is the
    server's handshake; later ones below ``skip_below`` are dropped (the server starts at
    its high watermark + 1 when asked for an offset beyond it).
    """

    def __init__(
        self,
        open_call: Callable[[], Any],
        handover: Handover[Any],
        *,
        loop: asyncio.AbstractEventLoop,
        skip_below: int,
        server_headers: bool,
        name: str,
    ) -> None:
        self._open_call = open_call
        self._handover = handover
        self._loop = loop
        self._skip_below = skip_below
        self._server_headers = server_headers
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._call: Any = None
        self.next_offset: int | None = None
        """The offset after the last message handed over (None before the first)."""
        self.delivered = 0
        """Messages handed over."""
        self.ready: asyncio.Future[Outcome | None] = loop.create_future()
        """None at the handshake, or the outcome if the stream ended before it."""
        self.finished: asyncio.Future[Outcome] = loop.create_future()
        """How the stream ended; resolved just before the thread ends."""
        self.thread = threading.Thread(target=self._run, name=f"{THREAD_NAME} {name}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def cancel(self) -> None:
        """Stop reading: cancel the call (the blocked iterator raises) and wake the thread if
        it waits for room. From any thread; idempotent; returns at once."""
        with self._lock:
            self._stop.set()
            call = self._call
        if call is not None:
            call.cancel()
        self._handover.release()

    async def stop(self, timeout: float) -> bool:
        """``cancel``, then wait up to ``timeout`` seconds for the thread to end (polled: a
        ``join`` would block the loop, ``asyncio.to_thread`` would park a pool thread).
        False if it is still running then (it is a daemon thread; it is logged)."""
        self.cancel()
        if self.thread.ident is None:  # never started
            return True
        deadline = self._loop.time() + timeout
        await asyncio.wait({self.finished}, timeout=timeout)
        while self.thread.is_alive():
            if self._loop.time() >= deadline:
                logger.warning("%s did not end within %s s", self.thread.name, timeout)
                return False
            await asyncio.sleep(_JOIN_POLL)
        return True

    def _post(self, future: asyncio.Future[Any], value: object) -> None:
        with contextlib.suppress(RuntimeError):  # the event loop is closed
            self._loop.call_soon_threadsafe(_resolve, future, value)

    def _run(self) -> None:
        outcome: Outcome = STOPPED
        call: Any = None
        try:
            call = self._open_call()
            with self._lock:
                self._call = call
                stopped = self._stop.is_set()
            if stopped:
                call.cancel()
            outcome = self._pump(call)
        except grpc.RpcError as exc:
            outcome = RpcFailed.of(exc)  # the exception is the call itself: do not keep it
            # ... and its traceback's frames hold the call: a cycle only gc would break
            exc.with_traceback(None)
        except Exception as exc:
            # keep where it happened, not the frames' locals (they hold the call)
            traceback.clear_frames(exc.__traceback__)
            outcome = exc
        finally:
            if self._stop.is_set() and not isinstance(outcome, OffsetRegression):
                outcome = STOPPED
            with self._lock:
                self._call = None
            if call is not None:
                call.cancel()  # a no-op on an ended call; ends one this thread stopped reading
                _drain(call)
            call = None  # a bug's traceback holds this frame: it must not hold the call
            self._post(self.ready, outcome)
            self._post(self.finished, outcome)

    def _pump(self, call: Any) -> Outcome:
        handover, stop = self._handover, self._stop
        skip_below, server_headers = self._skip_below, self._server_headers
        handshake = True
        expected = -1  # the offset after the last message handed over
        for raw in call:
            if stop.is_set():
                return STOPPED
            try:
                msg = decode_message(raw, server_headers=server_headers)
            except DecodeError:
                return UNDECODABLE
            if handshake:
                handshake = False
                self._post(self.ready, None)
                continue
            offset = msg.offset or 0  # always set: a subscribed message has its offset
            if offset < expected:
                return OffsetRegression(expected, offset)
            if offset < skip_below:
                continue
            if not handover.put(msg, stop, len(raw)):
                return STOPPED
            self.next_offset = expected = offset + 1
            self.delivered += 1
        return ENDED


class _Startable(Protocol):
    ready: asyncio.Future[Outcome | None]

    def start(self) -> None: ...


_S = TypeVar("_S", bound=_Startable)


async def handshake(
    sub: _S, *, timeout: float | None, what: str, end: Callable[[], Awaitable[object]]
) -> _S:
    """Start ``sub`` and wait (at most ``timeout`` seconds) for its handshake: the first
    response of the Subscribe stream. Anything else ends it (``end()``, bounded) and raises
    what the outcome means, as a streamwire error naming ``what``."""
    sub.start()
    try:
        async with asyncio.timeout(timeout):
            outcome = await sub.ready
    except TimeoutError as exc:
        await end()
        raise RequestTimeout(f"{what}: no handshake in time") from exc
    except BaseException:
        await end()
        raise
    if outcome is None:
        return sub
    await end()  # it ended before its handshake: the thread is ending
    if isinstance(outcome, RpcFailed):
        raise translate(outcome, what) from outcome
    if outcome is UNDECODABLE:
        raise DecodeError("liftbridge.Message", frame=f"the handshake of {what}")
    if outcome is STOPPED:
        raise ClosedError(f"{what}: closed")
    if isinstance(outcome, Exception):
        raise ConnectionClosed(f"{what} failed: {outcome!r}") from outcome
    raise ConnectionClosed(f"{what}: the stream ended at once")
