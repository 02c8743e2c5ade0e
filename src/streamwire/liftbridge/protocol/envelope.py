"""The Liftbridge envelope: the header that marks a NATS payload as a Liftbridge message.

Layout (big-endian; ``docs/protocol/liftbridge.md`` §1, liftbridge-api README)::

    0..3   magic   B9 0E 43 B4
    4      version 0
    5      header length: 8, or 12 when the CRC-32C flag is set (the payload starts here)
    6      flags   bit 0 = a CRC-32C of the payload follows in bytes 8..11
    7      message type (Publish 0, Ack 1; 2..14 are server-internal)
    8..11  CRC-32C (Castagnoli) of the payload, only with flag bit 0
    ...    protobuf payload (``Message`` for Publish, ``Ack`` for Ack)

Decoding applies the server's checks (``checkEnvelope``) and a few more that keep a client
safe (a header length below 8 or beyond the data), and raises only streamwire exceptions:
:class:`~streamwire.errors.DecodeError` for anything malformed and
:class:`~streamwire.errors.ChecksumMismatchError` for a wrong CRC. Encoding never produces a
header the server could misread: the header length always equals the bytes written before
the payload (8, or 12 with a CRC).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from streamwire.codec._structs import U32, BytesLike
from streamwire.codec.checksums import crc32c
from streamwire.errors import ChecksumMismatchError, DecodeError, LocalProtocolError

__all__ = (
    "FLAG_CRC32C",
    "HEADER_SIZE",
    "HEADER_SIZE_CRC",
    "MAGIC",
    "VERSION",
    "EnvelopeHeader",
    "MessageType",
    "decode_envelope",
    "encode_envelope",
    "encode_header",
    "envelope_payload",
    "is_envelope",
)

MAGIC: Final = b"\xb9\x0e\x43\xb4"
VERSION: Final = 0
HEADER_SIZE: Final = 8
HEADER_SIZE_CRC: Final = 12
FLAG_CRC32C: Final = 0x01

_MAX_HEADER_LEN: Final = 0xFF


class MessageType(IntEnum):
    """Byte 7 of the header (``MsgType`` in the liftbridge-api README)."""

    PUBLISH = 0
    ACK = 1
    REPLICATION_REQUEST = 2
    REPLICATION_RESPONSE = 3
    RAFT_JOIN_REQUEST = 4
    RAFT_JOIN_RESPONSE = 5
    LEADER_EPOCH_OFFSET_REQUEST = 6
    LEADER_EPOCH_OFFSET_RESPONSE = 7
    PROPAGATED_REQUEST = 8
    PROPAGATED_RESPONSE = 9
    SERVER_INFO_REQUEST = 10
    SERVER_INFO_RESPONSE = 11
    PARTITION_STATUS_REQUEST = 12
    PARTITION_STATUS_RESPONSE = 13
    PARTITION_NOTIFICATION = 14


@dataclass(frozen=True, slots=True)
class EnvelopeHeader:
    """A decoded header. ``crc32c`` is the checksum carried on the wire, if any."""

    version: int
    header_len: int
    flags: int
    msg_type: int
    crc32c: int | None = None

    @property
    def has_crc(self) -> bool:
        return bool(self.flags & FLAG_CRC32C)


def encode_header(
    msg_type: int,
    *,
    crc: int | None = None,
    header_len: int | None = None,
    flags: int | None = None,
) -> bytes:
    """The header bytes alone: 8, or 12 when ``crc`` (the payload's CRC-32C) is given.

    ``header_len`` and ``flags`` (default: the CRC flag exactly when ``crc`` is given) may
    be passed to state what the caller expects. A header length that differs from the bytes
    written, a CRC flag without a CRC or a CRC without the flag, and values that do not fit
    their field raise :class:`LocalProtocolError`: an inconsistent header (the kind that can
    crash a server, ``docs/protocol/liftbridge.md`` §1.3) is never produced.
    """
    if not 0 <= msg_type <= 0xFF:
        raise LocalProtocolError(f"message type {msg_type} does not fit in one byte")
    if flags is None:
        flags = FLAG_CRC32C if crc is not None else 0
    if not 0 <= flags <= 0xFF:
        raise LocalProtocolError(f"flags {flags:#x} do not fit in one byte")
    with_crc = bool(flags & FLAG_CRC32C)
    if with_crc != (crc is not None):
        raise LocalProtocolError(
            "the CRC-32C flag is set but no CRC was given"
            if with_crc
            else "a CRC-32C needs flag bit 0 set"
        )
    size = HEADER_SIZE_CRC if with_crc else HEADER_SIZE
    if header_len is not None and header_len != size:
        raise LocalProtocolError(
            f"header length {header_len} is inconsistent: this header is {size} bytes"
        )
    head = MAGIC + bytes((VERSION, size, flags, msg_type))
    if crc is None:
        return head
    if not 0 <= crc <= 0xFFFFFFFF:
        raise LocalProtocolError(f"CRC-32C {crc!r} does not fit in 32 bits")
    return head + U32.pack(crc)


def encode_envelope(msg_type: int, payload: BytesLike, *, crc: bool = False) -> bytes:
    """Header plus ``payload``; with ``crc`` the header carries the payload's CRC-32C."""
    if crc:
        return encode_header(msg_type, crc=crc32c(payload)) + bytes(payload)
    return encode_header(msg_type) + bytes(payload)


def is_envelope(data: BytesLike) -> bool:
    """True if ``data`` starts with the magic number and is long enough for a header."""
    return len(data) >= HEADER_SIZE and bytes(data[:4]) == MAGIC


def decode_envelope(
    data: BytesLike, *, expected: int | None = None, verify_crc: bool = True
) -> tuple[EnvelopeHeader, memoryview]:
    """Split ``data`` into its header and a zero-copy view of the payload.

    ``expected`` is the message type the caller wants (for example ``MessageType.ACK``);
    another type is a :class:`DecodeError`. Unknown flag bits are ignored, as the server
    does. Bytes between byte 8 and a larger header length (no CRC) are skipped, as the
    server does.
    """
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    size = len(view)
    if size < HEADER_SIZE:
        raise DecodeError(f"envelope header: need {HEADER_SIZE} bytes, got {size}", 0)
    if bytes(view[:4]) != MAGIC:
        raise DecodeError(f"envelope magic {bytes(view[:4]).hex()}", 0)
    version, header_len, flags, msg_type = view[4], view[5], view[6], view[7]
    if version != VERSION:
        raise DecodeError(f"envelope version {version}", 4)
    if header_len < HEADER_SIZE:
        raise DecodeError(f"envelope header length {header_len} (below {HEADER_SIZE})", 5)
    if header_len > size:
        raise DecodeError(f"envelope header length {header_len} beyond {size} bytes", 5)
    if expected is not None and msg_type != expected:
        raise DecodeError(f"envelope message type {msg_type}, expected {int(expected)}", 7)
    carried: int | None = None
    payload = view[header_len:]
    if flags & FLAG_CRC32C:
        if header_len != HEADER_SIZE_CRC:
            raise DecodeError(f"envelope header length {header_len} with the CRC flag set", 5)
        carried = int(U32.unpack_from(view, HEADER_SIZE)[0])
        if verify_crc:
            actual = crc32c(payload)
            if actual != carried:
                raise ChecksumMismatchError("envelope CRC-32C", carried, actual)
    return EnvelopeHeader(version, header_len, flags, msg_type, carried), payload


def envelope_payload(data: BytesLike, expected: int, *, verify_crc: bool = True) -> bytes:
    """The payload of an envelope of type ``expected``, as ``bytes`` (what protobuf parses):
    the hot path of reading acks. A plain 8-byte header on ``bytes`` is checked inline;
    anything else goes through :func:`decode_envelope` (same checks, same errors)."""
    if (
        type(data) is bytes
        and len(data) >= HEADER_SIZE
        and data[5] == HEADER_SIZE
        and data[6] == 0
        and data[7] == expected
        and data[4] == VERSION
        and data[:4] == MAGIC
    ):
        return data[HEADER_SIZE:]
    return bytes(decode_envelope(data, expected=expected, verify_crc=verify_crc)[1])
