"""Cut a byte stream into frames, with a hard size bound checked before buffering a frame.

Two shapes cover the three protocols:

* a length prefix that counts the bytes after it (RabbitMQ Streams: ``uint32`` big-endian);
* a fixed header that carries the **total** frame length at some offset (Iggy 0.9: a
  256-byte header with a little-endian ``uint32`` at offset 48).

:class:`FrameAccumulator` is sans-IO: feed it whatever the socket returned, then take the
complete frames out. It holds at most one incomplete frame plus the last chunk fed, and
refuses a frame whose announced size exceeds ``max_frame_size`` as soon as the header
arrives, before any room is made for it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from streamwire.codec._structs import U32, U32LE, BytesLike
from streamwire.errors import ConfigurationError, DecodeError, FrameTooLargeError

__all__ = ("GATHER_ABOVE", "IGGY_HEADER", "LENGTH_PREFIX_U32", "FrameAccumulator", "FrameSpec")


@dataclass(frozen=True, slots=True)
class FrameSpec:
    """How to find a frame's length.

    ``header_size`` bytes are needed before the length is known; the length is a
    ``length`` struct at ``length_offset``. If ``includes_header`` the length counts the
    whole frame, else only what follows the header. ``strip_header`` drops the header from
    the frames handed out (useful for a bare length prefix).
    """

    header_size: int
    length: struct.Struct
    length_offset: int = 0
    includes_header: bool = False
    strip_header: bool = False
    min_frame_size: int = 0
    name: str = "frame"


LENGTH_PREFIX_U32 = FrameSpec(
    header_size=4, length=U32, strip_header=True, name="length-prefixed frame"
)
"""RabbitMQ Streams: ``Size:uint32`` then ``Size`` bytes; frames are handed out without it."""

IGGY_HEADER = FrameSpec(
    header_size=256,
    length=U32LE,
    length_offset=48,
    includes_header=True,
    min_frame_size=256,
    name="Iggy frame",
)
"""Iggy 0.9: 256-byte header, total size (header included) as uint32 LE at offset 48."""


GATHER_ABOVE = 65536
"""Frames of at least this many bytes are gathered from the pieces fed (see
:class:`FrameAccumulator`)."""


class FrameAccumulator:
    """Accumulate bytes; hand out complete frames as ``bytes``.

    A frame that is still incomplete once its header arrived and that announces at least
    ``gather_above`` bytes (RabbitMQ chunks, Iggy poll replies) is not grown in the buffer:
    the pieces fed are kept as they are (``bytes`` are not copied) and joined once, when the
    last one arrives, so that each byte of a large frame is copied about once on its way
    from the socket to the decoder instead of three times (the buffer, its reallocations and
    the frame's slice). Such a frame's first piece is the ``bytes`` fed (or the tail of the
    piece that completed the frame before it) when it begins there, not a copy; a large
    frame fed whole in one ``bytes`` at a frame boundary is handed out as that object.
    """

    __slots__ = ("_buf", "_gather", "_have", "_max", "_pieces", "_pos", "_spec", "_want")

    def __init__(
        self, spec: FrameSpec, *, max_frame_size: int, gather_above: int = GATHER_ABOVE
    ) -> None:
        if max_frame_size < spec.header_size:
            raise ConfigurationError(
                f"max_frame_size {max_frame_size} is below the header size {spec.header_size}"
            )
        if gather_above < 1:
            raise ConfigurationError(f"gather_above must be positive, not {gather_above}")
        self._spec = spec
        self._max = max_frame_size
        self._gather = gather_above
        self._buf = bytearray()
        self._pos = 0
        self._pieces: list[BytesLike] = []  # a large frame's pieces while it arrives
        self._want = 0  # that frame's total size (0: not gathering)
        self._have = 0  # bytes in _pieces

    @property
    def max_frame_size(self) -> int:
        return self._max

    @max_frame_size.setter
    def max_frame_size(self, value: int) -> None:
        if value < self._spec.header_size:
            raise ConfigurationError(f"max_frame_size {value} is below the header size")
        self._max = value

    @property
    def buffered(self) -> int:
        """Bytes held that are not yet part of a frame handed out."""
        return len(self._buf) - self._pos + self._have

    def feed(self, data: BytesLike) -> None:
        """Add bytes read from the stream."""
        if self._want:
            if data:  # kept as given if immutable, else copied (the caller may reuse it)
                self._pieces.append(data if type(data) is bytes else bytes(data))
                self._have += len(data)
            return
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        if self._buf or type(data) is not bytes or not self._start_gathering(data):
            self._buf += data

    def frames(self) -> Iterator[bytes]:
        """Yield every complete frame buffered so far."""
        while (frame := self.next_frame()) is not None:
            yield frame

    def next_frame(self) -> bytes | None:
        """The next complete frame, or ``None`` if more bytes are needed.

        Raises :class:`FrameTooLargeError` or :class:`DecodeError` for a frame that can
        never be valid; the accumulator is then unusable (the stream is out of sync).
        """
        if self._want:
            return self._gathered()
        spec = self._spec
        buf = self._buf
        pos = self._pos
        avail = len(buf) - pos
        if avail < spec.header_size:
            self._compact()
            return None
        (length,) = spec.length.unpack_from(buf, pos + spec.length_offset)
        total = length if spec.includes_header else length + spec.header_size
        if total > self._max:
            raise FrameTooLargeError(total, self._max, head=bytes(buf[pos : pos + 16]))
        if total < max(spec.min_frame_size, spec.header_size):
            raise DecodeError(f"{spec.name} size {length} (below the minimum)")
        if avail < total:
            if total >= self._gather:  # gather the rest from the pieces to come
                with memoryview(buf) as view:
                    self._pieces = [bytes(view[pos:])]
                self._have = avail
                self._want = total
                buf.clear()
                self._pos = 0
            else:
                self._compact()
            return None
        start = pos + spec.header_size if spec.strip_header else pos
        with memoryview(buf) as view:  # one copy (a bytearray slice would be a second)
            frame = bytes(view[start : pos + total])
        self._pos = pos + total
        return frame

    def _gathered(self) -> bytes | None:
        """The large frame being gathered, once every byte of it arrived (one join); what
        follows it in the last piece begins the next gathered frame, or goes back to the
        buffer."""
        want = self._want
        extra = self._have - want
        if extra < 0:
            return None
        pieces = self._pieces
        rest: bytes | memoryview = b""
        if extra:
            last = memoryview(pieces[-1])
            pieces[-1] = last[: len(last) - extra]
            rest = last[len(last) - extra :]
        if self._spec.strip_header:  # the first piece holds the whole header
            pieces[0] = memoryview(pieces[0])[self._spec.header_size :]
        frame = b"".join(pieces)
        self._pieces = []
        self._want = self._have = 0
        if not rest or not self._start_gathering(rest):
            self._buf += rest  # the buffer is empty while gathering
        return frame

    def _start_gathering(self, head: bytes | memoryview) -> bool:
        """Gather the frame that begins ``head`` (immutable: ``bytes`` or a view of them),
        keeping ``head`` itself as its first piece, if it is a valid frame of at least
        ``gather_above`` bytes (whole in ``head`` or not); else ``False`` (the caller
        buffers ``head``, and :meth:`next_frame` deals with it as with any bytes). Spares
        the copies into the buffer and out of it of a large frame's first piece: the tail of
        the read that completed the frame before it, where chunks arrive back to back."""
        spec = self._spec
        if len(head) < spec.header_size:
            return False
        (length,) = spec.length.unpack_from(head, spec.length_offset)
        total = length if spec.includes_header else length + spec.header_size
        if not max(self._gather, spec.min_frame_size, spec.header_size) <= total <= self._max:
            return False
        self._pieces = [head]
        self._have = len(head)
        self._want = total
        return True

    def _compact(self) -> None:
        # Drop consumed bytes once they dominate the buffer, so memory stays bounded by one
        # frame plus one read without copying on every frame.
        if self._pos and self._pos * 2 >= len(self._buf):
            del self._buf[: self._pos]
            self._pos = 0
