"""The RabbitMQ Streams connection as a sans-IO state machine.

Bytes in (:meth:`StreamsConnection.receive_data`), events out, bytes to send
(:meth:`StreamsConnection.data_to_send`). The machine drives the handshake on its own
(PeerProperties → SaslHandshake → SaslAuthenticate → Tune → Open → ExchangeCommandVersions),
answers the broker's Tune and Close, and sends heartbeats; it never reads a clock: every
entry point takes ``now`` (seconds, any monotonic origin).

A malformed frame moves the machine to ``FAILED`` and ends the event list with
:class:`ProtocolFailed`; every later call raises that error again (h11's sticky error state).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Final, TypeVar

from streamwire.codec.framing import LENGTH_PREFIX_U32, FrameAccumulator
from streamwire.errors import (
    AuthenticationError,
    ClosedError,
    ConfigurationError,
    LocalProtocolError,
    RemoteProtocolError,
    StreamwireError,
)
from streamwire.rabbitmq.protocol import events as ev
from streamwire.rabbitmq.protocol._frame import Frame, Response, encode_frame
from streamwire.rabbitmq.protocol.connection import (
    CloseRequest,
    CommandVersion,
    ExchangeCommandVersionsRequest,
    ExchangeCommandVersionsResponse,
    Heartbeat,
    OpenRequest,
    OpenResponse,
    PeerPropertiesRequest,
    PeerPropertiesResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    SimpleResponse,
    Tune,
    TuneResponse,
)
from streamwire.rabbitmq.protocol.constants import (
    DEFAULT_FRAME_MAX,
    DEFAULT_HEARTBEAT,
    RESPONSE_FLAG,
    CommandKey,
    ResponseCode,
)
from streamwire.rabbitmq.protocol.consuming import (
    ConsumerUpdateRequest,
    ConsumerUpdateResponse,
    CreditResponse,
    Deliver,
)
from streamwire.rabbitmq.protocol.errors import ERRORS
from streamwire.rabbitmq.protocol.frames import decode_frame
from streamwire.rabbitmq.protocol.publishing import PublishConfirm, PublishError
from streamwire.rabbitmq.protocol.streams import MetadataUpdate

__all__ = ("ConnectionSettings", "ConnectionState", "ProtocolFailed", "StreamsConnection")

_OK: Final = ResponseCode.OK
_CLIENT_TO_SERVER_RESPONSES: Final = frozenset(
    {CommandKey.TUNE | RESPONSE_FLAG, CommandKey.CONSUMER_UPDATE | RESPONSE_FLAG}
)
_MECHANISMS: Final = ("PLAIN", "EXTERNAL", "ANONYMOUS")
_R = TypeVar("_R", bound=Response)


class ConnectionState(Enum):
    IDLE = "idle"
    PEER_PROPERTIES = "peer-properties"
    SASL_HANDSHAKE = "sasl-handshake"
    AUTHENTICATING = "authenticating"
    TUNING = "tuning"
    OPENING = "opening"
    NEGOTIATING = "negotiating"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ProtocolFailed(ev.Event):
    """The broker broke the protocol; the connection is unusable."""

    error: RemoteProtocolError


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionSettings:
    """What the machine needs to open a connection. ``password`` is never shown."""

    username: str | None = "guest"
    password: str | None = field(default="guest", repr=False)
    vhost: str = "/"
    mechanism: str | None = None
    """PLAIN, EXTERNAL or ANONYMOUS; ``None`` picks PLAIN with a username, else ANONYMOUS."""
    connection_name: str | None = None
    client_properties: dict[str, str] = field(default_factory=dict)
    frame_max: int = DEFAULT_FRAME_MAX
    """Largest frame we ask for (0 = no limit); the smaller non-zero value wins."""
    heartbeat: int = DEFAULT_HEARTBEAT
    """Heartbeat interval in whole seconds we ask for (0 = none)."""
    max_inbound_frame_bytes: int = 64 * 1024 * 1024
    """Hard bound on any inbound frame once open. Deliver frames may exceed frame_max (a
    chunk is never split), so this is separate from it."""
    max_handshake_frame_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        if self.mechanism is not None and self.mechanism not in _MECHANISMS:
            raise ConfigurationError(f"unsupported SASL mechanism {self.mechanism!r}")
        if not 0 <= self.heartbeat <= 0xFFFFFFFF or not 0 <= self.frame_max <= 0xFFFFFFFF:
            raise ConfigurationError("frame_max and heartbeat must fit in uint32")
        if self.frame_max and self.frame_max < 64:
            raise ConfigurationError("frame_max must be 0 (no limit) or at least 64 bytes")
        if min(self.max_inbound_frame_bytes, self.max_handshake_frame_bytes) < 64:
            raise ConfigurationError("inbound frame bounds must be at least 64 bytes")


#: Frames as they came, their size prefix kept: the machine decodes each body as a view of
#: its frame, so a large frame handed in whole (``open_tcp(frames=LENGTH_PREFIX_U32)``) is
#: not copied again to drop four bytes.
_WHOLE_FRAMES: Final = replace(LENGTH_PREFIX_U32, strip_header=False)
_SIZE_PREFIX: Final = LENGTH_PREFIX_U32.header_size


def negotiate(ours: int, theirs: int) -> int:
    """Tune rule: the smaller non-zero value; 0 only when both are 0."""
    if ours and theirs:
        return min(ours, theirs)
    return ours or theirs


def _version_tuple(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


class StreamsConnection:
    """One RabbitMQ Streams connection, without I/O."""

    def __init__(self, settings: ConnectionSettings | None = None) -> None:
        self.settings = settings or ConnectionSettings()
        self.state = ConnectionState.IDLE
        self._frames = FrameAccumulator(
            _WHOLE_FRAMES, max_frame_size=self.settings.max_handshake_frame_bytes
        )
        self._out: list[bytes] = []
        self._next_id = 0
        self._handshake_id = 0
        self._error: StreamwireError | None = None
        self._now = 0.0
        self._last_received = 0.0
        self._last_sent = 0.0
        self.server_properties: dict[str, str] = {}
        self.connection_properties: dict[str, str] = {}
        self.command_versions: dict[int, tuple[int, int]] = {}
        self.frame_max = 0
        self.heartbeat = 0
        self._mechanisms: tuple[str, ...] = ()

    # --- driver API ----------------------------------------------------------------------

    def start(self, now: float) -> None:
        """Begin the handshake: queues PeerProperties."""
        if self.state is not ConnectionState.IDLE:
            raise LocalProtocolError(f"start() in state {self.state.value}")
        self._now = self._last_received = now
        props = {
            "product": "streamwire",
            "version": "0.1.0",
            "platform": f"Python {platform.python_version()}",
            "copyright": "streamwire developers",
            "information": "asyncio client for RabbitMQ Streams",
            **(
                {"connection_name": self.settings.connection_name}
                if self.settings.connection_name
                else {}
            ),
            **self.settings.client_properties,
        }
        self._handshake_id = self.next_correlation_id()
        self._queue(PeerPropertiesRequest(self._handshake_id, props))
        self.state = ConnectionState.PEER_PROPERTIES

    def next_correlation_id(self) -> int:
        """A fresh correlation id (31-bit, wrapping; ids are never 0)."""
        self._next_id = (self._next_id % 0x7FFFFFFF) + 1
        return self._next_id

    def data_to_send(self) -> bytes:
        """Everything queued for the socket, in order; clears the queue."""
        if not self._out:
            return b""
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        return data

    @property
    def has_data_to_send(self) -> bool:
        return bool(self._out)

    def send(self, frame: Frame) -> None:
        """Queue a frame. Only once open (and while closing, for answers)."""
        self._require_open()
        self._queue(frame)

    def send_encoded(self, data: bytes) -> None:
        """Queue frames that are already encoded (the publish hot path)."""
        self._require_open()
        self._out.append(data)
        self._last_sent = self._now

    def answer_consumer_update(
        self, correlation_id: int, offset_type: int = 0, offset: int | None = None
    ) -> None:
        self.send(ConsumerUpdateResponse(correlation_id, _OK, offset_type, offset))

    def close(self, code: int = _OK, reason: str = "OK") -> int:
        """Queue Close; returns its correlation id (the answer comes as ResponseReceived)."""
        self._require_open()
        corr = self.next_correlation_id()
        self._queue(CloseRequest(corr, code, reason))
        self.state = ConnectionState.CLOSING
        return corr

    @property
    def is_open(self) -> bool:
        return self.state is ConnectionState.OPEN

    def server_version(self) -> tuple[int, ...]:
        return _version_tuple(self.server_properties.get("version", ""))

    def supports(self, key: int, version: int = 1) -> bool:
        """Whether the broker accepts ``key`` at ``version`` (from ExchangeCommandVersions)."""
        span = self.command_versions.get(key)
        return span is not None and span[0] <= version <= span[1]

    def next_deadline(self) -> float | None:
        """When :meth:`advance_time` next has work to do (``None``: no heartbeats)."""
        if not self.heartbeat or self.state not in (ConnectionState.OPEN, ConnectionState.CLOSING):
            return None
        return min(self._last_sent + self.heartbeat, self._last_received + 2 * self.heartbeat)

    def advance_time(self, now: float) -> list[ev.Event]:
        """Send a heartbeat when write-idle; report the peer silent after two intervals."""
        self._raise_if_failed()
        self._now = max(self._now, now)
        hb = self.heartbeat
        if not hb or self.state not in (ConnectionState.OPEN, ConnectionState.CLOSING):
            return []
        silent = now - self._last_received
        if silent >= 2 * hb:
            self._error = RemoteProtocolError(f"no traffic from the broker for {silent:.1f} s")
            self.state = ConnectionState.FAILED
            return [ev.PeerWentSilent(silent)]
        if now - self._last_sent >= hb:
            self._queue(Heartbeat())
        return []

    def receive_data(self, data: bytes | bytearray | memoryview, now: float) -> list[ev.Event]:
        """Feed bytes from the socket (``b""`` = end of stream); returns what happened."""
        self._raise_if_failed()
        self._now = max(self._now, now)
        events: list[ev.Event] = []
        if not data:
            expected = self.state in (ConnectionState.CLOSING, ConnectionState.CLOSED)
            if not expected and self.state is not ConnectionState.OPEN:
                # end of stream mid-handshake: the failure is the event, and it stays sticky
                self._fail_handshake(events, ClosedError("the broker closed the connection"))
                return events
            self.state = ConnectionState.CLOSED
            events.append(ev.ConnectionClosedByPeer(expected))
            return events
        self._last_received = now
        self._frames.feed(data)
        try:
            while (frame := self._frames.next_frame()) is not None:
                # the body is a view of the frame: a large frame fed whole (a Deliver the
                # transport received into one buffer of its size) is decoded where it lies
                self._handle(decode_frame(memoryview(frame)[_SIZE_PREFIX:]), events)
                if self.state is ConnectionState.FAILED:
                    break  # a failed handshake ends the stream: ignore what follows
        except RemoteProtocolError as exc:
            self._error = exc
            self.state = ConnectionState.FAILED
            events.append(ProtocolFailed(exc))
        return events

    # --- internals -----------------------------------------------------------------------

    def _queue(self, frame: Frame) -> None:
        self._out.append(encode_frame(frame))
        self._last_sent = self._now

    def _raise_if_failed(self) -> None:
        if self.state is ConnectionState.FAILED and self._error is not None:
            raise self._error

    def _require_open(self) -> None:
        self._raise_if_failed()
        if self.state not in (ConnectionState.OPEN, ConnectionState.CLOSING):
            raise ClosedError(f"connection is {self.state.value}")

    def _fail_handshake(self, events: list[ev.Event], error: StreamwireError) -> None:
        self.state = ConnectionState.FAILED
        self._error = error
        events.append(ev.HandshakeFailed(error))

    def _expect(self, frame: Frame, cls: type[_R]) -> _R:
        # exact type: OpenResponse subclasses PeerPropertiesResponse (same layout)
        if type(frame) is not cls or frame.correlation_id != self._handshake_id:
            raise RemoteProtocolError(
                f"expected {cls.__name__} during {self.state.value}, got {type(frame).__name__}"
            )
        return frame

    def _handle(self, frame: Frame, events: list[ev.Event]) -> None:
        if isinstance(frame, Heartbeat):
            return
        if isinstance(frame, CloseRequest):
            self._queue(SimpleResponse(frame.correlation_id, _OK, CommandKey.CLOSE))
            if self.state not in (
                ConnectionState.OPEN,
                ConnectionState.CLOSING,
                ConnectionState.CLOSED,  # a Close crossing ours is not a handshake failure
            ):
                self._fail_handshake(events, ERRORS.from_code(frame.code, frame.reason))
            self.state = ConnectionState.CLOSED
            events.append(ev.CloseRequested(frame.code, frame.reason))
            return
        state = self.state
        if state in (ConnectionState.OPEN, ConnectionState.CLOSING):
            self._handle_open(frame, events)
        elif state is ConnectionState.CLOSED:
            return  # late frames after a close are dropped
        else:
            self._handle_handshake(frame, events)

    def _handle_handshake(self, frame: Frame, events: list[ev.Event]) -> None:
        state = self.state
        if state is ConnectionState.PEER_PROPERTIES:
            frame = self._expect(frame, PeerPropertiesResponse)
            if frame.code != _OK:
                self._fail_handshake(events, ERRORS.from_code(frame.code, "peer properties"))
                return
            self.server_properties = dict(frame.properties)
            self._handshake_id = self.next_correlation_id()
            self._queue(SaslHandshakeRequest(self._handshake_id))
            self.state = ConnectionState.SASL_HANDSHAKE
        elif state is ConnectionState.SASL_HANDSHAKE:
            frame = self._expect(frame, SaslHandshakeResponse)
            self._authenticate(frame.mechanisms, events)
        elif state is ConnectionState.AUTHENTICATING:
            frame = self._expect(frame, SaslAuthenticateResponse)
            if frame.code != _OK:
                self._fail_handshake(events, ERRORS.from_code(frame.code))
            else:
                self.state = ConnectionState.TUNING
        elif state is ConnectionState.TUNING:
            if not isinstance(frame, Tune) or isinstance(frame, TuneResponse):
                raise RemoteProtocolError(f"expected Tune, got {type(frame).__name__}")
            self.frame_max = negotiate(self.settings.frame_max, frame.frame_max)
            self.heartbeat = negotiate(self.settings.heartbeat, frame.heartbeat)
            self._queue(TuneResponse(self.frame_max, self.heartbeat))
            self._handshake_id = self.next_correlation_id()
            self._queue(OpenRequest(self._handshake_id, self.settings.vhost))
            self.state = ConnectionState.OPENING
        elif state is ConnectionState.OPENING:
            frame = self._expect(frame, OpenResponse)
            if frame.code != _OK:
                self._fail_handshake(
                    events, ERRORS.from_code(frame.code, f"vhost {self.settings.vhost!r}")
                )
                return
            self.connection_properties = dict(frame.properties)
            self._frames.max_frame_size = self.settings.max_inbound_frame_bytes
            if self.server_version() >= (3, 11):
                self._handshake_id = self.next_correlation_id()
                wanted = (CommandVersion(CommandKey.DELIVER, 1, 2),)
                self._queue(ExchangeCommandVersionsRequest(self._handshake_id, wanted))
                self.state = ConnectionState.NEGOTIATING
            else:
                self._opened(events)
        elif state is ConnectionState.NEGOTIATING:
            frame = self._expect(frame, ExchangeCommandVersionsResponse)
            if frame.code != _OK:
                self._fail_handshake(events, ERRORS.from_code(frame.code, "command versions"))
                return
            self.command_versions = {v.key: (v.min_version, v.max_version) for v in frame.versions}
            self._opened(events)
        else:
            raise LocalProtocolError(f"receive_data() before start() (state {state.value})")

    def _authenticate(self, offered: tuple[str, ...], events: list[ev.Event]) -> None:
        s = self.settings
        mechanism = s.mechanism or ("PLAIN" if s.username is not None else "ANONYMOUS")
        if mechanism not in offered:
            self._fail_handshake(
                events,
                AuthenticationError(
                    f"the broker does not offer SASL {mechanism} (offered: {', '.join(offered)})"
                ),
            )
            return
        if mechanism == "PLAIN":
            data: bytes | None = (
                b"\0" + (s.username or "").encode() + b"\0" + (s.password or "").encode()
            )
        else:
            data = b""
        self._handshake_id = self.next_correlation_id()
        self._queue(SaslAuthenticateRequest(self._handshake_id, mechanism, data))
        self.state = ConnectionState.AUTHENTICATING

    def _opened(self, events: list[ev.Event]) -> None:
        self.state = ConnectionState.OPEN
        events.append(
            ev.ConnectionOpened(
                dict(self.server_properties),
                dict(self.connection_properties),
                self.frame_max,
                self.heartbeat,
                dict(self.command_versions),
            )
        )

    def _handle_open(self, frame: Frame, events: list[ev.Event]) -> None:
        if isinstance(frame, Deliver):
            events.append(
                ev.ChunkDelivered(frame.subscription_id, frame.chunk, frame.committed_chunk_id)
            )
        elif isinstance(frame, PublishConfirm):
            events.append(ev.PublishConfirmed(frame.publisher_id, frame.publishing_ids))
        elif isinstance(frame, PublishError):
            events.append(ev.PublishErrored(frame.publisher_id, frame.errors))
        elif isinstance(frame, MetadataUpdate):
            events.append(ev.MetadataChanged(frame.stream, frame.code))
        elif isinstance(frame, CreditResponse):
            events.append(ev.CreditFailed(frame.subscription_id, frame.code))
        elif isinstance(frame, ConsumerUpdateRequest):
            events.append(
                ev.ConsumerUpdateRequested(
                    frame.correlation_id, frame.subscription_id, frame.active
                )
            )
        elif frame.key & RESPONSE_FLAG and frame.key not in _CLIENT_TO_SERVER_RESPONSES:
            corr: int = getattr(frame, "correlation_id")  # noqa: B009 - every response has one
            if isinstance(frame, SimpleResponse) and frame.command == CommandKey.CLOSE:
                self.state = ConnectionState.CLOSED
            events.append(ev.ResponseReceived(corr, frame))
        else:
            raise RemoteProtocolError(f"unexpected {type(frame).__name__} from the broker")
