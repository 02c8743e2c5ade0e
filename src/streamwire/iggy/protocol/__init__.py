"""Apache Iggy 0.9 (binary protocol 0.11.0), sans-IO: headers, payloads, message batches,
errors and the connection machine.

Nothing here performs I/O; :mod:`streamwire.iggy` drives it over asyncio. Every request
payload class is registered in :data:`REQUEST_TYPES` by command code, and
:data:`~streamwire.iggy.protocol.constants.COMMANDS` says how each code travels.
"""

from __future__ import annotations

from streamwire.iggy.protocol import diagnostics, groups, messaging, streams, system, users
from streamwire.iggy.protocol._wire import REQUEST_TYPES, Payload, RequestPayload
from streamwire.iggy.protocol.batch import (
    BatchHeader,
    OutgoingMessage,
    StoredMessage,
    decode_batch,
    encode_batch,
)
from streamwire.iggy.protocol.constants import (
    COMMANDS,
    HEADER_SIZE,
    PROTOCOL_VERSION,
    AckLevel,
    Command,
    FrameKind,
    Operation,
)
from streamwire.iggy.protocol.errors import (
    ERRORS,
    EvictionReason,
    IggyServerError,
    UnknownIggyServerError,
    eviction_error,
)
from streamwire.iggy.protocol.framing import (
    Eviction,
    Reply,
    Request,
    decode_request,
    decode_server_frame,
    encode_eviction,
    encode_reply,
    encode_request,
)
from streamwire.iggy.protocol.identifiers import (
    Consumer,
    ConsumerKind,
    Identifier,
    Partitioning,
    PartitioningKind,
    PollingKind,
    PollingStrategy,
)
from streamwire.iggy.protocol.machine import (
    ConnectionState,
    IggyConnection,
    MachineSettings,
    PendingRequest,
    ReplyStats,
)

__all__ = (
    "COMMANDS",
    "ERRORS",
    "HEADER_SIZE",
    "PROTOCOL_VERSION",
    "REQUEST_TYPES",
    "AckLevel",
    "BatchHeader",
    "Command",
    "ConnectionState",
    "Consumer",
    "ConsumerKind",
    "Eviction",
    "EvictionReason",
    "FrameKind",
    "Identifier",
    "IggyConnection",
    "IggyServerError",
    "MachineSettings",
    "Operation",
    "OutgoingMessage",
    "Partitioning",
    "PartitioningKind",
    "Payload",
    "PendingRequest",
    "ReplyStats",
    "PollingKind",
    "PollingStrategy",
    "Reply",
    "Request",
    "RequestPayload",
    "StoredMessage",
    "UnknownIggyServerError",
    "decode_batch",
    "diagnostics",
    "decode_request",
    "decode_server_frame",
    "encode_batch",
    "encode_eviction",
    "encode_reply",
    "encode_request",
    "eviction_error",
    "groups",
    "messaging",
    "streams",
    "system",
    "users",
)
