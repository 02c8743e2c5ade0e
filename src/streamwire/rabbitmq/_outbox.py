"""A producer's accepted messages: those waiting to be written and those awaiting the broker.

Messages are accepted in *groups* with consecutive publishing ids (one ``send`` is a group of
one, a ``send_batch`` call one or more groups), so the bookkeeping per message is an index
into a group's lists, not a dictionary entry and a tuple. A write cursor walks the groups to
pack Publish frames; confirmations find their group by id range (the last group matched is
tried first, which is almost always right because the broker confirms in write order).

Every message ends exactly once: confirmed, failed with its PublishError code, or failed with
the producer's fatal error. The producer's meter counts a group once when it is added and
once when its last message ends. After a reconnect, :meth:`Outbox.rewind` makes every unresolved
message unwritten again so it is re-sent with its original publishing id.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Final, NamedTuple

from streamwire.errors import LocalProtocolError
from streamwire.metrics import ProducerMeter
from streamwire.rabbitmq.protocol.publishing import PublishBuilder, is_id_run
from streamwire.transport.pending import Ledger

__all__ = ("Batch", "BatchConfirmation", "Group", "Outbox")

_PENDING: Final = 0
_DONE: Final = 1
_DONE_RUN: Final = bytes((_DONE,))


class BatchConfirmation(NamedTuple):
    """Every message of a ``send_many`` call is stored: ids ``first..last``."""

    first_publishing_id: int
    last_publishing_id: int
    messages: int
    stream: str


class Batch:
    """One future for many messages (possibly several groups)."""

    __slots__ = ("error", "first", "future", "groups", "last", "messages")

    def __init__(self, future: asyncio.Future[BatchConfirmation]) -> None:
        self.future = future
        self.groups = 0
        self.error: BaseException | None = None
        self.first = -1
        self.last = -1
        self.messages = 0


class Group:
    """Messages with publishing ids ``first + index``. With ``entries`` each item of ``data``
    is a complete osiris entry (a sub-batch of several messages) rather than one message;
    with ``wrap`` each item is a body to be written as an AMQP message of one data section
    (encoded while the Publish frame is built, so the caller's bytes are kept as they are).
    """

    __slots__ = (
        "batch",
        "data",
        "entries",
        "failed",
        "filters",
        "first",
        "ledger",
        "messages",
        "remaining",
        "started",
        "states",
        "wrap",
        "written",
    )

    def __init__(
        self,
        first: int,
        data: list[bytes],
        filters: list[str | None] | None,
        ledger: Ledger | None,
        batch: Batch | None,
        *,
        entries: bool = False,
        wrap: bool = False,
        messages: int | None = None,
    ) -> None:
        self.entries = entries
        self.wrap = wrap
        self.first = first
        self.data = data
        self.filters = filters
        self.ledger = ledger
        """The messages' confirmation futures (``send``, ``send_batch``), or None."""
        self.batch = batch
        self.states = bytearray(len(data))
        self.remaining = len(data)
        self.written = 0
        self.messages = len(data) if messages is None else messages
        """Messages in the group (an entry of ``entries`` holds several)."""
        self.failed = 0
        self.started: tuple[float, object] | None = None
        """What the producer meter gave back when the group was counted."""

    def __len__(self) -> int:
        return len(self.data)


class Outbox:
    def __init__(self, stream: str, meter: ProducerMeter | None = None) -> None:
        self.stream = stream
        self.meter = meter
        self._groups: deque[Group] = deque()  # unresolved, in acceptance order
        self._to_write: deque[Group] = deque()
        self._by_first: dict[int, Group] = {}
        self._last: Group | None = None
        self.unwritten = 0
        self.unwritten_bytes = 0
        self.in_flight = 0
        self.pending = 0
        self.first_failure: BaseException | None = None

    # --- accepting -----------------------------------------------------------------------

    def add(self, group: Group, nbytes: int | None = None) -> None:
        """Accept ``group`` (``nbytes``: the total size of its data, if the caller knows)."""
        if group.first in self._by_first:
            raise LocalProtocolError(f"publishing id {group.first} is already pending")
        self._groups.append(group)
        self._to_write.append(group)
        self._by_first[group.first] = group
        n = len(group.data)
        if nbytes is None:
            nbytes = sum(map(len, group.data))
        self.unwritten += n
        self.unwritten_bytes += nbytes
        self.pending += n
        if self.meter is not None:
            group.started = self.meter.sent(group.messages, nbytes)
        if group.batch is not None:
            batch = group.batch
            batch.groups += 1
            batch.messages += n
            if batch.first < 0:
                batch.first = group.first
            batch.last = group.first + n - 1

    def contains(self, publishing_id: int) -> bool:
        return self._find(publishing_id) is not None

    # --- writing -------------------------------------------------------------------------

    def next_frame(
        self, publisher_id: int, frame_max: int, max_messages: int, filters: bool
    ) -> bytes | None:
        """The next Publish frame (at most ``frame_max`` bytes and ``max_messages``
        entries), or ``None`` if nothing is waiting. A message that cannot fit in any frame
        fails with :class:`LocalProtocolError`."""
        builder = PublishBuilder(publisher_id, filters=filters)
        limit = frame_max or 1 << 31
        add, entry_size = builder.add, builder.entry_size
        to_write = self._to_write
        while to_write and builder.count < max_messages:
            group = to_write[0]
            i, n = group.written, len(group.data)
            data, states, fvs, first = group.data, group.states, group.filters, group.first
            full = False
            if not filters and not group.entries:  # one call into the builder
                i = builder.add_range(first, data, states, i, limit, max_messages, wrap=group.wrap)
                if i < n and builder.count < max_messages:
                    if builder.count:
                        full = True
                    else:  # the next message cannot fit even alone
                        self._too_big(group, i, frame_max)
                        group.written = i + 1
                        continue
            else:
                while i < n and builder.count < max_messages:
                    if states[i]:
                        i += 1
                        continue
                    body = data[i]
                    fv = fvs[i] if fvs is not None else None
                    need = 8 + len(body) if group.entries else entry_size(body, fv)
                    if builder.size + need > limit:
                        if builder.count:
                            full = True
                            break
                        self._too_big(group, i, frame_max)
                        i += 1
                        continue
                    if group.entries:
                        builder.add_entry(first + i, body)
                    else:
                        add(first + i, body, fv)
                    i += 1
            group.written = i
            if i >= n:
                to_write.popleft()
            if full:
                break
        if not builder.count:
            return None
        self.unwritten -= builder.count
        self.unwritten_bytes -= builder.payload_bytes
        self.in_flight += builder.count
        return builder.build()

    def _too_big(self, group: Group, i: int, frame_max: int) -> None:
        body = group.data[i]
        self.unwritten -= 1
        self.unwritten_bytes -= len(body)
        self.pending -= 1
        self._resolve_failed(
            group,
            i,
            LocalProtocolError(f"a {len(body)}-byte message does not fit in frame_max {frame_max}"),
        )

    def rewind(self) -> None:
        """After a reconnect: every unresolved message is to be written again, in order."""
        self._to_write = deque(self._groups)
        unwritten = unwritten_bytes = 0
        for group in self._groups:
            group.written = 0
            for body, state in zip(group.data, group.states, strict=True):
                if not state:
                    unwritten += 1
                    unwritten_bytes += len(body)
        self.unwritten, self.unwritten_bytes, self.in_flight = unwritten, unwritten_bytes, 0

    # --- resolving -----------------------------------------------------------------------

    def _find(self, pid: int) -> Group | None:
        group = self._last
        if group is not None and group.first <= pid < group.first + len(group.data):
            return group
        group = self._by_first.get(pid)
        if group is None:
            for candidate in self._groups:
                if candidate.first <= pid < candidate.first + len(candidate.data):
                    group = candidate
                    break
            else:
                return None
        self._last = group
        return group

    def confirm(self, publishing_ids: tuple[int, ...]) -> int:
        """Resolve confirmed ids; unknown and repeated ids are ignored. Returns how many
        messages were resolved."""
        ids = publishing_ids
        n = len(ids)
        if n < 2 or ids[-1] - ids[0] != n - 1 or not is_id_run(ids):
            return self._confirm_each(ids)
        # The usual confirm: a run of consecutive ids, resolved group by group.
        resolved, pos, end = 0, ids[0], ids[-1] + 1
        while pos < end:
            group = self._find(pos)
            if group is None:  # ids nobody waits for (a retry, a stranger): one by one
                return resolved + self._confirm_each(ids[pos - ids[0] :])
            i = pos - group.first
            m = min(end, group.first + len(group.data)) - pos
            if group.states.count(_PENDING, i, i + m) == m:
                resolved += self._confirm_run(group, i, m)
            else:
                resolved += self._confirm_each(ids[pos - ids[0] : pos - ids[0] + m])
            pos += m
        return resolved

    def _confirm_run(self, group: Group, i: int, n: int) -> int:
        """Resolve ``n`` pending messages of ``group`` from index ``i`` on."""
        group.states[i : i + n] = _DONE_RUN * n
        early = 0
        if i + n > group.written:  # confirmed before we wrote them: a confused broker
            since = max(group.written, i)
            early = i + n - since
            self.unwritten -= early
            self.unwritten_bytes -= sum(map(len, group.data[since : i + n]))
        if group.ledger is not None:
            group.ledger.confirm(i, n)
        group.remaining -= n
        if not group.remaining:
            self._group_done(group)
        self.pending -= n
        self.in_flight = max(0, self.in_flight - (n - early))
        return n

    def _confirm_each(self, publishing_ids: tuple[int, ...]) -> int:
        resolved = early = 0
        find = self._find
        current = self._last
        lo = hi = 0
        if current is not None:
            lo, hi = current.first, current.first + len(current.data)
        for pid in publishing_ids:
            if not lo <= pid < hi:
                found = find(pid)
                if found is None:
                    continue
                current = found
                lo, hi = current.first, current.first + len(current.data)
            group: Group = current  # type: ignore[assignment]  # set whenever lo < hi
            i = pid - lo
            states = group.states
            if states[i]:
                continue
            states[i] = _DONE
            resolved += 1
            if i >= group.written:  # confirmed before we wrote it: a confused broker
                early += 1
                self.unwritten -= 1
                self.unwritten_bytes -= len(group.data[i])
            if group.ledger is not None:
                group.ledger.confirm(i, 1)
            group.remaining -= 1
            if not group.remaining:
                self._group_done(group)
                lo = hi = 0
        self.pending -= resolved
        self.in_flight = max(0, self.in_flight - (resolved - early))
        return resolved

    def fail(self, pid: int, exc: BaseException) -> bool:
        """Fail one message (a PublishError); False if unknown or already resolved."""
        group = self._find(pid)
        if group is None or group.states[pid - group.first]:
            return False
        i = pid - group.first
        if i >= group.written:
            self.unwritten -= 1
            self.unwritten_bytes -= len(group.data[i])
        else:
            self.in_flight = max(0, self.in_flight - 1)
        self.pending -= 1
        self._resolve_failed(group, i, exc)
        return True

    def fail_all(self, exc: BaseException) -> int:
        """Fail everything unresolved (the producer is done); returns how many."""
        failed = 0
        for group in list(self._groups):
            for i, state in enumerate(group.states):
                if not state:
                    self._resolve_failed(group, i, exc)
                    failed += 1
        self._to_write.clear()
        self.unwritten = self.unwritten_bytes = self.in_flight = self.pending = 0
        return failed

    def _resolve_failed(self, group: Group, i: int, exc: BaseException) -> None:
        group.states[i] = _DONE
        if self.first_failure is None:
            self.first_failure = exc
        if group.ledger is not None:
            group.ledger.fail(i, 1, exc)
        if group.batch is not None and group.batch.error is None:
            group.batch.error = exc
        group.failed += 1
        group.remaining -= 1
        if not group.remaining:
            self._group_done(group)

    def _group_done(self, group: Group) -> None:
        if group.started is not None and self.meter is not None:
            failed = group.failed if not group.entries or not group.failed else group.messages
            self.meter.settled(group.started, group.messages - failed, failed)
        self._by_first.pop(group.first, None)
        if self._last is group:
            self._last = None
        groups = self._groups
        if groups and groups[0] is group:
            groups.popleft()
        else:
            groups.remove(group)  # rare: groups normally complete in acceptance order
        batch = group.batch
        if batch is not None:
            batch.groups -= 1
            if not batch.groups and not batch.future.done():
                if batch.error is not None:
                    batch.future.set_exception(batch.error)
                else:
                    batch.future.set_result(
                        BatchConfirmation(batch.first, batch.last, batch.messages, self.stream)
                    )
