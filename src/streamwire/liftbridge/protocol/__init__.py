"""Liftbridge, sans-IO: the NATS envelope, typed wrappers over the generated protobuf
messages, and the server's error codes. Nothing here performs I/O."""

from __future__ import annotations

from streamwire.liftbridge.protocol.envelope import (
    FLAG_CRC32C,
    HEADER_SIZE,
    HEADER_SIZE_CRC,
    MAGIC,
    EnvelopeHeader,
    MessageType,
    decode_envelope,
    encode_envelope,
    encode_header,
    is_envelope,
)
from streamwire.liftbridge.protocol.errors import (
    ACK_ERRORS,
    GRPC_ERRORS,
    AckError,
    AckErrorCode,
    GrpcStatus,
    LiftbridgeServerError,
)
from streamwire.liftbridge.protocol.messages import (
    Ack,
    AckPolicy,
    PublishedMessage,
    decode_ack,
    decode_publish,
    encode_ack,
    encode_publish,
    partition_for_key,
    partition_subject,
)
from streamwire.liftbridge.protocol.metadata import (
    Broker,
    Metadata,
    PartitionInfo,
    StartPosition,
    StopPosition,
    StreamInfo,
    StreamOptions,
)

__all__ = (
    "ACK_ERRORS",
    "FLAG_CRC32C",
    "GRPC_ERRORS",
    "HEADER_SIZE",
    "HEADER_SIZE_CRC",
    "MAGIC",
    "Ack",
    "AckError",
    "AckErrorCode",
    "AckPolicy",
    "Broker",
    "EnvelopeHeader",
    "GrpcStatus",
    "LiftbridgeServerError",
    "MessageType",
    "Metadata",
    "PartitionInfo",
    "PublishedMessage",
    "StartPosition",
    "StopPosition",
    "StreamInfo",
    "StreamOptions",
    "decode_ack",
    "decode_envelope",
    "decode_publish",
    "encode_ack",
    "encode_envelope",
    "encode_header",
    "encode_publish",
    "is_envelope",
    "partition_for_key",
    "partition_subject",
)
