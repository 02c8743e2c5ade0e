"""Typed wrappers for the control plane: cluster metadata, stream options, subscriptions
and cursors. Pure functions from plain values to generated requests and from generated
responses to frozen dataclasses."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Final

from streamwire.codec.offset import Offset, OffsetKind
from streamwire.errors import ConfigurationError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb

__all__ = (
    "CURSORS_STREAM",
    "Broker",
    "Metadata",
    "PartitionInfo",
    "StartPosition",
    "StopPosition",
    "StreamInfo",
    "StreamOptions",
    "create_stream_request",
    "cursor_key",
    "cursor_partition",
    "metadata_from_pb",
    "partition_from_pb",
    "start_position",
    "subscribe_request",
)

#: The internal stream holding consumer cursors.
CURSORS_STREAM: Final = "__cursors"


class StartPosition(IntEnum):
    NEW_ONLY = 0
    OFFSET = 1
    EARLIEST = 2
    LATEST = 3
    TIMESTAMP = 4


class StopPosition(IntEnum):
    STOP_ON_CANCEL = 0
    STOP_OFFSET = 1
    STOP_LATEST = 2
    STOP_TIMESTAMP = 3


@dataclass(frozen=True, slots=True)
class Broker:
    id: str
    host: str
    port: int
    partition_count: int = 0
    leader_count: int = 0


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition. Offsets are -1 while the partition is empty; timestamps are Unix ns
    (0: never happened)."""

    stream: str
    id: int
    leader: str
    replicas: tuple[str, ...] = ()
    isr: tuple[str, ...] = ()
    high_watermark: int = -1
    newest_offset: int = -1
    paused: bool = False
    readonly: bool = False
    messages_received_first: int = 0
    messages_received_latest: int = 0


@dataclass(frozen=True, slots=True)
class StreamInfo:
    name: str
    subject: str
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    creation_timestamp: int = 0

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True, slots=True)
class Metadata:
    """Cluster metadata: brokers by id, streams by name, and requested streams that do not
    exist."""

    brokers: dict[str, Broker]
    streams: dict[str, StreamInfo]
    missing: frozenset[str] = frozenset()


def partition_from_pb(stream: str, p: pb.PartitionMetadata) -> PartitionInfo:
    ts = p.messagesReceivedTimestamps
    return PartitionInfo(
        stream=stream,
        id=p.id,
        leader=p.leader,
        replicas=tuple(p.replicas),
        isr=tuple(p.isr),
        high_watermark=p.highWatermark,
        newest_offset=p.newestOffset,
        paused=p.paused,
        readonly=p.readonly,
        messages_received_first=ts.firstTimestamp,
        messages_received_latest=ts.latestTimestamp,
    )


def metadata_from_pb(resp: pb.FetchMetadataResponse) -> Metadata:
    brokers = {
        b.id: Broker(b.id, b.host, b.port, b.partitionCount, b.leaderCount) for b in resp.brokers
    }
    streams: dict[str, StreamInfo] = {}
    missing: set[str] = set()
    for s in resp.streamMetadata:
        if s.error != pb.StreamMetadata.OK:
            missing.add(s.name)
            continue
        streams[s.name] = StreamInfo(
            name=s.name,
            subject=s.subject,
            partitions={pid: partition_from_pb(s.name, p) for pid, p in s.partitions.items()},
            creation_timestamp=s.creationTimestamp,
        )
    return Metadata(brokers, streams, frozenset(missing))


# --- stream creation --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamOptions:
    """Per-stream settings; ``None`` means the server's default. Durations are seconds
    (sent as milliseconds), sizes bytes."""

    retention_max_bytes: int | None = None
    retention_max_messages: int | None = None
    retention_max_age: float | None = None
    cleaner_interval: float | None = None
    segment_max_bytes: int | None = None
    segment_max_age: float | None = None
    compact_max_goroutines: int | None = None
    compact_enabled: bool | None = None
    auto_pause_time: float | None = None
    auto_pause_disable_if_subscribers: bool | None = None
    min_isr: int | None = None
    optimistic_concurrency_control: bool | None = None
    encryption: bool | None = None


# option -> (request field, kind)
_OPTION_FIELDS: Final[dict[str, tuple[str, str]]] = {
    "retention_max_bytes": ("retentionMaxBytes", "i64"),
    "retention_max_messages": ("retentionMaxMessages", "i64"),
    "retention_max_age": ("retentionMaxAge", "ms"),
    "cleaner_interval": ("cleanerInterval", "ms"),
    "segment_max_bytes": ("segmentMaxBytes", "i64"),
    "segment_max_age": ("segmentMaxAge", "ms"),
    "compact_max_goroutines": ("compactMaxGoroutines", "i32"),
    "compact_enabled": ("compactEnabled", "bool"),
    "auto_pause_time": ("autoPauseTime", "ms"),
    "auto_pause_disable_if_subscribers": ("autoPauseDisableIfSubscribers", "bool"),
    "min_isr": ("minIsr", "i32"),
    "optimistic_concurrency_control": ("optimisticConcurrencyControl", "bool"),
    "encryption": ("encryption", "bool"),
}


def _int_option(name: str, value: object, bits: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an int, got {value!r}")
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ConfigurationError(f"{name} {value} does not fit in int{bits}")
    return value


def _ms_option(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ConfigurationError(f"{name} must be a finite number of seconds >= 0")
    return _int_option(name, round(value * 1000), 64)


def create_stream_request(
    name: str,
    *,
    subject: str,
    partitions: int = 1,
    replication_factor: int = 1,
    group: str = "",
    options: StreamOptions | None = None,
) -> pb.CreateStreamRequest:
    if not isinstance(name, str) or not name:
        raise ConfigurationError("a stream name must be a non-empty str")
    if not isinstance(subject, str) or not subject:
        raise ConfigurationError("a stream subject must be a non-empty str")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ConfigurationError(f"partitions must be an int >= 1, got {partitions!r}")
    _int_option("partitions", partitions, 32)
    _int_option("replication_factor", replication_factor, 32)
    if replication_factor == 0 or replication_factor < -1:
        raise ConfigurationError("replication_factor must be >= 1, or -1 for every server")
    req = pb.CreateStreamRequest(
        subject=subject,
        name=name,
        group=group,
        replicationFactor=replication_factor,
        partitions=partitions,
    )
    for f in fields(StreamOptions):
        value = getattr(options, f.name) if options is not None else None
        if value is None:
            continue
        target, kind = _OPTION_FIELDS[f.name]
        if kind == "bool":
            if not isinstance(value, bool):
                raise ConfigurationError(f"{f.name} must be a bool, got {value!r}")
            getattr(req, target).value = value
        elif kind == "ms":
            getattr(req, target).value = _ms_option(f.name, value)
        else:
            getattr(req, target).value = _int_option(f.name, value, 32 if kind == "i32" else 64)
    return req


# --- subscriptions ----------------------------------------------------------------------


def start_position(offset: Offset) -> tuple[StartPosition, int, int]:
    """(start position, start offset, start timestamp in ns) for a streamwire offset.

    ``first`` is EARLIEST, ``last`` LATEST (the newest message), ``next`` NEW_ONLY (a named
    consumer resolves ``next`` through its cursor before getting here).
    """
    kind = offset.kind
    if kind is OffsetKind.FIRST:
        return StartPosition.EARLIEST, 0, 0
    if kind is OffsetKind.LAST:
        return StartPosition.LATEST, 0, 0
    if kind is OffsetKind.NEXT:
        return StartPosition.NEW_ONLY, 0, 0
    if kind is OffsetKind.OFFSET:
        return StartPosition.OFFSET, offset.value or 0, 0
    return StartPosition.TIMESTAMP, 0, (offset.value or 0) * 1000


def subscribe_request(
    stream: str,
    partition: int,
    offset: Offset,
    *,
    stop_offset: int | None = None,
    stop_latest: bool = False,
    stop_timestamp_ns: int | None = None,
    read_isr_replica: bool = False,
    resume: bool = False,
) -> pb.SubscribeRequest:
    """At most one stop condition; none means "until cancelled"."""
    stops = sum((stop_offset is not None, stop_latest, stop_timestamp_ns is not None))
    if stops > 1:
        raise ConfigurationError("give at most one of stop_offset, stop_latest, stop_timestamp")
    position, start_offset, start_ts = start_position(offset)
    stop = StopPosition.STOP_ON_CANCEL
    if stop_offset is not None:
        stop = StopPosition.STOP_OFFSET
        _int_option("stop_offset", stop_offset, 64)
    elif stop_latest:
        stop = StopPosition.STOP_LATEST
    elif stop_timestamp_ns is not None:
        stop = StopPosition.STOP_TIMESTAMP
        _int_option("stop_timestamp", stop_timestamp_ns, 64)
    _int_option("start offset", start_offset, 64)
    _int_option("start timestamp", start_ts, 64)
    _int_option("partition", partition, 32)
    return pb.SubscribeRequest(
        stream=stream,
        partition=partition,
        startPosition=int(position),  # type: ignore[arg-type]
        startOffset=start_offset,
        startTimestamp=start_ts,
        readISRReplica=read_isr_replica,
        resume=resume,
        stopPosition=int(stop),  # type: ignore[arg-type]
        stopOffset=stop_offset or 0,
        stopTimestamp=stop_timestamp_ns or 0,
    )


# --- cursors ----------------------------------------------------------------------------


def cursor_key(cursor_id: str, stream: str, partition: int) -> bytes:
    """The key the server files a cursor under (``cursors.go``: ``"id,stream,partition"``)."""
    return f"{cursor_id},{stream},{partition}".encode()


def cursor_partition(cursor_id: str, stream: str, partition: int, cursor_partitions: int) -> int:
    """The ``__cursors`` partition whose leader stores this cursor (CRC-32 IEEE mod count)."""
    if cursor_partitions < 1:
        raise ConfigurationError("cursors are disabled on the server (no __cursors partitions)")
    return zlib.crc32(cursor_key(cursor_id, stream, partition)) % cursor_partitions
