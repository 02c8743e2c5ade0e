"""streamwire :class:`~streamwire.codec.Message` ↔ Iggy message frames.

* ``Message.id`` is Iggy's u128 message id; when it is ``None`` (or 0) a random UUIDv4 is
  minted, as the official SDKs do.
* ``Message.headers`` are the typed user headers (TLV, String keys).
* ``Message.key`` has no Iggy counterpart. streamwire uses it twice: the producer routes by
  it (``MessagesKey`` rule: XXH32(key, seed 0) % partitions, resolved client-side) and, so
  that consumers see it again, carries it in the Raw user header ``streamwire.key``
  (:data:`KEY_HEADER`; configurable, ``None`` turns it off). A consumer lifts that header
  back into ``Message.key``.
* ``Message.timestamp`` given on send becomes the origin timestamp; received messages carry
  the broker's append time (the batch base timestamp). The producer-side origin timestamp
  stays available on :class:`~streamwire.iggy.protocol.batch.StoredMessage`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final

from streamwire._native import core as _native
from streamwire.codec.checksums import xxh3_64, xxh32
from streamwire.codec.headers import HeaderKind, HeaderValue
from streamwire.codec.message import Message, received_message
from streamwire.errors import ChecksumMismatchError, ConfigurationError
from streamwire.iggy.protocol.batch import (
    FRAME_HEADER_SIZE,
    OutgoingMessage,
    StoredMessage,
    random_message_id,
)
from streamwire.iggy.protocol.messaging import PolledMessages
from streamwire.iggy.protocol.tlv import decode_user_headers, encode_user_headers

__all__ = (
    "KEY_HEADER",
    "from_stored",
    "key_partition",
    "received_messages",
    "received_messages_py",
    "to_outgoing",
)

KEY_HEADER: Final = "streamwire.key"


def key_partition(key: bytes, partitions_count: int) -> int:
    """The partition index the ``MessagesKey`` rule picks (docs/protocol/iggy.md §4.5)."""
    if partitions_count < 1:
        raise ConfigurationError("the topic has no partitions")
    return xxh32(key) % partitions_count


def to_outgoing(
    message: Message,
    *,
    now_us: int,
    key_header: str | None = KEY_HEADER,
    randbytes: Callable[[int], bytes] = os.urandom,
) -> OutgoingMessage:
    """Encode one message's frame fields (``now_us`` is the origin time if it has none)."""
    headers = message.headers
    if key_header is not None and message.key is not None:
        if not 1 <= len(message.key) <= 255:
            raise ConfigurationError("a message key must be 1..255 bytes")
        headers = {**headers, key_header: HeaderValue.raw(message.key)}
    return OutgoingMessage(
        id=message.id or random_message_id(randbytes),
        payload=message.value,
        origin_timestamp=now_us if message.timestamp_us is None else message.timestamp_us,
        user_headers=encode_user_headers(headers),
    )


def _headers_and_key(
    raw: bytes, key_header: str | None
) -> tuple[dict[str, HeaderValue], bytes | None]:
    """Decoded user headers, with the key header (if any) lifted out as the key."""
    headers = decode_user_headers(raw) if raw else {}
    key = None
    if key_header is not None:
        value = headers.get(key_header)
        if value is not None and value.kind is HeaderKind.RAW:
            del headers[key_header]
            key = value.as_bytes()
    return headers, key


def from_stored(
    stored: StoredMessage, *, stream: str, key_header: str | None = KEY_HEADER
) -> Message:
    """A received :class:`Message` (offset, partition, broker timestamp, id, headers, key)."""
    headers, key = _headers_and_key(stored.user_headers, key_header)
    return received_message(
        stored.payload,
        key,
        headers,
        stored.timestamp,
        stored.offset,
        stream,
        stored.partition_id,
        stored.id,
    )


def received_messages(
    polled: PolledMessages,
    *,
    stream: str,
    key_header: str | None = KEY_HEADER,
    verify: bool = True,
) -> list[Message]:
    """A poll reply's messages as received :class:`Message` objects, straight from its
    records (what :func:`from_stored` makes of each of ``polled.messages``). With
    ``verify``, a frame whose XXH3-64 checksum does not match raises
    :class:`ChecksumMismatchError` and nothing is returned.

    The native core does it when loaded and the reply's frames are its index
    (:mod:`streamwire._native`); :func:`received_messages_py` is the same in pure Python."""
    frames = polled.frames
    if (
        _native is not None
        and isinstance(frames, _native.FrameIndex)
        and frames.buf is polled.records
    ):
        return _native.iggy_received_messages(frames, stream, key_header, verify, _headers_and_key)
    return received_messages_py(polled, stream=stream, key_header=key_header, verify=verify)


def received_messages_py(
    polled: PolledMessages,
    *,
    stream: str,
    key_header: str | None = KEY_HEADER,
    verify: bool = True,
) -> list[Message]:
    """:func:`received_messages` in pure Python."""
    buf = polled.records
    view = memoryview(buf)
    head = FRAME_HEADER_SIZE
    received = received_message
    out: list[Message] = []
    append = out.append
    for ref in polled.frames:
        offset, timestamp, _, msg_id, checksum, at, p_end, f_end, pid, _, _ = ref
        if verify and xxh3_64(view[at + 8 : f_end]) != checksum:
            actual = xxh3_64(view[at + 8 : f_end])
            raise ChecksumMismatchError(f"message at offset {offset}", checksum, actual)
        if p_end == f_end:
            headers: dict[str, HeaderValue] = {}
            key = None
        else:
            headers, key = _headers_and_key(bytes(buf[p_end:f_end]), key_header)
        value = bytes(buf[at + head : p_end])
        append(received(value, key, headers, timestamp, offset, stream, pid, msg_id))
    return out
