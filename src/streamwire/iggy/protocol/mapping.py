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

from streamwire.codec.checksums import xxh32
from streamwire.codec.headers import HeaderKind, HeaderValue
from streamwire.codec.message import Message
from streamwire.errors import ConfigurationError
from streamwire.iggy.protocol.batch import OutgoingMessage, StoredMessage, random_message_id
from streamwire.iggy.protocol.tlv import decode_user_headers, encode_user_headers

__all__ = ("KEY_HEADER", "from_stored", "key_partition", "to_outgoing")

KEY_HEADER: Final = "streamwire.key"


def key_partition(key: bytes, partitions_count: int) -> int:
    """The partition index the ``MessagesKey`` rule picks (§4.5)."""
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


def from_stored(
    stored: StoredMessage, *, stream: str, key_header: str | None = KEY_HEADER
) -> Message:
    """A received :class:`Message` (offset, partition, broker timestamp, id, headers, key)."""
    headers = decode_user_headers(stored.user_headers) if stored.user_headers else {}
    key = None
    if key_header is not None:
        value = headers.get(key_header)
        if value is not None and value.kind is HeaderKind.RAW:
            del headers[key_header]
            key = value.as_bytes()
    return Message.received(
        stored.payload,
        key=key,
        headers=headers,
        timestamp_us=stored.timestamp,
        offset=stored.offset,
        stream=stream,
        partition=stored.partition_id,
        id=stored.id,
    )
