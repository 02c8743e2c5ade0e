"""FrameAccumulator: both frame shapes, fed whole, byte by byte and with trailing bytes."""

from __future__ import annotations

import struct

import pytest

from streamwire.codec import IGGY_HEADER, LENGTH_PREFIX_U32, FrameAccumulator
from streamwire.errors import ConfigurationError, DecodeError, FrameTooLargeError

# A RabbitMQ Streams PublishConfirm captured from RabbitMQ 4.0.5
# (docs/protocol/rabbitmq-streams.md §1.8).
CONFIRM = bytes.fromhex(
    "00000019 0003 0001 05 00000002 0000000000000001 0000000000000002".replace(" ", "")
)


def iggy_frame(body: bytes, marker: int = 8) -> bytes:
    header = bytearray(256)
    header[48:52] = (256 + len(body)).to_bytes(4, "little")
    header[60] = marker
    return bytes(header) + body


def test_length_prefixed_whole() -> None:
    acc = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=1 << 20)
    acc.feed(CONFIRM + CONFIRM)
    frames = list(acc.frames())
    assert frames == [CONFIRM[4:], CONFIRM[4:]]
    assert acc.buffered == 0


def test_length_prefixed_byte_by_byte() -> None:
    acc = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=1 << 20)
    for i, byte in enumerate(CONFIRM):
        assert acc.next_frame() is None, f"frame complete after {i} bytes"
        acc.feed(bytes([byte]))
    assert acc.next_frame() == CONFIRM[4:]
    assert acc.next_frame() is None


def test_trailing_bytes_are_kept_for_the_next_frame() -> None:
    acc = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=1 << 20)
    acc.feed(CONFIRM + CONFIRM[:7])
    assert acc.next_frame() == CONFIRM[4:]
    assert acc.next_frame() is None
    assert acc.buffered == 7
    acc.feed(CONFIRM[7:])
    assert acc.next_frame() == CONFIRM[4:]


def test_oversized_frame_refused_from_its_header_alone() -> None:
    acc = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=1024)
    acc.feed((0x7FFFFFFF).to_bytes(4, "big"))  # only the prefix: nothing allocated yet
    with pytest.raises(FrameTooLargeError) as info:
        acc.next_frame()
    assert info.value.size == 0x7FFFFFFF + 4
    assert info.value.limit == 1024


def test_max_frame_size_can_change_between_phases() -> None:
    acc = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=16)
    acc.max_frame_size = 64
    acc.feed(CONFIRM)
    assert acc.next_frame() == CONFIRM[4:]
    with pytest.raises(ConfigurationError):
        acc.max_frame_size = 2
    with pytest.raises(ConfigurationError):
        FrameAccumulator(IGGY_HEADER, max_frame_size=100)


def test_empty_length_prefixed_frame() -> None:
    acc = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=16)
    acc.feed(b"\x00\x00\x00\x00")
    assert acc.next_frame() == b""


def test_iggy_frames_include_their_header() -> None:
    f1, f2 = iggy_frame(b"hello"), iggy_frame(b"")
    acc = FrameAccumulator(IGGY_HEADER, max_frame_size=64 << 20)
    data = f1 + f2
    for i in range(0, len(data), 7):
        acc.feed(data[i : i + 7])
    assert list(acc.frames()) == [f1, f2]


def test_iggy_frame_below_header_size_is_a_decode_error() -> None:
    header = bytearray(256)
    header[48:52] = (100).to_bytes(4, "little")
    acc = FrameAccumulator(IGGY_HEADER, max_frame_size=1 << 20)
    acc.feed(bytes(header))
    with pytest.raises(DecodeError, match="below the minimum"):
        acc.next_frame()


def test_memory_stays_bounded_over_many_frames() -> None:
    acc = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=1 << 16)
    chunk = CONFIRM * 100
    for _ in range(200):
        acc.feed(chunk[:1000])
        list(acc.frames())
        acc.feed(chunk[1000:])
        list(acc.frames())
    assert acc.buffered == 0
    assert len(acc._buf) <= len(chunk)


def test_large_frame_is_gathered_and_what_follows_it_kept() -> None:
    big = iggy_frame(bytes(range(256)) * 400)  # 102 656 bytes: above the default threshold
    small = iggy_frame(b"tail")
    stream = big + small + small[:100]
    acc = FrameAccumulator(IGGY_HEADER, max_frame_size=1 << 20)
    got: list[bytes] = []
    for pos in range(0, len(stream), 65536):
        piece = stream[pos : pos + 65536]
        acc.feed(piece)
        got.extend(acc.frames())
        assert acc.buffered == min(pos + len(piece), len(stream)) - sum(len(f) for f in got)
    assert got == [big, small]
    assert acc.buffered == 100  # the start of the next frame waits in the buffer
    acc.feed(small[100:])
    assert acc.next_frame() == small
    assert acc.buffered == 0


def test_large_frames_back_to_back_keep_the_bytes_read_as_their_first_pieces() -> None:
    """A large frame starting a read, or the tail of the read that completed the frame
    before it, is gathered from those bytes themselves, not from a copy in the buffer."""
    bodies = [bytes([i]) * 150_000 for i in range(3)]
    stream = b"".join(struct.pack(">I", len(b)) + b for b in bodies)
    reads = [stream[pos : pos + 100_000] for pos in range(0, len(stream), 100_000)]
    acc = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=1 << 20)
    got: list[bytes] = []
    firsts: list[object] = []
    for piece in reads:
        acc.feed(piece)
        got.extend(acc.frames())
        if acc._pieces:
            firsts.append(acc._pieces[0])
    assert got == bodies
    assert acc.buffered == 0
    assert firsts[0] is reads[0]  # the first read: kept as it is
    # the second frame's first piece: a view of the read that completed the first frame
    assert isinstance(firsts[1], memoryview)
    assert firsts[1].obj is reads[1]


def test_gathered_frame_is_refused_from_its_header_when_too_large() -> None:
    acc = FrameAccumulator(IGGY_HEADER, max_frame_size=100_000, gather_above=1)
    acc.feed(iggy_frame(bytes(100_000))[:300])
    with pytest.raises(FrameTooLargeError):
        acc.next_frame()


def test_gather_threshold_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="gather_above"):
        FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=1024, gather_above=0)


def test_large_frame_fed_whole_is_handed_out_as_it_is() -> None:
    """A whole large frame fed as one ``bytes`` at a frame boundary (what a frame-aware
    receive hands over) comes out as the same object, not a copy; what follows it in the
    same piece is kept for the next frame."""
    big = iggy_frame(bytes(range(256)) * 400)
    small = iggy_frame(b"tail")
    acc = FrameAccumulator(IGGY_HEADER, max_frame_size=1 << 20)
    acc.feed(big)
    assert acc.next_frame() is big
    assert acc.buffered == 0
    acc.feed(small)  # small: buffered as before
    acc.feed(big + small[:10])
    assert acc.next_frame() == small
    assert acc.next_frame() == big
    assert acc.next_frame() is None
    assert acc.buffered == 10
    acc.feed(small[10:])
    assert acc.next_frame() == small


def test_large_frame_fed_whole_is_refused_when_too_large_or_too_small() -> None:
    big = iggy_frame(bytes(100_000))
    acc = FrameAccumulator(IGGY_HEADER, max_frame_size=100_000)
    acc.feed(big)
    with pytest.raises(FrameTooLargeError):
        acc.next_frame()
    bad = bytearray(big)
    bad[48:52] = (10).to_bytes(4, "little")
    acc = FrameAccumulator(IGGY_HEADER, max_frame_size=1 << 20)
    acc.feed(bytes(bad))
    with pytest.raises(DecodeError):
        acc.next_frame()
