"""One asyncio connection driver over any sans-IO machine (RabbitMQ Streams, Iggy).

The machine takes bytes and the time in and gives events and bytes out; this core owns what
is the same for every wire:

* a reader task: read, feed the machine, hand its events to the broker's ``_dispatch``;
* a timer task: sleep until the machine's next deadline (heartbeats, reply timeouts), wake
  it, dispatch what it says;
* requests awaiting replies, in an :class:`~streamwire.transport.inflight.InflightTable`;
* the end: one recorded reason, given to every waiter (each its own copy) and every
  listener (a listener's bug is logged and never stops the others);
* a cancellation-safe :meth:`Driver.close` (clean goodbye, then :meth:`Driver.abort` in a
  ``finally``) and an immediate :meth:`Driver.abort`.

A broker's connection subclasses :class:`Driver` and adds only its wire: the handshake,
``_dispatch`` (what each event means), ``_goodbye`` (Close, Logout) and its listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Hashable, Iterable
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from streamwire.codec._structs import BytesLike
from streamwire.errors import ClosedError, ConnectionClosed, StreamwireError
from streamwire.transport.base import ByteStream
from streamwire.transport.inflight import InflightTable
from streamwire.transport.tasks import cancel_now, cancel_tasks

__all__ = ("Driver", "Machine")

logger = logging.getLogger(__name__)

E = TypeVar("E")
K = TypeVar("K", bound=Hashable)
M = TypeVar("M", bound="Machine[Any]")
E_m = TypeVar("E_m")


class Machine(Protocol[E_m]):
    """What the driver needs of a sans-IO machine."""

    def receive_data(self, data: bytes, now: float) -> list[E_m]: ...

    def advance_time(self, now: float) -> list[E_m]: ...

    def next_deadline(self) -> float | None: ...

    def data_to_send(self) -> BytesLike: ...


class Driver(Generic[M, E, K]):
    """A connection's stream, machine, tasks and waiters; see the module notes.

    ``M`` is the machine, ``E`` its events and ``K`` the key of a request awaiting its reply.
    """

    #: The timer's sleep when the machine has no deadline (``None``: until woken).
    idle_wait: ClassVar[float | None] = None
    #: Names the tasks (``streamwire-<wire>-reader <address>``).
    wire: ClassVar[str] = "connection"

    def __init__(self, stream: ByteStream, machine: M, address: str) -> None:
        self._stream = stream
        self._machine = machine
        self.address = address
        self._loop = asyncio.get_running_loop()
        self._inflight: InflightTable[K, Any] = InflightTable(name="request")
        self._tasks: list[asyncio.Task[None]] = []
        self._wakeup = asyncio.Event()  # the machine's next deadline may have moved
        self._timer_until: float | None = None  # when the timer wakes by itself (None: never)
        self._closed = asyncio.Event()  # set once the connection ended
        self._error: StreamwireError | None = None
        self._closing = False
        self.on_lost: list[Callable[[StreamwireError], None]] = []

    # --- state ---------------------------------------------------------------------------

    @property
    def machine(self) -> M:
        return self._machine

    @property
    def error(self) -> StreamwireError | None:
        """Why the connection ended, once it has."""
        return self._error

    @property
    def backlogged(self) -> bool:
        """True while the socket's send buffer is above its high-water mark (a write from a
        callback, which cannot wait for flow control, should leave the rest for later)."""
        return self._stream.backlogged

    def check(self) -> None:
        """Raise the recorded reason if the connection is no longer usable."""
        if self._error is not None:
            raise self._error
        if self._closing:
            raise ClosedError(f"connection to {self.address} is closing")

    # --- the broker's part ---------------------------------------------------------------

    def _dispatch(self, events: list[E]) -> None:
        """Act on the machine's events (replies, deliveries, the end)."""
        raise NotImplementedError

    async def _goodbye(self, timeout: float) -> None:
        """The wire's polite end (Close, Logout), awaited up to ``timeout`` by :meth:`close`."""

    def _waiter_error(
        self, exc: StreamwireError
    ) -> StreamwireError | Callable[[], StreamwireError]:
        """What each request awaiting its reply raises when the connection ends (an
        exception to copy, or a factory)."""
        return exc

    def _lost_callbacks(self) -> Iterable[Callable[[StreamwireError], None]]:
        """Who hears about the end, besides :attr:`on_lost`."""
        return ()

    def _ended(self) -> None:
        """Called once when the connection ends (after every waiter failed)."""

    # --- tasks ---------------------------------------------------------------------------

    def _start_tasks(self) -> None:
        name = f"streamwire-{self.wire}"
        self._tasks = [
            asyncio.create_task(self._read_loop(), name=f"{name}-reader {self.address}"),
            asyncio.create_task(self._timer_loop(), name=f"{name}-timer {self.address}"),
        ]

    def _spawn(self, coro: Any, name: str) -> None:
        """A short task that ends with the connection (cancelled by close/abort)."""
        task: asyncio.Task[None] = asyncio.create_task(coro, name=name)
        self._tasks.append(task)
        task.add_done_callback(self._forget_task)

    def _forget_task(self, task: asyncio.Task[None]) -> None:
        with contextlib.suppress(ValueError):
            self._tasks.remove(task)

    async def _read_loop(self) -> None:
        machine, stream = self._machine, self._stream
        try:
            while True:
                data = await stream.read()
                self._dispatch(machine.receive_data(data, self._loop.time()))
                if self._error is not None:
                    # unless aborted already, this lets out what was written before the end
                    # (an answer to the peer's Close), then closes the socket
                    await stream.aclose(timeout=1.0)
                    return
                await self._send_queued()  # what reading made the machine say (answers)
                if not data:
                    return
        except asyncio.CancelledError:
            raise
        except StreamwireError as exc:
            self._fail(exc)
        except Exception as exc:  # a bug: record it, so that nobody waits forever
            logger.exception("%s reader for %s failed", self.wire, self.address)
            self._fail(ConnectionClosed(f"reader failed: {exc!r}"), cause=exc)

    async def _timer_loop(self) -> None:
        machine = self._machine
        try:
            while self._error is None:
                deadline = machine.next_deadline()
                now = self._loop.time()
                delay = self.idle_wait if deadline is None else max(0.0, deadline - now)
                self._timer_until = None if delay is None else now + delay
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wakeup.wait()
                self._dispatch(machine.advance_time(self._loop.time()))
                await self._send_queued()  # heartbeats
        except asyncio.CancelledError:
            raise
        except StreamwireError as exc:
            self._fail(exc)
        except Exception as exc:  # a bug: without the timer no heartbeat or deadline fires,
            # and a dead link would go unnoticed; end the connection, loudly, as the reader does
            logger.exception("%s timer for %s failed", self.wire, self.address)
            self._fail(ConnectionClosed(f"timer failed: {exc!r}"), cause=exc)

    def _deadline_moved(self) -> None:
        """Wake the timer if the machine's next deadline now comes before the time the timer
        wakes by itself (a later deadline waits: the timer recomputes it when it wakes)."""
        deadline = self._machine.next_deadline()
        until = self._timer_until
        if deadline is not None and (until is None or deadline < until):
            self._wakeup.set()

    # --- sending -------------------------------------------------------------------------

    async def flush(self) -> None:
        """Hand everything the machine queued to the socket and wait for flow control."""
        await self._write(self._machine.data_to_send())

    async def _send_queued(self) -> None:
        """Write what the machine queued, if anything, and wait for flow control."""
        data = self._machine.data_to_send()
        if data:
            await self._write(data)

    async def _write(self, data: BytesLike) -> None:
        try:
            if data:
                self._stream.write(data)
            await self._stream.drain()
        except StreamwireError as exc:
            self._fail(exc)
            raise

    def write_now(self) -> None:
        """Write what the machine queued without waiting for flow control."""
        try:
            self._stream.write(self._machine.data_to_send())
        except StreamwireError as exc:
            self._fail(exc)
            raise

    # --- the end -------------------------------------------------------------------------

    def _fail(
        self, exc: StreamwireError, *, cause: BaseException | None = None, abort: bool = True
    ) -> None:
        """Record why the connection ended and tell every waiter and listener. ``abort``:
        drop the socket now (else the reader closes it after what was already written)."""
        if self._error is not None:
            if abort:
                self._stream.abort()
            return
        if cause is not None:
            exc.__cause__ = cause
        self._error = exc
        logger.debug("connection to %s ended: %s", self.address, exc)
        # each waiter gets its own copy, chained to the root cause
        self._inflight.close(self._waiter_error(exc), cause=exc.__cause__ or exc)
        self._ended()
        for callback in [*self._lost_callbacks(), *self.on_lost]:
            try:
                callback(exc)
            except Exception:  # a listener bug must not stop the others
                logger.exception("connection-lost listener of %s failed", self.address)
        if abort:
            self._stream.abort()
        self._closed.set()
        self._wakeup.set()

    async def close(self, timeout: float = 5.0) -> None:
        """Say goodbye (best effort, within ``timeout``), then drop the socket. Idempotent.

        Cancellation: the connection is aborted (:meth:`abort`) before ``CancelledError``
        propagates; calling ``close()`` again waits for its tasks to end.
        """
        try:
            if self._error is None and not self._closing:
                with contextlib.suppress(StreamwireError, TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._goodbye(timeout)
            await self._shutdown(ClosedError(f"connection to {self.address} was closed"))
        finally:
            self.abort()

    async def _shutdown(self, reason: StreamwireError) -> None:
        self._closing = True
        self._fail(reason)
        await cancel_tasks(self._tasks, timeout=1.0)
        await self._stream.aclose(timeout=1.0)

    def abort(self) -> None:
        """Drop the connection at once: the socket is aborted, every waiter and listener
        hears :class:`ClosedError`, and the tasks are cancelled (not awaited). Idempotent."""
        self._closing = True
        self._fail(ClosedError(f"connection to {self.address} was aborted"))
        cancel_now(self._tasks)
