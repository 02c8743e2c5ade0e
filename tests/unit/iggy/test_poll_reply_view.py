"""A poll reply decoded from a received frame keeps a view of the frame (no copy of its
records); from any other buffer it copies. Runs with the native core and in pure Python."""

from __future__ import annotations

from streamwire.codec.message import Message
from streamwire.iggy.protocol.batch import (
    OutgoingMessage,
    encode_batch_py,
    encode_record,
    locate_frames_py,
    stored_messages,
)
from streamwire.iggy.protocol.mapping import received_messages, received_messages_py
from streamwire.iggy.protocol.messaging import PolledMessages


def messages_key(msgs: list[Message]) -> list[tuple[object, ...]]:
    return [tuple((type(getattr(m, n)), getattr(m, n)) for n in Message.__slots__) for m in msgs]


def test_a_decoded_poll_reply_views_its_frame() -> None:
    batch = encode_batch_py([OutgoingMessage(7, b"x" * 10, 5), OutgoingMessage(8, b"y", 6)])
    record = encode_record(
        stored_messages(batch, locate_frames_py(batch)),
        partition_id=3,
        base_offset=40,
        base_timestamp=1000,
        origin_timestamp=900,
    )
    built = PolledMessages.build(3, 1, [record])
    body = built.encode()
    frame = b"\0" * 256 + body
    decoded = PolledMessages.decode(memoryview(frame)[256:])
    assert type(decoded.records) is memoryview
    assert decoded.records.obj is frame
    assert decoded == built
    assert bytes(decoded.records) == record
    from_bytearray = PolledMessages.decode(bytearray(body))
    assert type(from_bytearray.records) is bytes
    assert from_bytearray == built
    assert messages_key(received_messages(decoded, stream="s")) == messages_key(
        received_messages_py(from_bytearray, stream="s")
    )
    assert [m.payload for m in decoded.messages] == [b"x" * 10, b"y"]
    assert all(type(m.payload) is bytes for m in decoded.messages)


def test_a_poll_reply_view_hashes_and_compares_like_bytes() -> None:
    batch = encode_batch_py([OutgoingMessage(9, b"z" * 3, 1)])
    record = encode_record(
        stored_messages(batch, locate_frames_py(batch)),
        partition_id=0,
        base_offset=0,
        base_timestamp=0,
        origin_timestamp=0,
    )
    body = PolledMessages.build(0, 0, [record]).encode()
    a = PolledMessages.decode(memoryview(b"\1" * 256 + body)[256:])
    b = PolledMessages.decode(memoryview(b"\2" * 256 + body)[256:])
    c = PolledMessages.decode(body)
    assert a == b == c
    assert hash(a) == hash(b) == hash(c)
    assert len(a.records) == len(record)
