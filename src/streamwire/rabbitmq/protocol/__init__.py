"""RabbitMQ Streams, sans-IO: frames, Osiris chunks, errors and the connection machine.

Nothing here performs I/O; :mod:`streamwire.rabbitmq` drives it over asyncio.
"""

from __future__ import annotations

from streamwire.rabbitmq.protocol.chunk import ChunkHeader, parse_chunk, parse_chunk_header
from streamwire.rabbitmq.protocol.constants import CommandKey, OffsetType, ResponseCode
from streamwire.rabbitmq.protocol.errors import ERRORS, StreamsServerError
from streamwire.rabbitmq.protocol.frames import FRAMES, Frame, decode_frame, encode_frame
from streamwire.rabbitmq.protocol.machine import (
    ConnectionSettings,
    ConnectionState,
    ProtocolFailed,
    StreamsConnection,
)

__all__ = (
    "ERRORS",
    "FRAMES",
    "ChunkHeader",
    "CommandKey",
    "ConnectionSettings",
    "ConnectionState",
    "Frame",
    "OffsetType",
    "ProtocolFailed",
    "ResponseCode",
    "StreamsConnection",
    "StreamsServerError",
    "decode_frame",
    "encode_frame",
    "parse_chunk",
    "parse_chunk_header",
)
