"""PublishBuilder.add_range: the vectorised path (no skips, one entry layout) and the
per-entry path must write the same bytes as encoding every message first, whatever the
skip mask, frame limit and entry cap; ``wrap`` must equal ``encode_data_body``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwire.codec.amqp import decode_data_body, encode_data_body
from streamwire.errors import LocalProtocolError
from streamwire.rabbitmq.protocol.frames import Publish, decode_frame
from streamwire.rabbitmq.protocol.publishing import PublishBuilder, encode_publish


def reference(
    first: int, bodies: list[bytes], skip: bytes, start: int, limit: int, max_count: int
) -> tuple[bytes, int, int]:
    """Entry by entry with ``add``: (frame, next index, payload bytes)."""
    builder = PublishBuilder(3)
    i = start
    while i < len(bodies) and builder.count < max_count:
        if skip[i]:
            i += 1
            continue
        if builder.size + builder.entry_size(bodies[i]) > limit:
            break
        builder.add(first + i, bodies[i])
        i += 1
    return builder.build(), i, builder.payload_bytes


body = st.one_of(st.binary(max_size=300), st.integers(0, 300).map(bytes))


@settings(max_examples=300, deadline=None)
@given(
    bodies=st.lists(body, min_size=1, max_size=40),
    data=st.data(),
    limit=st.integers(13, 4000),
    max_count=st.integers(0, 50),
    first=st.integers(0, 1 << 40),
    wrap=st.booleans(),
)
def test_add_range_matches_entry_by_entry(
    bodies: list[bytes],
    data: st.DataObject,
    limit: int,
    max_count: int,
    first: int,
    wrap: bool,
) -> None:
    n = len(bodies)
    skip = data.draw(st.one_of(st.just(bytes(n)), st.binary(min_size=n, max_size=n)))
    start = data.draw(st.integers(0, n))
    encoded = [encode_data_body(b) for b in bodies] if wrap else bodies
    want, want_next, want_payload = reference(first, encoded, skip, start, limit, max_count)
    builder = PublishBuilder(3)
    got_next = builder.add_range(first, bodies, bytearray(skip), start, limit, max_count, wrap=wrap)
    assert (builder.build(), got_next) == (want, want_next)
    if not wrap:
        assert builder.payload_bytes == want_payload
    else:  # payload counts the caller's bodies, not the AMQP framing around them
        added = [b for i, b in enumerate(bodies[start:got_next], start) if not skip[i]]
        assert builder.payload_bytes == sum(map(len, added))


def test_wrapped_entries_decode_to_the_bodies() -> None:
    bodies = [b"", b"a", bytes(255), bytes(256), "é".encode() * 200]
    builder = PublishBuilder(9)
    assert builder.add_range(100, bodies, bytearray(5), 0, 1 << 20, 100, wrap=True) == 5
    frame = decode_frame(builder.build()[4:])
    assert isinstance(frame, Publish)
    assert [e.publishing_id for e in frame.entries] == list(range(100, 105))
    assert [decode_data_body(e.data[4:]) for e in frame.entries] == bodies
    assert builder.build() == encode_publish(
        9, [(100 + i, encode_data_body(b)) for i, b in enumerate(bodies)]
    )


def test_a_publishing_id_beyond_uint64_is_a_protocol_error() -> None:
    builder = PublishBuilder(1)
    with pytest.raises(LocalProtocolError, match="publishing id"):
        builder.add_range((1 << 64) - 1, [b"a", b"b"], bytearray(2), 0, 1 << 20, 10, wrap=True)
