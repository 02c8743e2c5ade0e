"""The streamwire exception hierarchy: one root, sorted by kind of failure.

Everything the SDK raises derives from :class:`StreamwireError`. Foreign exceptions
(``OSError``, ``ssl.SSLError``, nats and grpc errors) are translated at the boundary
where they occur and chained as ``__cause__``.

::

    StreamwireError
    ├── ConfigurationError (also ValueError)
    ├── TransportError
    │   ├── ConnectError
    │   ├── ConnectionClosed          (alias ConnectionClosedError)
    │   ├── ReadError
    │   └── WriteError
    ├── TimeoutError (also builtins.TimeoutError)
    │   ├── ConnectTimeout
    │   ├── RequestTimeout
    │   ├── FlushTimeout
    │   └── CloseTimeout
    ├── ProtocolError
    │   ├── LocalProtocolError
    │   └── RemoteProtocolError
    │       ├── DecodeError
    │       ├── FrameTooLargeError
    │       └── ChecksumMismatchError
    ├── ServerError                   .code, .message; per-protocol subclasses are registered
    ├── StreamAlreadyExistsError      create_stream on an existing stream (every broker's class)
    ├── StreamNotFoundError           no such stream (every broker's class)
    ├── UncommittedTailError          a tail only the next write commits (.stream, .tails)
    ├── HeaderKindError (also TypeError)
    ├── AuthenticationError           (protocol auth failures also derive from ServerError)
    ├── ClientStateError
    │   ├── ClosedError
    │   └── BusyError
    └── BackpressureError
        └── ProducerBufferFull
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import ClassVar

__all__ = (
    "AuthenticationError",
    "BackpressureError",
    "BusyError",
    "ChecksumMismatchError",
    "ClientStateError",
    "CloseTimeout",
    "ClosedError",
    "ConfigurationError",
    "ConnectError",
    "ConnectTimeout",
    "ConnectionClosed",
    "ConnectionClosedError",
    "DecodeError",
    "FlushTimeout",
    "FrameTooLargeError",
    "HeaderKindError",
    "LocalProtocolError",
    "MissingDependency",
    "ProducerBufferFull",
    "ProtocolError",
    "ReadError",
    "RemoteProtocolError",
    "RequestTimeout",
    "ServerError",
    "StreamAlreadyExistsError",
    "StreamNotFoundError",
    "StreamwireError",
    "TimeoutError",
    "UncommittedTailError",
    "UnindexedRecordsError",
    "UnsupportedByBroker",
    "TransportError",
    "WriteError",
)


#: ``protocol -> from_code(code, message)``, filled by each protocol's
#: :class:`~streamwire.codec.registry.ErrorRegistry` as it is made (this module imports no
#: other streamwire module, so every layer can import it).
CODE_LOOKUPS: dict[str, Callable[[int, str], ServerError]] = {}


class StreamwireError(Exception):
    """Root of every exception raised by streamwire."""


class ConfigurationError(StreamwireError, ValueError):
    """Bad arguments, options or URL."""


class UnsupportedByBroker(ConfigurationError):
    """The broker (or its version) lacks what was asked for; the message names what it
    needs, e.g. ``RabbitMQ 4.0.5 has no ResolveOffsetSpec (needs 4.3)``."""


class MissingDependency(ConfigurationError, ImportError):
    """A feature needs an optional extra that is not installed.

    The message names the ``pip install`` to run; :attr:`extra` is the extra's name and
    :attr:`missing` the module that could not be imported. It is an :class:`ImportError` too,
    so ``except ImportError`` around an import of the feature's module still works.
    """

    def __init__(self, feature: str, extra: str, missing: str) -> None:
        super().__init__(
            f"{feature} needs the {extra!r} extra ({missing} is not installed): "
            f"pip install 'streamwire[{extra}]'"
        )
        self.extra = extra
        self.missing = missing


# --- transport ---------------------------------------------------------------------------


class TransportError(StreamwireError):
    """The byte stream failed."""


class ConnectError(TransportError):
    """The connection could not be established (DNS, refused, TLS handshake failed)."""


class ConnectionClosed(TransportError):
    """The connection closed while in use. ``reason`` says why; ``__cause__`` is the original."""

    def __init__(self, reason: str = "connection closed") -> None:
        super().__init__(reason)
        self.reason = reason


ConnectionClosedError = ConnectionClosed


class ReadError(TransportError):
    """Reading from the connection failed."""


class WriteError(TransportError):
    """Writing to the connection failed."""


# --- timeouts ----------------------------------------------------------------------------


class TimeoutError(StreamwireError, builtins.TimeoutError):
    """An operation did not finish in time. ``except TimeoutError`` (the builtin) catches it."""


class ConnectTimeout(TimeoutError):
    """Connecting (TCP + TLS + handshake + authentication) took longer than its budget."""


class RequestTimeout(TimeoutError):
    """The broker did not answer a request in time."""


class FlushTimeout(TimeoutError):
    """Outstanding publishes were not confirmed in time."""


class CloseTimeout(TimeoutError):
    """Closing did not finish in time; the connection was aborted."""


# --- protocol ----------------------------------------------------------------------------


class ProtocolError(StreamwireError):
    """Someone broke the wire protocol."""


class LocalProtocolError(ProtocolError):
    """We were asked to do something the protocol forbids (too long a string, bad state)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something invalid."""


class DecodeError(RemoteProtocolError):
    """Bytes could not be decoded. ``offset`` is where decoding stopped, ``what`` what was read."""

    def __init__(self, what: str, offset: int | None = None, *, frame: str | None = None) -> None:
        where = f" at offset {offset}" if offset is not None else ""
        in_frame = f" in {frame}" if frame else ""
        super().__init__(f"cannot decode {what}{in_frame}{where}")
        self.what = what
        self.offset = offset
        self.frame = frame


class FrameTooLargeError(RemoteProtocolError):
    """An inbound frame announced a size above the configured bound; nothing was allocated."""

    def __init__(self, size: int, limit: int, *, head: bytes = b"", detail: str = "") -> None:
        super().__init__(
            f"frame of {size} bytes exceeds the limit of {limit} bytes"
            + (f": {detail}" if detail else "")
        )
        self.size = size
        self.limit = limit
        #: The bytes that announced the size (the frame's start, up to 16): what a server
        #: of another kind said, when a client reached the wrong port.
        self.head = head


class ChecksumMismatchError(RemoteProtocolError):
    """A checksum carried on the wire does not match the data."""

    def __init__(self, what: str, expected: int, actual: int) -> None:
        super().__init__(f"{what} checksum mismatch: expected {expected:#x}, computed {actual:#x}")
        self.what = what
        self.expected = expected
        self.actual = actual


# --- server ------------------------------------------------------------------------------


class ServerError(StreamwireError):
    """The broker answered with an error code.

    Protocol packages subclass this per code (see :mod:`streamwire.codec.registry`) and set
    the class attributes. ``retriable`` says whether the same request may succeed later;
    ``connection_usable`` whether the connection survives the error.
    """

    protocol: ClassVar[str] = ""
    default_code: ClassVar[int | None] = None
    code_name: ClassVar[str] = ""
    """The code's name, e.g. ``STREAM_DOES_NOT_EXIST`` (set by the registry)."""
    description: ClassVar[str] = ""
    """What the code means, e.g. ``Stream does not exist.`` (set by the registry)."""
    retriable: ClassVar[bool] = False
    connection_usable: ClassVar[bool] = True

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        self.code: int | None = code if code is not None else self.default_code
        self.message = message or self.description or self.__class__.__name__
        label = f"{self.protocol} " if self.protocol else ""
        if self.code is None:
            super().__init__(self.message)
        elif self.code_name:
            # "rabbitmq STREAM_DOES_NOT_EXIST (0x0002): Stream does not exist: stream 's'"
            text = self.description or self.message
            if message and message != self.description:
                text = f"{text.rstrip('.')}: {message}" if self.description else message
            super().__init__(f"{label}{self.code_name} ({self.code:#06x}): {text}")
        else:
            super().__init__(f"{label}error {self.code:#06x}: {self.message}")

    @staticmethod
    def from_code(protocol: str, code: int, message: str = "") -> ServerError:
        """The exception instance for ``code`` of ``protocol`` (``Unknown...`` if unlisted);
        ``LookupError`` for a protocol whose package was not imported."""
        try:
            lookup = CODE_LOOKUPS[protocol]
        except KeyError:
            raise LookupError(f"no error registry for {protocol!r}") from None
        return lookup(code, message)


class StreamAlreadyExistsError(StreamwireError):
    """``create_stream`` without ``exist_ok`` named a stream that exists. Each broker's own
    class for it (RabbitMQ ``StreamAlreadyExists``, Liftbridge ``StreamAlreadyExists``, Iggy
    ``StreamNameAlreadyExists`` / ``TopicNameAlreadyExists``) derives from this one too."""


class StreamNotFoundError(StreamwireError):
    """The stream does not exist (``delete_stream`` without ``missing_ok``, among others).
    Each broker's own class for it (RabbitMQ ``StreamDoesNotExist``, Liftbridge
    ``StreamNotFound``, Iggy's stream and topic "not found" codes) derives from this one too."""


class UncommittedTailError(StreamwireError):
    """Messages at the tail of a partition are appended but not committed, and nothing but
    the next write to the partition will commit them: no reader sees them meanwhile, so
    code that reads a partition back to learn what a writer stored cannot tell whether they
    hold its messages. Seen on a Liftbridge server restarted after a crash, which forgets its
    high watermark (docs/liftbridge.md, "After a crash").

    :attr:`stream` is the stream, :attr:`tails` maps each such partition to the first and
    the last offset not committed. :meth:`streamwire.Settling.commit_tail` commits them (by
    writing one empty message); any other write to the partition does too."""

    def __init__(self, message: str, stream: str, tails: dict[int, tuple[int, int]]) -> None:
        super().__init__(message)
        self.stream = stream
        self.tails = tails

    def __reduce__(self) -> tuple[object, ...]:  # picklable: Spark ships it to the driver
        return (type(self), (str(self), self.stream, self.tails))


class UnindexedRecordsError(StreamwireError):
    """A partition's log holds records past the offsets its server reports: records written
    to the log file whose index entries were lost. Seen on a Liftbridge server killed between
    writing a batch to its log and to its index, then started again: it takes the index's
    last entry for its newest offset and gives the following offsets to later messages, while
    a reader from an earlier offset reads the lost records too, under those same offsets
    (docs/liftbridge.md, "After a crash"). The server acknowledged none of them.

    :attr:`stream` and :attr:`partition` name the partition, :attr:`first` is the first
    offset given twice, :attr:`count` the records found under it and after it (``None``
    when they were more than was read)."""

    def __init__(
        self, message: str, stream: str, partition: int, first: int, count: int | None
    ) -> None:
        super().__init__(message)
        self.stream = stream
        self.partition = partition
        self.first = first
        self.count = count

    def __reduce__(self) -> tuple[object, ...]:  # picklable: Spark ships it to the driver
        return (type(self), (str(self), self.stream, self.partition, self.first, self.count))


class HeaderKindError(StreamwireError, TypeError):
    """A typed header accessor was used on a value of another kind."""


class AuthenticationError(StreamwireError):
    """Credentials were refused. Protocol-specific classes also derive from ServerError."""


# --- client state ------------------------------------------------------------------------


class ClientStateError(StreamwireError):
    """The operation is not valid in the object's current state."""


class ClosedError(ClientStateError):
    """The client, producer or consumer was closed."""


class BusyError(ClientStateError):
    """Another operation is already in progress where only one is allowed."""


# --- backpressure ------------------------------------------------------------------------


class BackpressureError(StreamwireError):
    """A bounded buffer is full."""


class ProducerBufferFull(BackpressureError):
    """The producer's buffer stayed full for longer than the caller was willing to wait."""
