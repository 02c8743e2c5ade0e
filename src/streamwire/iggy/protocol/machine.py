"""One Iggy 0.9 connection as a sans-IO state machine.

The machine builds request frames (header, numbering, session, checksum stamps), checks and
decodes what comes back, and keeps the deadlines; it never reads a clock (every entry point
takes ``now``, seconds on any monotonic scale) and performs no I/O. Bytes to write come from
:meth:`IggyConnection.data_to_send`; bytes read go to :meth:`IggyConnection.receive_data`.

Rules it implements (docs/protocol/iggy.md §2.4–§2.8, and docs/iggy.md "How a reply is
matched"):

* by default one request is in flight; ``max_in_flight`` > 1 lets reads, Ping and
  SendMessages pipeline. Login, logout, metadata and consumer-offset writes always go alone,
  and only they are retried after a transient rejection, with the same number;
* a reply is matched to the pending request **with its request number**, wherever that
  request sits among the pending ones: a server that runs one shard per core answers
  pipelined requests for different partitions in the order the shards finish, not in the
  order they were sent. Where several pending requests share a number (reads carry the
  number the next write will take), the one whose timestamp stamp the reply echoes wins,
  then the one with the reply's operation, then the oldest. A request queued behind another
  with the same number is stamped with a per-connection sequence in its (informational,
  echoed) timestamp field; a request sent alone carries 0, byte for byte as the official
  SDK's;
* as in the official Rust SDK, the reply's operation and client id are not checked: real
  servers answer CreateTopic with their internal CreateTopicWithAssignments operation and
  may stamp a client id of their own. Such replies are accepted and counted in
  :class:`ReplyStats`. The reply's operation decides only whether a result section leads
  the body; an operation byte we do not know falls back to the request's framing;
* a login mints a new random client id and resets the request counter to 1; the Register
  request carries request 0 and session 0;
* replicated requests (metadata ops, Logout, SendMessages, consumer-offset writes) take the
  next request number; reads and Ping send the current one without advancing it;
* Register, Logout and metadata requests are stamped with XXH3-64 of their body;
* a non-zero reply status and a committed rejection are typed errors for that request; an
  eviction, a reply for a request number nobody is waiting for, an undecodable frame or a
  reply deadline that passes leaves the machine ``FAILED`` for good (h11-style sticky error).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from streamwire.codec._structs import BytesLike
from streamwire.codec.framing import IGGY_HEADER, FrameAccumulator
from streamwire.errors import (
    BusyError,
    ClientStateError,
    ClosedError,
    ConfigurationError,
    ConnectionClosed,
    RemoteProtocolError,
    RequestTimeout,
    StreamwireError,
)
from streamwire.iggy.protocol import events as ev
from streamwire.iggy.protocol._wire import RequestPayload
from streamwire.iggy.protocol.batch import random_message_id
from streamwire.iggy.protocol.constants import (
    COMMANDS,
    MAX_FRAME_SIZE,
    Command,
    Operation,
)
from streamwire.iggy.protocol.errors import ERRORS, eviction_error
from streamwire.iggy.protocol.events import PendingRequest
from streamwire.iggy.protocol.framing import (
    Eviction,
    Reply,
    decode_server_frame,
    encode_request,
    split_result_section,
)
from streamwire.iggy.protocol.system import LoginReply

__all__ = (
    "ConnectionState",
    "IggyConnection",
    "MachineSettings",
    "PendingRequest",
    "ReplyStats",
)

_LOGIN_CODES: Final = (Command.LOGIN_REGISTER, Command.LOGIN_REGISTER_WITH_PAT)
_INTERNAL_OPERATIONS: Final = (64, 127)
"""Operations a server commits internally (docs/iggy.md); metadata, so result-framed."""


class ConnectionState(Enum):
    IDLE = "idle"
    """Connected, not logged in: only Ping and Register may be sent."""
    REGISTERING = "registering"
    READY = "ready"
    FAILED = "failed"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True, kw_only=True)
class MachineSettings:
    request_timeout: float = 30.0
    """Seconds to wait for each reply (the Rust SDK waits 30 s)."""
    heartbeat_interval: float | None = 5.0
    """Ping after this many idle seconds once logged in (``None``: never)."""
    max_frame_size: int = MAX_FRAME_SIZE
    stamp_checksums: bool = True
    """Stamp request_checksum on Register, Logout and metadata requests."""
    max_in_flight: int = 1
    """Requests that may await their replies at once (reads, Ping and SendMessages only;
    1 = strictly lock-step, as the official SDKs)."""

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ConfigurationError("max_in_flight must be >= 1")
        if not self.request_timeout > 0:
            raise ConfigurationError("request_timeout must be positive")
        if self.heartbeat_interval is not None and not self.heartbeat_interval > 0:
            raise ConfigurationError("heartbeat_interval must be positive or None")


@dataclass(slots=True)
class ReplyStats:
    """What the replies on a client's connections did that docs/protocol/iggy.md §2.5 does
    not describe but real servers do. Visible, never fatal (see the module docstring)."""

    replies: int = 0
    """Replies matched to a request."""
    out_of_order: int = 0
    """Replies that answered a request other than the oldest pending one."""
    foreign_operation: int = 0
    """Replies whose operation byte differs from the request's (e.g. 64 for CreateTopic)."""
    foreign_client: int = 0
    """Replies that carry a client id other than the one the session registered."""


class IggyConnection:
    """The protocol state of one connection (see the module docstring)."""

    def __init__(
        self,
        settings: MachineSettings | None = None,
        *,
        random_bytes: Callable[[int], bytes] = os.urandom,
        stats: ReplyStats | None = None,
    ) -> None:
        self.settings = settings or MachineSettings()
        self.stats = stats if stats is not None else ReplyStats()
        """Counters of tolerated surprises (may be shared by a client's connections)."""
        self.state = ConnectionState.IDLE
        self._random = random_bytes
        self.client_id = random_message_id(random_bytes)
        self.session = 0
        self.user_id: int | None = None
        self.server_version: str | None = None
        self.server_protocol_version: int | None = None
        self.next_request = 1
        self._frames = FrameAccumulator(IGGY_HEADER, max_frame_size=self.settings.max_frame_size)
        self._out: list[BytesLike] = []
        self._pending: deque[PendingRequest] = deque()
        self._queued = 0
        self._error: StreamwireError | None = None
        self._last_activity = 0.0

    # --- state ---------------------------------------------------------------------------

    @property
    def pending(self) -> PendingRequest | None:
        """The oldest request awaiting its reply."""
        return self._pending[0] if self._pending else None

    @property
    def in_flight(self) -> int:
        """How many requests await their replies."""
        return len(self._pending)

    def can_send(self, operation: Operation) -> bool:
        """Would a request of ``operation`` be accepted now (see the module docstring)?"""
        pending = self._pending
        if not pending:
            return True
        return (
            len(pending) < self.settings.max_in_flight
            and operation.pipelinable
            and pending[-1].operation.pipelinable
        )

    def queued_after(self, request: PendingRequest) -> bool:
        """Was anything queued after ``request``? (Then re-sending it would reorder.)"""
        return self._queued != request.seq

    @property
    def error(self) -> StreamwireError | None:
        """Why the machine failed, once it has."""
        return self._error

    @property
    def is_ready(self) -> bool:
        return self.state is ConnectionState.READY

    def data_to_send(self) -> BytesLike:
        """Everything queued for the socket, in order; clears the queue. One frame is handed
        over as it is (a producer's batch, framed in place, is not copied again)."""
        out, self._out = self._out, []
        return out[0] if len(out) == 1 else b"".join(out)

    def _check_usable(self) -> None:
        if self._error is not None:
            raise self._error
        if self.state is ConnectionState.CLOSED:
            raise ClosedError("the Iggy connection is closed")

    # --- requests ------------------------------------------------------------------------

    def login(self, payload: RequestPayload[LoginReply], now: float) -> PendingRequest:
        """Queue a Register (LoginRegister or LoginRegisterWithToken). Mints a new client id."""
        self._check_usable()
        if payload.command not in _LOGIN_CODES:
            raise ConfigurationError(f"{type(payload).__name__} is not a login request")
        if self.state is ConnectionState.REGISTERING or self._pending:
            raise BusyError("another request is in flight")
        self.client_id = random_message_id(self._random)
        self.session = 0
        self.next_request = 1
        self.state = ConnectionState.REGISTERING
        return self._queue(payload, Operation.REGISTER, 0, 0, now, None)

    def send(
        self, payload: RequestPayload[Any], now: float, *, timeout: float | None = None
    ) -> PendingRequest:
        """Queue a request (anything but a login). Raises :class:`BusyError` while another
        request awaits its reply and :class:`ClientStateError` before login (only Ping may
        be sent then)."""
        self._check_usable()
        spec = COMMANDS[payload.command]
        operation = spec.operation
        if operation is None or operation is Operation.REGISTER:
            raise ConfigurationError(f"{payload.command.name} cannot be sent with send()")
        if not self.can_send(operation):
            raise BusyError(
                f"cannot send {payload.command.name} with {len(self._pending)} request(s) in flight"
            )
        if self.state is not ConnectionState.READY and payload.command is not Command.PING:
            raise ClientStateError(f"not logged in: cannot send {payload.command.name}")
        if operation.is_replicated:
            number = self.next_request
            self.next_request += 1
        else:
            number = self.next_request
        return self._queue(payload, operation, number, self.session, now, timeout)

    def _queue(
        self,
        payload: RequestPayload[Any],
        operation: Operation,
        number: int,
        session: int,
        now: float,
        timeout: float | None,
    ) -> PendingRequest:
        body = payload.encode_parts()
        seq = self._next_seq()
        stamp = seq if any(p.request == number for p in self._pending) else 0
        frame = encode_request(
            body,
            client=self.client_id,
            request=number,
            operation=operation,
            session=session,
            code=payload.command,
            stamp_checksum=self.settings.stamp_checksums and operation.stamps_checksum,
            timestamp=stamp,
        )
        wait = self.settings.request_timeout if timeout is None else timeout
        pending = PendingRequest(
            payload=payload,
            command=payload.command,
            operation=operation,
            request=number,
            sent_at=now,
            deadline=now + wait,
            frame=frame,
            seq=seq,
            stamp=stamp,
        )
        self._out.append(frame)
        self._pending.append(pending)
        self._last_activity = now
        return pending

    def _next_seq(self) -> int:
        self._queued += 1
        return self._queued

    def retry(self, pending: PendingRequest, now: float) -> PendingRequest:
        """Send the identical frame again (same request number), e.g. after a transient
        57/58 rejection, so that the server can deduplicate it."""
        self._check_usable()
        if self._pending:
            raise BusyError("another request is in flight")
        if self.queued_after(pending):
            raise BusyError("a later request was sent: re-sending this one would reorder them")
        again = PendingRequest(
            payload=pending.payload,
            command=pending.command,
            operation=pending.operation,
            request=pending.request,
            sent_at=now,
            deadline=now + (pending.deadline - pending.sent_at),
            frame=pending.frame,
            attempts=pending.attempts + 1,
            seq=self._next_seq(),
            stamp=pending.stamp,
        )
        if again.operation is Operation.REGISTER:
            self.state = ConnectionState.REGISTERING
        self._out.append(again.frame)
        self._pending.append(again)
        self._last_activity = now
        return again

    # --- time ----------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When :meth:`advance_time` next has something to do."""
        if self.state in (ConnectionState.FAILED, ConnectionState.CLOSED):
            return None
        if self._pending:
            return min(p.deadline for p in self._pending)
        interval = self.settings.heartbeat_interval
        if interval is None or self.state is not ConnectionState.READY:
            return None
        return self._last_activity + interval

    def advance_time(self, now: float) -> list[ev.Event]:
        """Report a reply deadline that passed, or that a heartbeat Ping is due."""
        if self.state in (ConnectionState.FAILED, ConnectionState.CLOSED):
            return []
        if self._pending:
            late = [p for p in self._pending if now >= p.deadline]
            if not late:
                return []
            pending = late[0]
            waited = now - pending.sent_at
            self._fail(RequestTimeout(f"no reply to {pending.command.name} within {waited:.3g} s"))
            self._pending.clear()
            return [ev.ReplyTimedOut(pending, waited)]
        interval = self.settings.heartbeat_interval
        if (
            interval is not None
            and self.state is ConnectionState.READY
            and now - self._last_activity >= interval
        ):
            self._last_activity = now
            return [ev.HeartbeatDue()]
        return []

    # --- inbound -------------------------------------------------------------------------

    def receive_data(self, data: BytesLike, now: float) -> list[ev.Event]:
        """Feed bytes read from the socket (``b""`` = end of stream)."""
        if self._error is not None:
            raise self._error
        events: list[ev.Event] = []
        if not data:
            if self.state is not ConnectionState.CLOSED:
                self._fail(ConnectionClosed("the Iggy server closed the connection"))
            self._pending.clear()
            events.append(ev.ConnectionClosedByPeer())
            return events
        self._frames.feed(data)
        try:
            while (frame := self._frames.next_frame()) is not None:
                decoded = decode_server_frame(frame)
                if isinstance(decoded, Eviction):
                    self._evicted(decoded, events)
                    break
                self._reply(decoded, events)
        except RemoteProtocolError as exc:
            self._fail(exc)
            self._pending.clear()
            events.append(ev.ProtocolFailed(exc))
        return events

    def _evicted(self, frame: Eviction, events: list[ev.Event]) -> None:
        error = eviction_error(
            frame.reason,
            server_version=frame.server_version,
            server_version_min=frame.server_version_min,
        )
        self._fail(error)
        pending, self._pending = self._pending, deque()
        events.extend(ev.RequestFailed(p, error) for p in pending)
        events.append(ev.Evicted(frame.reason, error))

    def _reply(self, reply: Reply, events: list[ev.Event]) -> None:
        pending = self._match(reply)
        stats = self.stats
        stats.replies += 1
        if reply.operation != pending.operation:
            stats.foreign_operation += 1
        if reply.client not in (0, self.client_id):
            stats.foreign_client += 1
        if reply.status:
            self._rejected(pending, reply.status, events)
            return
        body: BytesLike = reply.body
        if _result_framed(reply.operation, pending.operation, body):
            code, body = split_result_section(body)
            if code is not None:
                self._rejected(pending, code, events)
                return
        try:
            result = pending.payload.parse_reply(body)
        except RemoteProtocolError:
            raise
        except StreamwireError as exc:  # a value the payload classes refuse
            raise RemoteProtocolError(f"invalid {pending.command.name} reply: {exc}") from exc
        if pending.operation is Operation.REGISTER:
            self._logged_in(result, events)
        events.append(ev.ReplyReceived(pending, result))

    def _match(self, reply: Reply) -> PendingRequest:
        """Take the pending request ``reply`` answers (see the module docstring)."""
        queue = self._pending
        if not queue:
            raise RemoteProtocolError(f"a reply (request {reply.request}) nobody asked for")
        oldest = queue[0]
        if (
            oldest.request == reply.request
            and oldest.operation == reply.operation
            and (oldest.stamp == reply.timestamp or not reply.timestamp)
        ):
            return queue.popleft()  # the common case: in order
        by_stamp = by_operation = by_number = -1
        for index, candidate in enumerate(queue):
            if candidate.request != reply.request:
                continue
            if reply.timestamp and candidate.stamp == reply.timestamp:
                by_stamp = index
                break
            if by_operation < 0 and candidate.operation == reply.operation:
                by_operation = index
            if by_number < 0:
                by_number = index
        if by_stamp >= 0:
            index = by_stamp
        elif by_operation >= 0:
            index = by_operation
        else:
            index = by_number
        if index < 0:
            waiting = ", ".join(f"{p.command.name} #{p.request}" for p in queue)
            raise RemoteProtocolError(
                f"a reply to request {reply.request} (operation {reply.operation}), which no"
                f" pending request has (waiting: {waiting})"
            )
        if index:
            self.stats.out_of_order += 1
        pending = queue[index]
        del queue[index]
        return pending

    def _rejected(self, pending: PendingRequest, code: int, events: list[ev.Event]) -> None:
        error = ERRORS.from_code(code)
        if pending.operation is Operation.REGISTER:
            self.state = ConnectionState.IDLE
        events.append(ev.RequestFailed(pending, error))

    def _logged_in(self, result: object, events: list[ev.Event]) -> None:
        if not isinstance(result, LoginReply):
            raise RemoteProtocolError("empty login reply")
        self.session = result.session
        self.user_id = result.user_id
        self.server_version = result.server_version
        self.server_protocol_version = result.server_protocol_version
        self.next_request = 1
        self.state = ConnectionState.READY
        events.append(
            ev.LoggedIn(
                result.user_id,
                result.session,
                result.server_protocol_version,
                result.server_version,
            )
        )

    # --- ending --------------------------------------------------------------------------

    def _fail(self, error: StreamwireError) -> None:
        if self._error is None:
            self._error = error
        self.state = ConnectionState.FAILED

    def close(self) -> None:
        """Mark the connection closed locally; later calls raise :class:`ClosedError`."""
        if self.state is not ConnectionState.FAILED:
            self.state = ConnectionState.CLOSED
        self._pending.clear()


def _result_framed(operation: int, sent: Operation, body: BytesLike) -> bool:
    """Does a result section lead this reply's body? Decided by the reply's operation, as
    the official SDK does: internal operations (64..127, e.g. CreateTopicWithAssignments)
    are metadata and framed; an operation byte we do not know falls back to the request's.
    Register is framed only when its body is non-empty (a terminal failure has none)."""
    try:
        op = Operation(operation)
    except ValueError:
        op = None
    if op is None:
        if _INTERNAL_OPERATIONS[0] <= operation <= _INTERNAL_OPERATIONS[1]:
            return True
        op = sent
    if op is Operation.REGISTER:
        return len(body) > 0
    return op.result_framed
