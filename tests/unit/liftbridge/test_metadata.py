"""Control-plane wrappers: stream options, metadata, subscriptions, cursors."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime

import pytest

from streamwire.codec.offset import Offset
from streamwire.errors import ConfigurationError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.metadata import (
    Broker,
    PartitionInfo,
    StartPosition,
    StopPosition,
    StreamOptions,
    create_stream_request,
    cursor_key,
    cursor_partition,
    metadata_from_pb,
    start_position,
    subscribe_request,
)


def test_positions_match_the_generated_enums() -> None:
    assert {p.name: int(p) for p in StartPosition} == dict(pb.StartPosition.items())
    assert {p.name: int(p) for p in StopPosition} == dict(pb.StopPosition.items())


def test_create_stream_request_defaults() -> None:
    req = create_stream_request("s", subject="s.subj")
    assert (req.name, req.subject, req.partitions, req.replicationFactor) == ("s", "s.subj", 1, 1)
    for field in ("retentionMaxBytes", "optimisticConcurrencyControl", "autoPauseTime"):
        assert not req.HasField(field)


def test_create_stream_request_options_and_units() -> None:
    opts = StreamOptions(
        retention_max_bytes=1 << 40,
        retention_max_messages=10,
        retention_max_age=1.5,
        cleaner_interval=60,
        segment_max_age=0.001,
        compact_max_goroutines=4,
        compact_enabled=False,
        auto_pause_time=0,
        auto_pause_disable_if_subscribers=True,
        min_isr=2,
        optimistic_concurrency_control=True,
        encryption=False,
    )
    req = create_stream_request(
        "s", subject="s", partitions=3, replication_factor=-1, group="g", options=opts
    )
    assert (req.partitions, req.replicationFactor, req.group) == (3, -1, "g")
    assert req.retentionMaxBytes.value == 1 << 40
    assert req.retentionMaxAge.value == 1500  # milliseconds on the wire
    assert req.cleanerInterval.value == 60_000
    assert req.segmentMaxAge.value == 1
    assert req.compactMaxGoroutines.value == 4
    assert req.HasField("compactEnabled")
    assert req.compactEnabled.value is False
    assert req.HasField("autoPauseTime")
    assert req.autoPauseTime.value == 0
    assert req.minIsr.value == 2
    assert req.optimisticConcurrencyControl.value is True
    assert req.HasField("encryption")


@pytest.mark.parametrize(
    ("kwargs", "options"),
    [
        ({"partitions": 0}, None),
        ({"partitions": True}, None),
        ({"replication_factor": 0}, None),
        ({"replication_factor": -2}, None),
        ({}, StreamOptions(retention_max_age=-1)),
        ({}, StreamOptions(retention_max_age=float("nan"))),
        ({}, StreamOptions(min_isr=1 << 31)),
        ({}, StreamOptions(compact_enabled=1)),  # type: ignore[arg-type]
        ({}, StreamOptions(retention_max_bytes=1.5)),  # type: ignore[arg-type]
    ],
)
def test_create_stream_request_refuses_bad_values(
    kwargs: dict[str, int], options: StreamOptions | None
) -> None:
    with pytest.raises(ConfigurationError):
        create_stream_request(
            "s",
            subject="s",
            options=options,
            partitions=kwargs.get("partitions", 1),
            replication_factor=kwargs.get("replication_factor", 1),
        )


def test_create_stream_request_needs_names() -> None:
    with pytest.raises(ConfigurationError):
        create_stream_request("", subject="s")
    with pytest.raises(ConfigurationError):
        create_stream_request("s", subject="")


def test_metadata_from_pb() -> None:
    resp = pb.FetchMetadataResponse(
        brokers=[pb.Broker(id="b1", host="127.0.0.1", port=9292, partitionCount=2, leaderCount=1)],
        streamMetadata=[
            pb.StreamMetadata(
                name="s",
                subject="subj",
                creationTimestamp=5,
                partitions={
                    1: pb.PartitionMetadata(
                        id=1,
                        leader="b1",
                        replicas=["b1"],
                        isr=["b1"],
                        highWatermark=3,
                        newestOffset=4,
                        paused=True,
                        messagesReceivedTimestamps=pb.PartitionEventTimestamps(
                            firstTimestamp=10, latestTimestamp=20
                        ),
                    )
                },
            ),
            pb.StreamMetadata(name="gone", error=pb.StreamMetadata.UNKNOWN_STREAM),
        ],
    )
    md = metadata_from_pb(resp)
    assert md.brokers == {"b1": Broker("b1", "127.0.0.1", 9292, 2, 1)}
    assert md.missing == frozenset({"gone"})
    info = md.streams["s"]
    assert (info.subject, info.partition_count, info.creation_timestamp) == ("subj", 1, 5)
    assert info.partitions[1] == PartitionInfo(
        "s", 1, "b1", ("b1",), ("b1",), 3, 4, True, False, 10, 20
    )


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        (Offset.first(), (StartPosition.EARLIEST, 0, 0)),
        (Offset.last(), (StartPosition.LATEST, 0, 0)),
        (Offset.next(), (StartPosition.NEW_ONLY, 0, 0)),
        (Offset.at(42), (StartPosition.OFFSET, 42, 0)),
        (
            Offset.timestamp(datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)),
            (StartPosition.TIMESTAMP, 0, 1704164645678901000),
        ),
    ],
)
def test_start_positions(offset: Offset, expected: tuple[StartPosition, int, int]) -> None:
    assert start_position(offset) == expected


def test_subscribe_request() -> None:
    req = subscribe_request("s", 2, Offset.at(5), stop_offset=9, resume=True, read_isr_replica=True)
    assert (req.stream, req.partition, req.startPosition, req.startOffset) == ("s", 2, 1, 5)
    assert (req.stopPosition, req.stopOffset, req.resume, req.readISRReplica) == (1, 9, True, True)
    assert subscribe_request("s", 0, Offset.first(), stop_latest=True).stopPosition == 2
    assert subscribe_request("s", 0, Offset.first(), stop_timestamp_ns=7).stopTimestamp == 7
    with pytest.raises(ConfigurationError):
        subscribe_request("s", 0, Offset.first(), stop_offset=1, stop_latest=True)


def test_cursor_partition_uses_the_servers_key_and_hash() -> None:
    assert cursor_key("c", "s", 3) == b"c,s,3"
    assert cursor_partition("c", "s", 3, 1) == 0
    assert cursor_partition("c", "s", 3, 7) == zlib.crc32(b"c,s,3") % 7
    with pytest.raises(ConfigurationError, match="cursors are disabled"):
        cursor_partition("c", "s", 0, 0)
