"""streamwire: an asyncio SDK for RabbitMQ Streams, Liftbridge over NATS and Apache Iggy.

Protocol clients live in ``streamwire.rabbitmq``, ``streamwire.liftbridge`` and
``streamwire.iggy``; :func:`connect` picks one from the URL scheme.
"""

from __future__ import annotations

from streamwire._addresses import AddressMap
from streamwire._api import (
    BatchConfirmation,
    Bounded,
    Client,
    ConnectKwargs,
    Consumer,
    ConsumerKwargs,
    DeduplicatingProducer,
    KeyRouted,
    Listing,
    OffsetBounds,
    Partitioned,
    Producer,
    ProducerKwargs,
    ReplicatedAcks,
    Settling,
    StreamKwargs,
    SuperStreams,
)
from streamwire._connect import ConnectHandle, connect
from streamwire._url import BrokerURL, parse_url
from streamwire.codec.headers import HeaderKind, HeaderValue
from streamwire.codec.message import Confirmation, Message
from streamwire.codec.offset import Offset, OffsetKind
from streamwire.codec.properties import MessageProperties
from streamwire.errors import (
    AuthenticationError,
    BackpressureError,
    ClientStateError,
    ClosedError,
    ConfigurationError,
    ConnectError,
    ConnectionClosed,
    ConnectionClosedError,
    DecodeError,
    ProtocolError,
    ServerError,
    StreamAlreadyExistsError,
    StreamNotFoundError,
    StreamwireError,
    TimeoutError,
    TransportError,
    UncommittedTailError,
    UnindexedRecordsError,
)
from streamwire.transport.portal import SyncBridge
from streamwire.transport.reconnect import ReconnectPolicy
from streamwire.transport.tls import TLSOptions

__version__ = "0.1.0.dev0"

__all__ = (
    "AddressMap",
    "ReconnectPolicy",
    "TLSOptions",
    "StreamKwargs",
    "ProducerKwargs",
    "Partitioned",
    "ReplicatedAcks",
    "Settling",
    "SuperStreams",
    "OffsetBounds",
    "DeduplicatingProducer",
    "KeyRouted",
    "Listing",
    "ConsumerKwargs",
    "ConnectKwargs",
    "BatchConfirmation",
    "Bounded",
    "AuthenticationError",
    "BackpressureError",
    "BrokerURL",
    "Client",
    "ClientStateError",
    "ClosedError",
    "ConfigurationError",
    "Confirmation",
    "ConnectError",
    "ConnectHandle",
    "ConnectionClosed",
    "ConnectionClosedError",
    "Consumer",
    "DecodeError",
    "HeaderKind",
    "HeaderValue",
    "Message",
    "MessageProperties",
    "Offset",
    "OffsetKind",
    "Producer",
    "ProtocolError",
    "ServerError",
    "StreamAlreadyExistsError",
    "StreamNotFoundError",
    "StreamwireError",
    "SyncBridge",
    "TimeoutError",
    "TransportError",
    "UncommittedTailError",
    "UnindexedRecordsError",
    "__version__",
    "connect",
    "parse_url",
)
