"""Publishing frames: declare/delete publisher, Publish v1/v2, confirms, errors, sequences.

``encode_publish`` is the hot path: it builds a whole Publish frame from (publishing id,
message bytes) pairs in one pass with precompiled structs and a single join.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from typing import ClassVar, Final, Self

from streamwire._native import core as _native
from streamwire._native.bodies import bytes_total, bytes_total_py
from streamwire.codec import compression as codecs
from streamwire.codec._structs import I16, I32
from streamwire.codec.amqp.message import DATA_PREFIX_LONG, DATA_PREFIX_SHORT, encode_data_body
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.errors import LocalProtocolError
from streamwire.rabbitmq.protocol._frame import (
    Frame,
    ReferenceStreamRequest,
    Response,
    check_version,
    register,
    w_str,
)
from streamwire.rabbitmq.protocol.chunk import SUB_BATCH_HEADER
from streamwire.rabbitmq.protocol.constants import MAX_REFERENCE_BYTES, RESPONSE_FLAG, CommandKey

__all__ = (
    "DeclarePublisherRequest",
    "DeletePublisherRequest",
    "Publish",
    "PublishConfirm",
    "PublishEntry",
    "PublishBuilder",
    "PublishError",
    "QueryPublisherSequenceRequest",
    "QueryPublisherSequenceResponse",
    "MAX_SUB_BATCH_RECORDS",
    "SUB_BATCH_CODECS",
    "bytes_total",
    "bytes_total_py",
    "encode_publish",
    "encode_sub_batch",
    "encode_sub_batch_bodies",
    "is_id_run",
    "is_id_run_py",
    "publish_header_size",
    "validate_reference",
)

_K = CommandKey
_HEADER: Final = struct.Struct(">IHHBi")  # size, key, version, publisher id, count
_ENTRY_V1: Final = struct.Struct(">QI")  # publishing id, simple-entry size
_ID: Final = struct.Struct(">Q")
_SIZE: Final = struct.Struct(">I")
_NULL_FILTER: Final = I16.pack(-1)
# An entry whose message is one AMQP data section: publishing id, entry size, the section
# prefix and the body length (vbin8 up to 255 bytes, vbin32 above); the body follows.
_ENTRY_DATA8: Final = struct.Struct(">QI4sB")
_ENTRY_DATA32: Final = struct.Struct(">QI4sI")
_MAX_DATA8: Final = 0xFF


def validate_reference(reference: str) -> None:
    """Publisher/consumer references are refused by the broker above 255 UTF-8 bytes."""
    if len(reference.encode("utf-8")) > MAX_REFERENCE_BYTES:
        raise LocalProtocolError(f"reference {reference!r} is longer than 255 bytes")


@register()
@dataclass(frozen=True, slots=True)
class DeclarePublisherRequest(Frame):
    """``reference`` "" means no deduplication (never null: 3.10 closes the connection)."""

    KEY: ClassVar[int] = _K.DECLARE_PUBLISHER
    correlation_id: int
    publisher_id: int
    reference: str
    stream: str

    def encode_body(self, w: Writer) -> None:
        validate_reference(self.reference)
        w.u32(self.correlation_id).u8(self.publisher_id)
        w_str(w, self.reference)
        w_str(w, self.stream)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.u8(), r.opt_string16("reference") or "", r.string16("stream"))


@register()
@dataclass(frozen=True, slots=True)
class DeletePublisherRequest(Frame):
    KEY: ClassVar[int] = _K.DELETE_PUBLISHER
    correlation_id: int
    publisher_id: int

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u8(self.publisher_id)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.u8())


@register()
@dataclass(frozen=True, slots=True)
class QueryPublisherSequenceRequest(ReferenceStreamRequest):
    KEY: ClassVar[int] = _K.QUERY_PUBLISHER_SEQUENCE


@register()
@dataclass(frozen=True, slots=True)
class QueryPublisherSequenceResponse(Response):
    KEY: ClassVar[int] = _K.QUERY_PUBLISHER_SEQUENCE | RESPONSE_FLAG
    sequence: int = 0

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code).u64(self.sequence)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, code = r.u32(), r.u16()
        return cls(corr, code, r.u64() if r.remaining else 0)


@dataclass(frozen=True, slots=True)
class PublishEntry:
    """One entry of a Publish frame: ``data`` is the complete osiris entry as stored (a
    simple entry's 4-byte size included, or a sub-batch entry)."""

    publishing_id: int
    data: bytes
    filter_value: str | None = None


def _read_entry(r: Reader) -> bytes:
    start = r.pos
    first = r.u8()
    if first & 0x80:  # sub-batch: flags, records u16, uncompressed u32, size u32, body
        r.skip(2 + 4)
        size = r.u32()
    else:
        r.pos = start
        size = r.u32()
    r.skip(size)
    return bytes(r.buffer[start : r.pos])


@register()
@dataclass(frozen=True, slots=True)
class Publish(Frame):
    """Publish v1 (entries) or v2 (entries with filter values; simple entries only)."""

    KEY: ClassVar[int] = _K.PUBLISH
    publisher_id: int
    entries: tuple[PublishEntry, ...]
    version: int = 1

    @property
    def wire_version(self) -> int:
        return self.version

    def encode_body(self, w: Writer) -> None:
        w.u8(self.publisher_id).i32(len(self.entries))
        for e in self.entries:
            w.u64(e.publishing_id)
            if self.version >= 2:
                if e.filter_value is None:
                    w.raw(_NULL_FILTER)
                else:
                    w_str(w, e.filter_value)
            w.raw(e.data)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        check_version(r, version, 1, 2)
        publisher_id = r.u8()
        n = r.count(I32, 12, "entries")
        entries = []
        for _ in range(n):
            pid = r.u64()
            fv = r.opt_string16("filter value") if version >= 2 else None
            entries.append(PublishEntry(pid, _read_entry(r), fv))
        return cls(publisher_id, tuple(entries), version)


def publish_header_size() -> int:
    """Bytes of a Publish frame before its first entry (size prefix included)."""
    return _HEADER.size


class PublishBuilder:
    """Builds one Publish frame of simple entries, entry by entry: v1, or v2 (with a filter
    value per entry, ``None`` for unfiltered) when ``filters`` is set.

    ``size`` is the frame size so far (size prefix included), so callers can stop before
    a limit; :meth:`entry_size` tells what an entry would add. ``payload_bytes`` counts the
    bytes of the bodies (or sub-batch entries) added, without entry framing. One join at
    the end, or none: a frame whose entries the native core wrote in one call comes out of
    that call whole, header included.
    """

    __slots__ = (
        "_framed",
        "_parts",
        "count",
        "filters",
        "payload_bytes",
        "publisher_id",
        "size",
    )

    def __init__(self, publisher_id: int, *, filters: bool = False) -> None:
        self.publisher_id = publisher_id
        self.filters = filters
        self._parts: list[bytes] = [b""]
        self._framed = False
        """``_parts[0]`` is a whole frame from the native core (header and first entries),
        not the header's place."""
        self.size = _HEADER.size
        self.count = 0
        self.payload_bytes = 0

    def entry_size(self, body: bytes, filter_value: str | None = None) -> int:
        if not self.filters:
            return 12 + len(body)
        return 14 + len(body) + (len(filter_value.encode("utf-8")) if filter_value else 0)

    def add(self, publishing_id: int, body: bytes, filter_value: str | None = None) -> None:
        parts = self._parts
        n = len(body)
        try:
            if self.filters:
                parts.append(_ID.pack(publishing_id))
                if filter_value is None:
                    parts.append(_NULL_FILTER)
                    self.size += 2
                else:
                    raw = filter_value.encode("utf-8")
                    parts.append(I16.pack(len(raw)) + raw)
                    self.size += 2 + len(raw)
                parts.append(_SIZE.pack(n))
            else:
                parts.append(_ENTRY_V1.pack(publishing_id, n))
        except struct.error as exc:
            raise LocalProtocolError(f"cannot encode publishing id {publishing_id}: {exc}") from exc
        parts.append(body)
        self.size += 12 + n
        self.payload_bytes += n
        self.count += 1

    def add_entry(self, publishing_id: int, entry: bytes) -> None:
        """Add a complete osiris entry (a sub-batch from :func:`encode_sub_batch`); v1 only."""
        if self.filters:
            raise LocalProtocolError("sub-batch entries cannot go in a v2 (filtered) Publish")
        try:
            self._parts.append(_ID.pack(publishing_id))
        except struct.error as exc:
            raise LocalProtocolError(f"cannot encode publishing id {publishing_id}: {exc}") from exc
        self._parts.append(entry)
        self.size += 8 + len(entry)
        self.payload_bytes += len(entry)
        self.count += 1

    def add_range(
        self,
        first: int,
        bodies: Sequence[bytes],
        skip: bytes | bytearray,
        start: int,
        limit: int,
        max_count: int,
        *,
        wrap: bool = False,
    ) -> int:
        """Add ``bodies[start:]`` with publishing ids ``first + index`` (v1 only), skipping
        indexes where ``skip[index]`` is non-zero, until the frame would exceed ``limit``
        bytes or hold ``max_count`` entries. Returns the index to continue from.

        With ``wrap`` each body is written as an AMQP 1.0 message of one data section
        (what :func:`~streamwire.codec.amqp.encode_data_body` makes), without building
        that message first.

        The hot path of a producer: the native core (:mod:`streamwire._native`) writes the
        entries in one call; :meth:`add_range_py` is the same in pure Python (and what runs
        for input the native core leaves to it).
        """
        if self.filters:
            raise LocalProtocolError("add_range builds v1 frames; use add() with filters")
        if _native is not None:
            room, left = limit - self.size, max_count - self.count
            # the first entries of a frame come with its header: no join in build()
            head = self.publisher_id if not self.count and 0 <= self.publisher_id < 256 else -1
            done = _native.rmq_publish_entries(first, bodies, skip, start, room, left, wrap, head)
            if done is not None:
                entries, end, count, size, payload = done
                if count:
                    if head >= 0:
                        self._parts[0] = entries
                        self._framed = True
                    else:
                        self._parts.append(entries)
                    self.size += size
                    self.count += count
                    self.payload_bytes += payload
                return end
        return self.add_range_py(first, bodies, skip, start, limit, max_count, wrap=wrap)

    def add_range_py(
        self,
        first: int,
        bodies: Sequence[bytes],
        skip: bytes | bytearray,
        start: int,
        limit: int,
        max_count: int,
        *,
        wrap: bool = False,
    ) -> int:
        """:meth:`add_range` in pure Python: when nothing in reach is skipped and the bodies
        share one entry layout, the entry headers are packed by ``map`` and the frame's size
        limit found by bisecting cumulative sizes, so no Python code runs per entry."""
        if self.filters:
            raise LocalProtocolError("add_range builds v1 frames; use add() with filters")
        end = min(len(bodies), start + max(max_count - self.count, 0))
        if start >= end:
            return start
        if skip.count(0, start, end) == end - start:
            window = bodies[start:end]
            sizes = list(map(len, window))
            layout: struct.Struct | None = None
            if wrap:
                layout = _ENTRY_DATA8 if max(sizes) <= _MAX_DATA8 else None
                if layout is None and min(sizes) > _MAX_DATA8:
                    layout = _ENTRY_DATA32
            if not wrap or layout is not None:
                return start + self._add_uniform(first + start, window, sizes, limit, layout)
        return self._add_each(first, bodies, skip, start, limit, max_count, wrap)

    def _add_uniform(
        self,
        first_id: int,
        window: Sequence[bytes],
        sizes: list[int],
        limit: int,
        layout: struct.Struct | None,
    ) -> int:
        """Add the longest prefix of ``window`` that fits under ``limit``, entry headers
        packed with ``layout`` (``None``: plain v1 entries). Returns how many were added."""
        overhead = 12 if layout is None else layout.size
        ends = list(accumulate(map(overhead.__add__, sizes)))
        k = bisect_right(ends, limit - self.size)
        if not k:
            return 0
        ids = range(first_id, first_id + k)
        try:
            if layout is None:
                heads = list(map(_ENTRY_V1.pack, ids, sizes[:k]))
            else:
                prefix = DATA_PREFIX_SHORT if layout is _ENTRY_DATA8 else DATA_PREFIX_LONG
                framing = overhead - 12  # the data-section prefix and length
                lengths = map(framing.__add__, sizes[:k])
                heads = list(map(layout.pack, ids, lengths, repeat(prefix), sizes[:k]))
        except struct.error as exc:
            what = f"cannot encode publishing ids from {first_id}"
            raise LocalProtocolError(f"{what}: {exc}") from exc
        self._parts.extend(chain.from_iterable(zip(heads, window[:k], strict=True)))
        self.size += ends[k - 1]
        self.payload_bytes += ends[k - 1] - overhead * k
        self.count += k
        return k

    def _add_each(
        self,
        first: int,
        bodies: Sequence[bytes],
        skip: bytes | bytearray,
        start: int,
        limit: int,
        max_count: int,
        wrap: bool,
    ) -> int:
        parts = self._parts
        append = parts.append
        size, count, payload = self.size, self.count, self.payload_bytes
        i, end = start, len(bodies)
        try:
            while i < end and count < max_count:
                if skip[i]:
                    i += 1
                    continue
                body = bodies[i]
                n = len(body)
                if not wrap:
                    head = _ENTRY_V1.pack(first + i, n)
                elif n <= _MAX_DATA8:
                    head = _ENTRY_DATA8.pack(first + i, n + 5, DATA_PREFIX_SHORT, n)
                else:
                    head = _ENTRY_DATA32.pack(first + i, n + 8, DATA_PREFIX_LONG, n)
                if size + len(head) + n > limit:
                    break
                append(head)
                append(body)
                size += len(head) + n
                payload += n
                count += 1
                i += 1
        except struct.error as exc:
            raise LocalProtocolError(f"cannot encode publishing id {first + i}: {exc}") from exc
        finally:
            self.size, self.count, self.payload_bytes = size, count, payload
        return i

    def build(self) -> bytes:
        """The complete frame (size prefix included)."""
        version = 2 if self.filters else 1
        header = _HEADER.pack(self.size - 4, _K.PUBLISH, version, self.publisher_id, self.count)
        parts = self._parts
        if not self._framed:
            parts[0] = header
            return b"".join(parts)
        if len(parts) == 1:  # the native core's frame, its header written for these entries
            return parts[0]
        # entries were added after the native frame: its header is rewritten in the join
        return b"".join([header, memoryview(parts[0])[_HEADER.size :], *parts[1:]])


def is_id_run(ids: tuple[int, ...]) -> bool:
    """Whether ``ids`` run consecutively (``ids[k] == ids[0] + k``), as the broker's confirms
    usually do; in one native call when the core is loaded (:func:`is_id_run_py` is the
    pure twin)."""
    if _native is not None:
        run = _native.rmq_id_run(ids)
        if run is not None:
            return run
    return is_id_run_py(ids)


def is_id_run_py(ids: tuple[int, ...]) -> bool:
    """:func:`is_id_run` in pure Python."""
    return not ids or ids == tuple(range(ids[0], ids[0] + len(ids)))


SUB_BATCH_CODECS: Final = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
MAX_SUB_BATCH_RECORDS: Final = 0xFFFF


def encode_sub_batch(messages: Sequence[bytes], compression: str = "none") -> bytes:
    """One osiris sub-batch entry holding ``messages`` (stored under a single publishing id):
    ``1|codec:3|0000`` records u16, uncompressed u32, size u32, then the (compressed)
    ``records × (size u32, message)``."""
    parts: list[bytes] = []
    for message in messages:
        parts.append(_SIZE.pack(len(message)))
        parts.append(message)
    return _sub_batch_entry(b"".join(parts), len(messages), compression)


def encode_sub_batch_bodies(
    bodies: Sequence[bytes], compression: str = "none", wrap: bool = True
) -> bytes:
    """:func:`encode_sub_batch` of plain ``bodies``, each an AMQP message of one data section
    with ``wrap`` (``encode_data_body``), else as it is: in one native pass when the core is
    loaded and the bodies are a list or tuple of ``bytes``."""
    records = None if _native is None else _native.rmq_sub_batch_records(bodies, wrap)
    if records is None:
        return encode_sub_batch([encode_data_body(b) if wrap else b for b in bodies], compression)
    return _sub_batch_entry(records, len(bodies), compression)


def _sub_batch_entry(records: bytes, count: int, compression: str) -> bytes:
    """The entry of ``count`` records, ``records`` being them end to end (uncompressed)."""
    if not 0 < count <= MAX_SUB_BATCH_RECORDS:
        raise LocalProtocolError(f"a sub-batch holds 1 to 65535 messages, not {count}")
    codec = SUB_BATCH_CODECS.get(compression)
    if codec is None:
        raise LocalProtocolError(f"unknown sub-batch compression {compression!r}")
    stored = codecs.compress(compression, records)
    return SUB_BATCH_HEADER.pack(0x80 | (codec << 4), count, len(records), len(stored)) + stored


def encode_publish(
    publisher_id: int,
    messages: Sequence[tuple[int, bytes]],
    *,
    filter_values: Sequence[str | None] | None = None,
) -> bytes:
    """A complete Publish frame of simple entries from (publishing id, message bytes) pairs:
    v1, or v2 when ``filter_values`` is given (one per message)."""
    builder = PublishBuilder(publisher_id, filters=filter_values is not None)
    if filter_values is None:
        for pid, body in messages:
            builder.add(pid, body)
    else:
        if len(filter_values) != len(messages):
            raise LocalProtocolError(
                f"{len(filter_values)} filter values for {len(messages)} messages"
            )
        for (pid, body), fv in zip(messages, filter_values, strict=True):
            builder.add(pid, body, fv)
    return builder.build()


@register()
@dataclass(frozen=True, slots=True)
class PublishConfirm(Frame):
    KEY: ClassVar[int] = _K.PUBLISH_CONFIRM
    publisher_id: int
    publishing_ids: tuple[int, ...]

    def encode_body(self, w: Writer) -> None:
        w.u8(self.publisher_id).i32(len(self.publishing_ids))
        for pid in self.publishing_ids:
            w.u64(pid)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        publisher_id = r.u8()
        n = r.count(I32, 8, "publishing ids")
        buf, pos = r.buffer, r.pos
        r.skip(8 * n)
        ids = struct.unpack_from(f">{n}Q", buf, pos)
        return cls(publisher_id, ids)


@register()
@dataclass(frozen=True, slots=True)
class PublishError(Frame):
    KEY: ClassVar[int] = _K.PUBLISH_ERROR
    publisher_id: int
    errors: tuple[tuple[int, int], ...]
    """(publishing id, response code) pairs."""

    def encode_body(self, w: Writer) -> None:
        w.u8(self.publisher_id).i32(len(self.errors))
        for pid, code in self.errors:
            w.u64(pid).u16(code)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        publisher_id = r.u8()
        n = r.count(I32, 10, "publishing errors")
        return cls(publisher_id, tuple((r.u64(), r.u16()) for _ in range(n)))
