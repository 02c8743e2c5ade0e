"""The client's ack inbox: one NATS subscription, correlation ids to futures, ack deadlines.

Subjects (one wildcard subscription ``<inbox>.>`` per client):

* ``<inbox>.a``: the ``ackInbox`` of every message; acks are routed by ``correlationId``.
* ``<inbox>.n.<correlation id>``: the NATS reply subject of a message published with
  ``detect_no_responders``; nats-server answers there with ``503`` when nothing listens on
  the partition subject.

The handler is O(1) per message and never raises: garbage on the inbox is counted and
dropped, duplicate and late acks (after a timeout, a second stream on the same subject, a
retry) are counted and ignored. The first ack of a correlation id wins.

Deadlines measure the broker's silence, not the event loop's: when the expiry timer runs late
because the loop was blocked (a long synchronous call, a paused process), acks that reached
the socket meanwhile have not been read yet, and the timer would otherwise run before them.
A late timer therefore waits a short grace (as long as it was late, between
``_GRACE_MIN`` and ``_GRACE_MAX`` seconds) before failing anything.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from itertools import count, repeat
from typing import Any, Protocol

from nats.aio.msg import Msg

from streamwire.codec.message import Confirmation
from streamwire.errors import ClosedError, ConnectionClosed, StreamwireError
from streamwire.liftbridge.protocol.errors import ACK_ERRORS, AckTimeout, NoResponders
from streamwire.liftbridge.protocol.messages import parse_ack, partition_of
from streamwire.transport.inflight import InflightTable, fresh_exception
from streamwire.transport.pending import Ledger

__all__ = ("AckRouter", "AckRun", "AckStats", "InboxLink")

logger = logging.getLogger(__name__)

_LATE = 0.25
"""A timer this many seconds behind its deadline means the event loop was blocked."""
_GRACE_MIN = 0.1
_GRACE_MAX = 2.0


class InboxLink(Protocol):
    """What the router needs from the NATS connection (``NatsLink``, or a test double)."""

    def new_inbox(self) -> str: ...

    async def subscribe(self, subject: str, handler: Callable[[Msg], Awaitable[None]]) -> Any: ...


@dataclass(slots=True)
class AckStats:
    """What arrived on the ack inbox."""

    acks: int = 0
    """Acks matched to a waiting message (errors included)."""
    error_acks: int = 0
    unmatched: int = 0
    """Acks for nobody: duplicates, acks after a timeout, acks for other clients' ids."""
    invalid: int = 0
    """Messages on the inbox that are not ack envelopes (dropped)."""
    timeouts: int = 0
    no_responders: int = 0
    direct: int = 0
    """Acks taken straight from the NATS parser (``NatsLink.deliver_directly``), counted in
    ``acks``/``unmatched``/``invalid`` as well."""
    late_timers: int = 0
    """Deadline checks postponed because the event loop was blocked past them."""


class AckRun:
    """The messages of one publish call to one partition, acked one by one into one
    :class:`Ledger` (whose lazy futures the caller holds): no asyncio future, done-callback
    nor deadline entry per message. ``on_settled(run, count, exc)`` is called as messages
    settle (``exc`` None: stored); ``left`` counts those still waiting."""

    __slots__ = ("cids", "failed", "key", "ledger", "left", "on_settled", "payloads", "started")

    def __init__(
        self,
        cids: Sequence[str],
        ledger: Ledger,
        on_settled: Callable[[AckRun, int, BaseException | None], object],
        started: tuple[float, object] = (0.0, None),
        payloads: Sequence[bytes] | None = None,
    ) -> None:
        self.cids = cids
        self.payloads = payloads
        """What was sent for each message, when the sender may send it again (gRPC)."""
        self.ledger = ledger
        self.left = len(cids)
        self.on_settled = on_settled
        self.failed = 0
        """Messages of the run that failed so far (counted by the caller)."""
        self.started = started
        """The caller's metering token (``ProducerMeter.sent``)."""
        self.key = f"r{cids[0]}" if cids else "r"
        """The run's entry among the deadlines (never a correlation id: those are hex)."""


def _timeout_of(what: str) -> Callable[[str], BaseException]:
    def make(cid: str) -> BaseException:
        return AckTimeout(f"no ack for {what} (correlation id {cid})")

    return make


class AckRouter:
    """Routes acks to the futures of the messages waiting for them.

    Without a ``link`` it has no inbox: only correlation ids, futures and their deadlines
    (the gRPC publish path, whose acks arrive on its PublishAsync stream).
    """

    def __init__(self, link: InboxLink | None) -> None:
        self._link = link
        base = link.new_inbox() if link is not None else ""
        self.ack_inbox = f"{base}.a" if base else ""
        self._ack_inbox_bytes = self.ack_inbox.encode()
        self._subject = f"{base}.>"
        self._reply_prefix = f"{base}.n."
        self._ids = itertools.count(1)
        self.table: InflightTable[str, Confirmation] = InflightTable(name="message")
        self.run_acks: dict[str, tuple[AckRun, int]] = {}
        """Correlation id -> (run, index) of the messages of runs still waiting (read it;
        change it through :meth:`take`, :meth:`expect_run` and :meth:`forget_run`)."""
        self._runs: dict[str, AckRun] = {}
        """Runs with messages still waiting, by key."""
        self.stats = AckStats()
        self._expiry: list[tuple[float, str, str]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._hold_until = 0.0
        """Nothing expires before this loop time (the grace after a blocked loop)."""
        self._loop = asyncio.get_running_loop()
        self._closed = False

    async def start(self) -> None:
        """Subscribe to the inbox (before anything is published on this connection)."""
        if self._link is None:
            return
        sub = await self._link.subscribe(self._subject, self._on_message)
        deliver = getattr(self._link, "deliver_directly", None)
        if deliver is not None:
            deliver(sub, self._direct)

    def next_id(self) -> str:
        """A correlation id never used before on this inbox (one token, no dots)."""
        return f"{next(self._ids):x}"

    def next_ids(self, count: int) -> list[str]:
        """``count`` new correlation ids (as many :meth:`next_id` calls)."""
        return list(map("{:x}".format, itertools.islice(self._ids, count)))

    def reply_subject(self, correlation_id: str) -> str:
        return self._reply_prefix + correlation_id

    def expect(
        self,
        correlation_id: str,
        timeout: float | None,
        what: str = "message",
        on_done: Callable[[asyncio.Future[Confirmation]], object] | None = None,
    ) -> asyncio.Future[Confirmation]:
        """A future for the ack of ``correlation_id``; it fails with :class:`AckTimeout`
        after ``timeout`` seconds (``None``: never). ``what`` names the message in that
        error; ``on_done`` is called with the future once it is done."""
        future = self.table.register(correlation_id, on_done)
        if timeout is not None:
            when = self._loop.time() + timeout
            if len(self._expiry) > 2 * len(self.table) + 1024:
                self._compact()
            heapq.heappush(self._expiry, (when, correlation_id, what))
            if self._timer is None or when < self._timer_at:
                self._schedule(when)
        return future

    def forget(self, correlation_id: str) -> None:
        """Stop waiting for ``correlation_id`` (its publish failed); cancels its future."""
        self.table.discard(correlation_id)

    @property
    def waiting(self) -> int:
        """Messages whose ack has not arrived nor failed (futures and runs)."""
        return len(self.table) + len(self.run_acks)

    def expect_run(
        self,
        run: AckRun,
        timeout: float | None,
        what: str = "message",
    ) -> None:
        """Wait for the acks of ``run``'s correlation ids (each new, from :meth:`next_id`);
        those still missing after ``timeout`` seconds fail with :class:`AckTimeout`, one
        deadline for the run. Raises ClosedError after :meth:`close`."""
        if self._closed:
            raise ClosedError("cannot wait for acks: the client is closed")
        n = len(run.cids)
        self.run_acks.update(zip(run.cids, zip(repeat(run, n), count()), strict=True))
        self._runs[run.key] = run
        if timeout is not None:
            when = self._loop.time() + timeout
            if len(self._expiry) > 2 * len(self.table) + len(self._runs) + 1024:
                self._compact()
            heapq.heappush(self._expiry, (when, run.key, what))
            if self._timer is None or when < self._timer_at:
                self._schedule(when)

    def forget_run(self, run: AckRun) -> None:
        """Stop waiting for ``run`` (its publish failed): its messages stay pending in its
        ledger, nobody is told."""
        pop = self.run_acks.pop
        for cid in run.cids:
            pop(cid, None)
        self._runs.pop(run.key, None)
        run.left = 0

    @property
    def runs(self) -> list[AckRun]:
        """The runs with messages still waiting, first registered first."""
        return list(self._runs.values())

    def take(self, correlation_id: str) -> tuple[AckRun, int] | None:
        """The run and index of ``correlation_id`` if it still waits (it then no longer
        does: settle it into the run's ledger and tell :meth:`settle_run`); else None."""
        return self.run_acks.pop(correlation_id, None)

    def settle_run(self, run: AckRun, n: int, exc: BaseException | None) -> None:
        """``n`` messages of ``run`` taken with :meth:`take` were settled in its ledger
        (``exc`` None: stored): tell the run's owner."""
        run.left -= n
        if run.left <= 0:
            self._runs.pop(run.key, None)
        run.on_settled(run, n, exc)

    def refuse(self, run: AckRun, index: int, exc: BaseException) -> None:
        """Message ``index`` of ``run`` (taken with :meth:`take`) failed with ``exc``."""
        run.ledger.fail(index, 1, exc)
        self.settle_run(run, 1, exc)

    def fail(self, correlation_id: str, exc: BaseException) -> None:
        """Fail the message ``correlation_id`` with ``exc`` if it still waits (in a run or
        with its own future)."""
        entry = self.run_acks.pop(correlation_id, None)
        if entry is not None:
            self.refuse(*entry, exc)
        elif correlation_id in self.table:
            self.table.fail(correlation_id, exc)

    def _fail_run(self, run: AckRun, make: Callable[[str], BaseException]) -> None:
        """Fail every message of ``run`` still waiting, each with ``make(cid)``."""
        pop = self.run_acks.pop
        for i, cid in enumerate(run.cids):
            if pop(cid, None) is not None:
                self.refuse(run, i, make(cid))

    # --- deadlines -------------------------------------------------------------------

    def _schedule(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._loop.call_at(when, self._expire)

    def _compact(self) -> None:
        """Drop the deadlines of messages already acked (amortised O(1) per message): the
        heap then holds about as many entries as messages awaiting an ack, instead of one
        per message sent during the last ``ack_timeout`` seconds."""
        table, runs = self.table, self._runs
        self._expiry = [e for e in self._expiry if e[1] in table or e[1] in runs]
        heapq.heapify(self._expiry)

    def _expire(self) -> None:
        self._timer = None
        now = self._loop.time()
        late = now - self._timer_at
        if late > _LATE:  # the loop was blocked: read what arrived meanwhile first
            self.stats.late_timers += 1
            self._hold_until = now + min(max(late, _GRACE_MIN), _GRACE_MAX)
        if now < self._hold_until:
            self._schedule(self._hold_until)
            return
        heap = self._expiry
        while heap and heap[0][0] <= now:
            _, cid, what = heapq.heappop(heap)
            if cid in self.table:
                self.stats.timeouts += 1
                self.table.fail(cid, AckTimeout(f"no ack for {what} (correlation id {cid})"))
            elif (run := self._runs.get(cid)) is not None:
                self.stats.timeouts += run.left
                self._fail_run(run, _timeout_of(what))
        if heap:
            self._schedule(heap[0][0])

    # --- the NATS callback ------------------------------------------------------------

    async def _on_message(self, msg: Msg) -> None:
        try:
            self._dispatch(msg)
        except Exception as exc:  # the NATS callback must never raise
            self.stats.invalid += 1
            logger.debug("dropped a message on the ack inbox: %r", exc)

    def _direct(self, subject: bytes, data: bytes) -> bool:
        """An ack straight from the NATS parser (anything else on the inbox: False, it goes
        to :meth:`_on_message`). Never raises."""
        if subject != self._ack_inbox_bytes:
            return False
        self.stats.direct += 1
        try:
            self._ack(data)
        except Exception as exc:  # the parser must never see it
            self.stats.invalid += 1
            logger.debug("dropped a message on the ack inbox: %r", exc)
        return True

    def _dispatch(self, msg: Msg) -> None:
        if msg.subject != self.ack_inbox:
            self._status(msg)
            return
        self._ack(msg.data)

    def _ack(self, data: bytes) -> None:
        try:
            ack = parse_ack(data)
        except StreamwireError as exc:
            self.stats.invalid += 1
            logger.debug("dropped a non-ack on the ack inbox: %s", exc)
            return
        cid = ack.correlationId
        entry = self.run_acks.pop(cid, None)
        if entry is not None:
            run, i = entry
            self.stats.acks += 1
            error = int(ack.ackError)
            if error:
                self.stats.error_acks += 1
                where = f"{ack.stream!r} ({ack.msgSubject})"
                self.refuse(run, i, ACK_ERRORS.from_code(error, f"message {cid} on {where}"))
                return
            run.ledger.confirm_one(i, ack.offset)
            self.settle_run(run, 1, None)
            return
        if cid not in self.table:
            self.stats.unmatched += 1
            return
        self.stats.acks += 1
        error = int(ack.ackError)
        if error:
            self.stats.error_acks += 1
            where = f"{ack.stream!r} ({ack.msgSubject})"
            self.table.fail(cid, ACK_ERRORS.from_code(error, f"message {cid} on {where}"))
            return
        partition = partition_of(ack.partitionSubject, ack.msgSubject)
        self.table.resolve(cid, Confirmation(None, ack.offset, ack.stream, partition))

    def _status(self, msg: Msg) -> None:
        headers = msg.headers or {}
        if not msg.subject.startswith(self._reply_prefix) or headers.get("Status") != "503":
            self.stats.invalid += 1
            return
        cid = msg.subject[len(self._reply_prefix) :]
        if cid in self.table:
            self.stats.no_responders += 1
            subject = headers.get("Nats-Subject", "the partition subject")
            self.table.fail(
                cid, NoResponders(f"no Liftbridge partition leader listens on {subject}")
            )

    def fail_all(self, exc: StreamwireError) -> None:
        """Fail every waiting message, each with its own copy of ``exc`` (chained as
        ``exc`` is); the router stays open."""
        for run in self.runs:
            self._fail_run(run, lambda _: fresh_exception(exc, None))
        self.table.fail_all(exc)

    # --- closing ---------------------------------------------------------------------

    def close(self, exc: StreamwireError | None = None) -> None:
        """Fail every waiting message. Idempotent."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._expiry.clear()
        self._closed = True
        failure = exc or ConnectionClosed("the client closed before the ack arrived")
        for run in list(self._runs.values()):
            self._fail_run(run, lambda _: failure)
        self.table.close(failure)
