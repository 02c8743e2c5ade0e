"""What the RabbitMQ Streams double stores: streams as lists of chunks, super streams,
publisher sequences (deduplication) and stored consumer offsets. No I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from streamwire.rabbitmq.protocol.constants import OffsetType, ResponseCode
from tests.rabbitmq_double.chunks import encode_chunk, entry_records

__all__ = ("BrokerState", "Chunk", "StreamLog")

_R = ResponseCode


@dataclass(frozen=True, slots=True)
class Chunk:
    chunk_id: int
    records: int
    timestamp: int
    data: bytes
    """The encoded chunk, as a Deliver frame carries it."""


@dataclass
class StreamLog:
    name: str
    arguments: dict[str, str]
    chunks: list[Chunk] = field(default_factory=list)

    @property
    def next_offset(self) -> int:
        last = self.chunks[-1] if self.chunks else None
        return 0 if last is None else last.chunk_id + last.records

    def append(self, entries: Sequence[bytes], timestamp: int) -> Chunk:
        """Write one chunk of complete osiris entries."""
        chunk_id = self.next_offset
        records = sum(entry_records(e) for e in entries)
        chunk = Chunk(
            chunk_id, records, timestamp, encode_chunk(chunk_id, entries, timestamp=timestamp)
        )
        self.chunks.append(chunk)
        return chunk

    def start_index(self, offset_type: int, offset: int | None) -> int:
        """Index of the first chunk a subscription with this offset spec gets."""
        chunks = self.chunks
        if offset_type == OffsetType.FIRST:
            return 0
        if offset_type == OffsetType.LAST:
            return max(len(chunks) - 1, 0)
        if offset_type == OffsetType.NEXT:
            return len(chunks)
        if offset_type == OffsetType.OFFSET:
            wanted = offset or 0
            for i, c in enumerate(chunks):
                if wanted < c.chunk_id + c.records:
                    return i
            return len(chunks)
        for i, c in enumerate(chunks):  # TIMESTAMP: the first chunk at or after it
            if c.timestamp >= (offset or 0):
                return i
        return len(chunks)


class BrokerState:
    def __init__(self) -> None:
        self.streams: dict[str, StreamLog] = {}
        self.super_streams: dict[str, list[tuple[str, str]]] = {}
        """Super stream → (partition stream, binding key), in partition order."""
        self.sequences: dict[tuple[str, str], int] = {}
        """(publisher reference, stream) → last publishing id stored."""
        self.offsets: dict[tuple[str, str], int] = {}
        """(consumer reference, stream) → stored offset."""

    # --- streams -------------------------------------------------------------------------

    def create(self, name: str, arguments: dict[str, str] | None = None) -> int:
        args = dict(arguments or {})
        existing = self.streams.get(name)
        if existing is not None:
            same = existing.arguments == args
            return _R.STREAM_ALREADY_EXISTS if same else _R.PRECONDITION_FAILED
        self.streams[name] = StreamLog(name, args)
        return _R.OK

    def delete(self, name: str) -> int:
        if self.streams.pop(name, None) is None:
            return _R.STREAM_DOES_NOT_EXIST
        return _R.OK

    def create_super_stream(
        self,
        name: str,
        partitions: Sequence[str],
        keys: Sequence[str],
        arguments: dict[str, str] | None = None,
    ) -> int:
        if name in self.super_streams:
            return _R.STREAM_ALREADY_EXISTS
        if len(partitions) != len(keys) or any(p in self.streams for p in partitions):
            return _R.PRECONDITION_FAILED
        for p in partitions:
            self.create(p, arguments)
        self.super_streams[name] = list(zip(partitions, keys, strict=True))
        return _R.OK

    def delete_super_stream(self, name: str) -> int:
        bound = self.super_streams.pop(name, None)
        if bound is None:
            return _R.STREAM_DOES_NOT_EXIST
        for partition, _key in bound:
            self.delete(partition)
        return _R.OK

    def partitions(self, super_stream: str) -> tuple[int, tuple[str, ...]]:
        bound = self.super_streams.get(super_stream)
        if bound is None:
            return _R.STREAM_DOES_NOT_EXIST, ()
        return _R.OK, tuple(p for p, _ in bound)

    def route(self, key: str, super_stream: str) -> tuple[int, tuple[str, ...]]:
        bound = self.super_streams.get(super_stream)
        if bound is None:
            return _R.STREAM_DOES_NOT_EXIST, ()
        return _R.OK, tuple(p for p, k in bound if k == key)

    # --- publishing ----------------------------------------------------------------------

    def publish(
        self, stream: str, reference: str, entries: Sequence[tuple[int, bytes]], timestamp: int
    ) -> Chunk | None:
        """Store ``(publishing id, entry)`` pairs as one chunk. A named publisher's ids not
        above the last one stored under its name are dropped (deduplication); the caller
        confirms them all the same, as the broker does."""
        log = self.streams[stream]
        kept = list(entries)
        if reference:
            last = self.sequences.get((reference, stream), 0)
            kept = [(pid, e) for pid, e in entries if pid > last]
            if kept:
                self.sequences[(reference, stream)] = max(pid for pid, _ in kept)
        if not kept:
            return None
        return log.append([e for _, e in kept], timestamp)
