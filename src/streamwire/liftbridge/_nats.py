"""nats-py behind our own deadlines and exceptions: the only module that talks to NATS.

Everything nats-py raises is translated here (``nats.errors.*`` and ``OSError`` become
streamwire exceptions, chained). Cancellation is never swallowed. Connection events
(disconnected, reconnected, closed, slow consumer) are counted and forwarded to listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import nats.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    ConnectError,
    ConnectionClosed,
    ConnectTimeout,
    ProducerBufferFull,
    RemoteProtocolError,
    RequestTimeout,
    StreamwireError,
    TransportError,
)
from streamwire.liftbridge._nats_internals import AWAITING_CONTROL_LINE, REPORT
from streamwire.liftbridge._nats_msgs import take_msgs
from streamwire.transport.deadline import Deadline

__all__ = ("NatsLink", "NatsStats", "flush_in_order", "translate_nats")

logger = logging.getLogger(__name__)

MsgHandler = Callable[[Msg], Awaitable[None]]
DirectHandler = Callable[[bytes, bytes], bool]
"""``(subject, payload) -> taken``: see :meth:`NatsLink.deliver_directly`."""

#: nats-py's default ``pending_size``: its write buffer, beyond which publish waits.
_PENDING = 2 * 1024 * 1024

#: How long a cancelled connect of nats-py may take to end, cancelled again every
#: ``_CONNECT_END_STEP`` s meanwhile, before it is left to end on its own (with a warning).
_CONNECT_END_TIMEOUT = 5.0
_CONNECT_END_STEP = 0.1

#: What nats-py refuses in a published subject (it would split or inject protocol lines).
_BAD_SUBJECT = re.compile(r"[ \t\r\n]")

#: The nats-py internals :meth:`NatsLink.publish_many` writes through; without them it
#: publishes message by message. Checked for nats-py as a whole at import
#: (:mod:`streamwire.liftbridge._nats_internals`, whose report is ``_FAST``), and here again
#: on each client object (stand-ins in tests have fewer).
_BULK_API = ("_send_command", "_flush_pending", "_flush_queue", "stats", "is_draining_pubs")
_FAST = REPORT


@dataclass(slots=True)
class NatsStats:
    """Counters of connection events, for diagnostics (``client.stats``)."""

    disconnects: int = 0
    reconnects: int = 0
    slow_consumer_errors: int = 0
    errors: int = 0


def translate_nats(exc: BaseException, what: str) -> StreamwireError:
    """The streamwire exception for a nats-py (or OS) error."""
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, nats.errors.MaxPayloadError):
        return ConfigurationError(f"{what}: the payload exceeds the server's max_payload")
    if isinstance(exc, nats.errors.OutboundBufferLimitError):
        return ProducerBufferFull(f"{what}: the NATS outbound buffer is full (disconnected)")
    if isinstance(exc, nats.errors.BadSubjectError):
        return ConfigurationError(f"{what}: invalid NATS subject")
    if isinstance(exc, nats.errors.ConnectionClosedError | nats.errors.ConnectionDrainingError):
        return ClosedError(f"{what}: the NATS connection is closed")
    if isinstance(exc, nats.errors.TimeoutError):
        return RequestTimeout(f"{what}: timed out ({detail})")
    if isinstance(exc, nats.errors.NoServersError):
        return ConnectError(f"{what}: no NATS server could be reached")
    if isinstance(exc, nats.errors.AuthorizationError):
        return ConnectError(f"{what}: NATS authorization failed ({detail})")
    if isinstance(exc, nats.errors.ProtocolError):
        return RemoteProtocolError(f"{what}: the NATS server broke the protocol ({detail})")
    if isinstance(exc, ValueError) and isinstance(exc.__context__, asyncio.LimitOverrunError):
        # nats-py reads the handshake with StreamReader.readline (64 KiB limit)
        return RemoteProtocolError(f"{what}: a line from the NATS server exceeds 64 KiB")
    if isinstance(exc, nats.errors.StaleConnectionError | ConnectionError | EOFError):
        return ConnectionClosed(f"{what}: NATS connection lost ({detail})")
    if isinstance(exc, OSError | nats.errors.Error):
        return TransportError(f"{what}: {detail}")
    return TransportError(f"{what}: unexpected {type(exc).__name__}: {detail}")


async def flush_in_order(nc: NatsClient, timeout: float) -> None:
    """A PING/PONG round trip that follows every command queued before it: once it returns,
    the server has processed them (a SUB is in place, PUBs are routed).

    nats-py's ``flush`` alone does not promise that: it writes its PING straight to the
    socket, ahead of the commands still waiting in its buffer for the flusher task (seen in
    nats-py 2.16 with a SUB), so a publish from another connection right after it can reach
    the server before the subscription. The buffer is pushed out first, through nats-py's
    ``_flush_pending(force_flush=True)`` when it has one; that call swallows cancellation,
    so it runs as its own task.

    Raises ``TimeoutError`` after ``timeout`` seconds; nats-py errors pass through.
    """
    async with asyncio.timeout(timeout):
        push = getattr(nc, "_flush_pending", None)
        if push is not None:
            pushed = asyncio.ensure_future(push(force_flush=True))
            try:
                await asyncio.shield(pushed)
            finally:
                if not pushed.done():
                    pushed.cancel()
        await nc.flush(timeout=max(timeout, 0.001))  # type: ignore[arg-type]


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: the caller reports its own error


async def _end_connect(task: asyncio.Task[None], what: str) -> None:
    """Cancel nats-py's connect ``task`` and wait for it to end, cancelling it again every
    ``_CONNECT_END_STEP`` s (a cancellation it lost, see ``error_cb`` in
    :meth:`NatsLink.connect`), for ``_CONNECT_END_TIMEOUT`` s at most: then it is left to end
    on its own. Its outcome is retrieved either way. A new cancellation of the caller
    propagates (the task is cancelled, not waited for)."""
    task.add_done_callback(_retrieve)
    loop = asyncio.get_running_loop()
    give_up = loop.time() + _CONNECT_END_TIMEOUT
    while True:
        task.cancel()
        # (a turn of the loop even when it is done, as before: closing nats-py in the step
        # its connect returned made its close raise CancelledError once its server had
        # answered PING with garbage, test_malicious_server's nats_garbage)
        await asyncio.wait({task}, timeout=min(_CONNECT_END_STEP, give_up - loop.time()))
        if task.done():
            return
        if loop.time() >= give_up:
            logger.warning(
                "%s: nats-py's connect still runs %.1f s after it was cancelled; "
                "left to end on its own",
                what,
                _CONNECT_END_TIMEOUT,
            )
            return


class NatsLink:
    """One nats-py connection. Create with :meth:`connect`."""

    def __init__(self, nc: NatsClient, servers: list[str], pending_limit: int = _PENDING) -> None:
        self._nc = nc
        self.servers = servers
        self._pending_limit = pending_limit
        self.stats = NatsStats()
        self.on_closed: list[Callable[[StreamwireError], None]] = []
        self.on_reconnected: list[Callable[[], None]] = []
        self.on_disconnected: list[Callable[[], None]] = []
        self._closing = False
        self.bulk = _FAST.bulk and all(hasattr(nc, name) for name in _BULK_API)
        """Whether :meth:`publish_many` writes one buffer entry for many messages."""
        self._valid_subjects: set[str] = set()
        self._direct: dict[int, DirectHandler] = {}

    @classmethod
    async def connect(
        cls,
        servers: list[str],
        *,
        deadline: Deadline,
        tls: ssl.SSLContext | None = None,
        name: str | None = None,
        options: Mapping[str, object] | None = None,
    ) -> NatsLink:
        """Connect within ``deadline``; fails fast once every server refused once.

        nats-py retries servers on its own (``max_reconnect_attempts``) even for the first
        connection; the first error from each server is therefore treated as final here.

        Cancellation: the half-open connection is closed.
        """
        pending = (options or {}).get("pending_size", _PENDING)
        if isinstance(pending, bool) or not isinstance(pending, int):
            raise ConfigurationError(f"nats_options pending_size must be an int, not {pending!r}")
        nc = NatsClient()
        link = cls(nc, servers, pending)
        failures: list[BaseException] = []
        all_failed = asyncio.Event()
        connected = False

        async def error_cb(exc: Exception) -> None:
            if not connected:
                if asyncio.current_task() is connecting and connecting.cancelling():
                    # nats-py lost our cancellation: Python 3.11's asyncio.wait_for,
                    # cancelled in the step its connection attempt failed, raises that
                    # failure instead, and nats-py tries the server again (every
                    # reconnect_time_wait, max_reconnect_attempts times: minutes). Raised
                    # again where nats-py reports the failure, outside its handlers.
                    raise asyncio.CancelledError
                failures.append(exc)
                if len(failures) >= len(servers):
                    all_failed.set()
                return
            link._on_error(exc)

        async def disconnected_cb() -> None:
            if connected:
                link.stats.disconnects += 1
                for listener in list(link.on_disconnected):
                    listener()

        async def reconnected_cb() -> None:
            link.stats.reconnects += 1
            for listener in list(link.on_reconnected):
                listener()

        async def closed_cb() -> None:
            if connected:
                link._on_closed()

        kwargs: dict[str, Any] = {
            "servers": servers,
            "error_cb": error_cb,
            "disconnected_cb": disconnected_cb,
            "reconnected_cb": reconnected_cb,
            "closed_cb": closed_cb,
            "connect_timeout": max(1, round(deadline.remaining(ConnectTimeout) or 10)),
        }
        if name is not None:
            kwargs["name"] = name
        if tls is not None:
            kwargs["tls"] = tls
        kwargs.update(options or {})
        what = f"connecting to NATS {', '.join(servers)}"
        connecting = asyncio.get_running_loop().create_task(nc.connect(**kwargs))
        failed = asyncio.ensure_future(all_failed.wait())
        try:
            async with deadline.scope(ConnectTimeout, what=what):
                await asyncio.wait({connecting, failed}, return_when=asyncio.FIRST_COMPLETED)
            if not connecting.done():
                raise ConnectError(f"{what} failed: {failures[-1]}") from failures[-1]
            try:
                connecting.result()
            except Exception as exc:
                raise translate_nats(exc, what) from exc
            if not nc.is_connected:
                # nats-py returns from connect() still CONNECTING when the server answers
                # the first PING with something else than PONG or -ERR
                raise RemoteProtocolError(f"{what}: the server did not answer PING with PONG")
        except BaseException:
            failed.cancel()
            await _end_connect(connecting, what)  # a new cancellation of ours propagates
            with contextlib.suppress(nats.errors.Error, OSError):
                await nc.close()
            raise
        failed.cancel()
        connected = True
        return link

    # --- events ----------------------------------------------------------------------

    def _on_error(self, exc: Exception) -> None:
        if isinstance(exc, nats.errors.SlowConsumerError):
            self.stats.slow_consumer_errors += 1
            logger.warning("NATS slow consumer: messages dropped on sid %s", exc.sid)
            return
        self.stats.errors += 1
        logger.debug("NATS error: %r", exc)

    def _on_closed(self) -> None:
        reason = "the NATS connection closed"
        last = self._nc.last_error
        if last is not None and not self._closing:
            reason = f"the NATS connection closed after {type(last).__name__}: {last}"
        exc = ClosedError(reason) if self._closing else ConnectionClosed(reason)
        for listener in list(self.on_closed):
            listener(exc)

    # --- operations ------------------------------------------------------------------

    @property
    def max_payload(self) -> int:
        """The server's ``max_payload`` from INFO (bytes)."""
        return int(self._nc.max_payload)

    @property
    def is_connected(self) -> bool:
        return bool(self._nc.is_connected)

    @property
    def is_closed(self) -> bool:
        return bool(self._nc.is_closed)

    def new_inbox(self) -> str:
        return str(self._nc.new_inbox())

    async def subscribe(
        self,
        subject: str,
        handler: MsgHandler,
        *,
        pending_msgs_limit: int = 512 * 1024,
        pending_bytes_limit: int = 128 * 1024 * 1024,
    ) -> Subscription:
        """Subscribe with a callback. Cancellation: the subscription may exist; it ends
        with the connection."""
        try:
            return await self._nc.subscribe(
                subject,
                cb=handler,
                pending_msgs_limit=pending_msgs_limit,
                pending_bytes_limit=pending_bytes_limit,
            )
        except (nats.errors.Error, OSError) as exc:
            raise translate_nats(exc, f"subscribing to {subject}") from exc

    def deliver_directly(self, sub: Subscription, handler: DirectHandler) -> bool:
        """Hand the messages of ``sub`` without headers to ``handler(subject, payload)``
        straight from nats-py's protocol parser, skipping the ``Msg``, the subscription's
        queue and task and the callback coroutine that nats-py spends on each (≈ 3 µs of
        CPU per ack: docs/benchmarks/notes/2026-11.md). ``handler`` runs in the connection's
        read loop, must not raise, and returns False for a message it does not take, which then goes
        the usual way (to the callback ``sub`` was made with), as do messages with headers.

        Uses nats-py internals (the parser's ``_process_msg`` call and the subscription's
        ``_id``; :mod:`streamwire.liftbridge._nats_internals`); without them (another
        nats-py, or ``STREAMWIRE_NATS_FAST=0``) it does nothing and returns False.
        """
        if not _FAST.direct:
            return False
        nc: Any = self._nc
        sid = getattr(sub, "_id", None)
        process = getattr(nc, "_process_msg", None)
        stats = getattr(nc, "stats", None)
        if type(sid) is not int or process is None or not isinstance(stats, dict):
            return False
        if not self._direct:
            direct = self._direct

            async def process_msg(
                sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
            ) -> None:
                handler = direct.get(sid)
                if handler is None or headers or not handler(subject, data):
                    await process(sid, subject, reply, data, headers)
                    return
                stats["in_msgs"] += 1
                stats["in_bytes"] += len(data)

            nc._process_msg = process_msg
            self._take_runs_first()
        self._direct[sid] = handler
        return True

    def _take_runs_first(self) -> None:
        """Before nats-py's parser sees a socket read, hand the run of plain ``MSG``
        commands at its front for direct subscriptions to their handlers in one walk
        (:func:`take_msgs`); the rest goes to the parser as it came. A command cut by the
        end of a read is kept until the next one (dropped if the parser was reset in
        between: a new connection). Only while the parser awaits a command line with an
        empty buffer; without the parser internals (another nats-py) nothing changes."""
        nc: Any = self._nc
        ps: Any = getattr(nc, "_ps", None)
        parse = getattr(ps, "parse", None)
        stats = getattr(nc, "stats", None)
        if (
            parse is None
            or not isinstance(getattr(ps, "buf", None), bytearray)
            or not isinstance(getattr(ps, "state", None), int)
            or not isinstance(stats, dict)
        ):
            return
        direct = self._direct
        held: list[Any] = [b"", None]  # a cut command, and the parser buffer it was cut in

        async def parse_runs_first(data: bytes = b"") -> None:
            tail, where = held
            if tail:
                held[0], held[1] = b"", None
                if ps.buf is where:
                    data = tail + data
            if data and ps.state == AWAITING_CONTROL_LINE and not ps.buf:
                used, count, nbytes, cut = take_msgs(data, direct)
                if count:
                    stats["in_msgs"] += count
                    stats["in_bytes"] += nbytes
                if cut:
                    held[0], held[1] = data[used:], ps.buf
                    return
                if used:
                    data = data[used:]
                    if not data:
                        return
            await parse(data)

        ps.parse = parse_runs_first

    async def publish(
        self, subject: str, payload: bytes, reply: str = "", *, timeout: float | None = None
    ) -> None:
        """Queue one message for the server (nats-py writes it from its flusher). nats-py
        waits for its write buffer to drain when it is full; after ``timeout`` seconds of
        that, :class:`ProducerBufferFull` is raised (the message may still go out).

        Cancellation: the message may or may not have been queued.
        """
        nc = self._nc
        if timeout is None or nc.pending_data_size + len(payload) < self._pending_limit:
            try:  # the common case: nats-py only appends to its buffer
                await nc.publish(subject, payload, reply=reply)
                return
            except (nats.errors.Error, OSError) as exc:
                raise translate_nats(exc, f"publishing to {subject}") from exc
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                await nc.publish(subject, payload, reply=reply)
        except TimeoutError as exc:
            if not scope.expired():
                raise translate_nats(exc, f"publishing to {subject}") from exc
            raise ProducerBufferFull(
                f"publishing to {subject}: the NATS write buffer did not drain in {timeout} s"
            ) from exc
        except (nats.errors.Error, OSError) as exc:
            raise translate_nats(exc, f"publishing to {subject}") from exc

    async def publish_many(
        self, messages: Sequence[tuple[str, bytes, str]], *, timeout: float | None = None
    ) -> None:
        """Queue ``(subject, payload, reply)`` messages, in order, as what nats-py's own
        ``publish`` would write for each (``PUB <subject> <reply> <size>``), but as one
        entry of its write buffer: the per-message work of ``publish`` (validation, stats,
        a buffer append, a flusher wake-up) is done once for the lot. Subjects are checked
        once per distinct subject; a bad subject or a payload above ``max_payload`` raises
        :class:`ConfigurationError` before anything is queued. While nats-py is
        reconnecting, or when its buffer is near ``timeout``'s back-pressure limit, messages
        go one by one through :meth:`publish` (same buffering and
        :class:`ProducerBufferFull` rules).

        Cancellation: the messages may or may not have been queued.
        """
        nc = self._nc
        if not messages:
            return
        valid, limit = self._valid_subjects, nc.max_payload
        out_bytes = 0
        for subject, payload, reply in messages:  # refuse before anything is queued
            if subject not in valid:
                self._check_subject(subject)
            if reply and reply not in valid:
                self._check_subject(reply)
            n = len(payload)
            if n > limit:
                raise ConfigurationError(
                    f"publishing to {subject}: the payload exceeds the server's max_payload"
                )
            out_bytes += n
        crowded = (
            timeout is not None
            and nc.pending_data_size + out_bytes + 64 * len(messages) >= self._pending_limit
        )
        if not self.bulk or crowded or not nc.is_connected:
            for subject, payload, reply in messages:
                await self.publish(subject, payload, reply, timeout=timeout)
            return
        if nc.is_closed or nc.is_draining_pubs:
            raise translate_nats(nats.errors.ConnectionClosedError(), "publishing")
        parts: list[bytes] = []
        append = parts.append
        for subject, payload, reply in messages:
            append(f"PUB {subject} {reply} {len(payload)}\r\n".encode())
            append(payload)
            append(b"\r\n")
        nc.stats["out_msgs"] += len(messages)
        nc.stats["out_bytes"] += out_bytes
        try:
            await nc._send_command(b"".join(parts))
            if nc._flush_queue is not None and nc._flush_queue.empty():
                await nc._flush_pending()
        except (nats.errors.Error, OSError) as exc:
            raise translate_nats(exc, "publishing") from exc

    def _check_subject(self, subject: str) -> None:
        if not subject or _BAD_SUBJECT.search(subject):
            raise ConfigurationError(f"{subject!r} is not a valid NATS subject")
        if len(self._valid_subjects) >= 4096:  # bounded: subjects are few per client
            self._valid_subjects.clear()
        self._valid_subjects.add(subject)

    async def flush(self, timeout: float | None) -> None:
        """PING/PONG round trip after everything queued so far (:func:`flush_in_order`):
        the server has processed it. ``None`` waits up to 60 s.

        Cancellation: only the wait stops.
        """
        wait = 60.0 if timeout is None else timeout
        try:
            await flush_in_order(self._nc, wait)
        except TimeoutError as exc:
            raise RequestTimeout(f"NATS flush did not complete within {wait} s") from exc
        except (nats.errors.Error, OSError) as exc:
            raise translate_nats(exc, "flushing NATS") from exc

    async def close(self) -> None:
        """Flush what is queued and close. Idempotent; never raises a nats error.

        Cancellation: the socket is closed at once before ``CancelledError`` propagates
        (nats-py marks itself closed as its close starts, so a second call would not finish
        an interrupted one).
        """
        if self._closing:
            return
        self._closing = True
        closed = False
        try:
            await self._nc.close()
            closed = True
        except (nats.errors.Error, OSError) as exc:
            logger.debug("closing NATS failed: %s", exc)
        finally:
            if not closed:
                self._drop_socket()

    def _drop_socket(self) -> None:
        """Close nats-py's transport, which its interrupted close left open."""
        transport = getattr(self._nc, "_transport", None)
        if transport is not None:
            try:
                transport.close()
            except Exception as exc:  # already closed, or never opened
                logger.debug("dropping the NATS socket failed: %r", exc)
