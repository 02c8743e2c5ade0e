"""Several streams in one query (``streams``), without a broker: the options per stream,
and the readers that put each stream's reader together (``streamwire.spark._several``),
over scripted per-stream readers: offsets of every stream, admission control shared across
all their partitions, a stream new to a checkpoint, the lag over all of them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

import streamwire
from streamwire.spark import SparkConfigurationError
from streamwire.spark._offsets import LAG_KEY, TriggerClock
from streamwire.spark._options import SourceOptions, for_stream, pattern_of, streams_of
from streamwire.spark._several import SeveralBatchReader, SeveralStreamReader
from streamwire.spark.datasource import (
    ADMISSION_CONTROL,
    ReadAllAvailable,
    ReadMaxRows,
    StreamwireDataSource,
    StreamwireSeveralBatchReader,
    StreamwireSeveralStreamReader,
)
from tests.spark._support import publish, run_available_now

pytestmark = [pytest.mark.spark]

URL = "liftbridge://127.0.0.1:9292"


# --- options ------------------------------------------------------------------------------


def test_streams_are_names_separated_by_commas_and_exclude_stream() -> None:
    assert streams_of({"url": URL, "streams": " a, b ,c"}) == ("a", "b", "c")
    assert streams_of({"url": URL, "stream": "a"}) == ()
    for bad, said in [
        ({"streams": "a,,b"}, "separated by commas"),
        ({"streams": "a,b,a"}, "twice"),
        ({"streams": "a", "stream": "a"}, "not both"),
    ]:
        with pytest.raises(SparkConfigurationError, match=said):
            streams_of({"url": URL, **bad})


def test_each_streams_options_take_its_part_of_the_json_offsets() -> None:
    options = {
        "url": URL,
        "streams": "a,b",
        "startingOffsets": json.dumps({"a": {"0": 5}}),
        "endingOffsets": json.dumps({"b": {"1": 9}}),
        "maxRecordsPerTrigger": "10",
    }
    a = SourceOptions.parse(for_stream(options, "a"), streaming=False)
    b = SourceOptions.parse(for_stream(options, "b"), streaming=False)
    assert (a.stream, a.starting, a.ending) == ("a", {0: 5}, "latest")
    assert (b.stream, b.starting, b.ending) == ("b", "earliest", {1: 9})  # a left-out stream
    assert a.max_records == b.max_records == 10
    latest = {"url": URL, "streams": "a,b", "startingOffsets": "latest"}
    plain = SourceOptions.parse(for_stream(latest, "b"), streaming=True)
    assert plain.starting == "latest"
    with pytest.raises(SparkConfigurationError, match="must name them"):
        for_stream({**options, "startingOffsets": json.dumps({"0": 5})}, "a")


def test_a_stream_pattern_is_a_regular_expression_instead_of_stream_or_streams() -> None:
    assert pattern_of({"url": URL}) is None
    pattern = pattern_of({"url": URL, "streamPattern": "orders-.*"})
    assert pattern is not None
    assert pattern.fullmatch("orders-eu")
    assert not pattern.fullmatch("old-orders-eu")  # matched as a whole, as Kafka's
    for bad, said in [
        ({"streamPattern": "a(", "stream": "x"}, "one of the options"),
        ({"streamPattern": "a", "streams": "x"}, "one of the options"),
        ({"streamPattern": "a("}, "regular expression"),
    ]:
        with pytest.raises(SparkConfigurationError, match=said):
            pattern_of({"url": URL, **bad})
    assert "streampattern" not in for_stream({"url": URL, "streamPattern": "o.*"}, "o1")


def test_the_data_source_makes_a_reader_per_stream() -> None:
    source = StreamwireDataSource({"url": URL, "streams": "a,b"})
    batch = source.reader(None)
    assert isinstance(batch, StreamwireSeveralBatchReader)
    assert sorted(batch.readers) == ["a", "b"]
    stream = source.streamReader(None)
    assert isinstance(stream, StreamwireSeveralStreamReader)
    assert [r.options.stream for r in stream.readers.values()] == ["a", "b"]


# --- the readers, over scripted readers of one stream each ---------------------------------


class Part:
    def __init__(self, stream: str, partition: int, start: int, end: int) -> None:
        self.stream, self.partition, self.start, self.end = stream, partition, start, end


class Scripted:
    """One stream's streaming reader: its tails and initial offsets scripted, and what the
    combined reader asked of it recorded."""

    def __init__(self, stream: str, initial: dict[int, int], tails: dict[int, int]) -> None:
        self.options = SourceOptions.parse(
            {"url": URL, "stream": stream, "maxRecordsPerTrigger": "10"}, streaming=True
        )
        self.initial, self.tails = initial, tails
        self.schema = None
        self.first = dict.fromkeys(tails, 0)  # every partition's earliest offset
        self.available_now = False
        self.chosen_ends: list[tuple[dict[int, int], dict[int, int]]] = []
        self.committed: list[dict[str, Any]] = []
        self.stopped = False
        self.lag: dict[str, Any] | None = None

    @property
    def stream(self) -> str:
        return self.options.stream

    def initialOffset(self) -> dict[str, Any]:
        return {self.stream: {str(p): o for p, o in self.initial.items()}}

    def earliest(self) -> dict[str, Any]:
        return {self.stream: {str(p): o for p, o in self.first.items()}}

    def latestOffset(self, start: Any = None, limit: Any = None) -> dict[str, Any]:
        return {self.stream: {str(p): o for p, o in self.tails.items()}}

    def window(self, start: Mapping[str, Any]) -> tuple[dict[int, int], dict[int, int]]:
        assert set(start) == {self.stream}
        return {int(p): o for p, o in start[self.stream].items()}, dict(self.tails)

    def chosen(self, begin: dict[int, int], end: dict[int, int]) -> None:
        self.chosen_ends.append((begin, end))

    def held_back(self, clock: TriggerClock, new: int, limit: Any, *, available_now: bool) -> bool:
        return new < 5  # as if minOffsetsPerTrigger were 5

    def limits(self, limit: Any) -> tuple[int | None, int | None]:
        return (None, None) if isinstance(limit, ReadAllAvailable) else (limit.max_rows, None)

    def sizes(self, begin: dict[int, int], end: dict[int, int]) -> dict[int, float]:
        return {}

    def getDefaultReadLimit(self) -> Any:
        return ReadMaxRows(10)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        report: dict[str, Any] = {self.stream: {str(p): o for p, o in self.tails.items()}}
        if self.lag is not None:
            report[LAG_KEY] = self.lag
        return report

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = True

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[Any]:
        begin, until = start[self.stream], end[self.stream]
        return [Part(self.stream, int(p), begin.get(p, 0), e) for p, e in until.items()]

    def read(self, partition: Any) -> Iterator[Any]:
        return iter([(self.stream, partition.partition)])

    def commit(self, end: dict[str, Any]) -> None:
        self.committed.append(end)

    def stop(self) -> None:
        self.stopped = True


def readers() -> tuple[Scripted, Scripted, SeveralStreamReader]:
    a = Scripted("a", {0: 0, 1: 0}, {0: 30, 1: 10})
    b = Scripted("b", {0: 0}, {0: 60})
    return a, b, SeveralStreamReader([a, b])


def test_a_row_limit_is_shared_out_across_every_streams_partitions() -> None:
    a, b, several = readers()
    start = several.initialOffset()
    assert start == {"a": {"0": 0, "1": 0}, "b": {"0": 0}}
    end = several.latestOffset(start, ReadMaxRows(10))
    # 100 offsets available, 10 taken in proportion: a/0 3, a/1 1, b/0 6
    assert end == {"a": {"0": 3, "1": 1}, "b": {"0": 6}}
    assert a.chosen_ends == [({0: 0, 1: 0}, {0: 3, 1: 1})]
    assert b.chosen_ends == [({0: 0}, {0: 6})]
    everything = several.latestOffset(end, ReadAllAvailable())
    assert everything == {"a": {"0": 30, "1": 10}, "b": {"0": 60}}


def test_min_offsets_count_the_new_offsets_of_every_stream() -> None:
    a, b, several = readers()
    a.tails, b.tails = {0: 2, 1: 1}, {0: 1}  # 4 new in all: held back (fewer than 5)
    start = several.initialOffset()
    assert several.latestOffset(start, ReadMaxRows(10)) == start
    b.tails = {0: 2}  # 5 in all: let through
    assert several.latestOffset(start, ReadMaxRows(10)) == {"a": {"0": 2, "1": 1}, "b": {"0": 2}}


def test_a_stream_new_to_the_checkpoint_starts_at_its_earliest_offsets() -> None:
    _, b, several = readers()
    b.initial, b.first = {0: 55}, {0: 40}  # startingOffsets (not used), the earliest offset
    checkpoint = {"a": {"0": 30, "1": 10}, "gone": {"0": 7}}  # b added since, "gone" removed
    end = several.latestOffset(checkpoint, ReadAllAvailable())
    assert end == {"a": {"0": 30, "1": 10}, "b": {"0": 60}}
    parts = several.partitions(checkpoint, end)
    assert [(p.stream, p.partition, p.start, p.end) for p in parts] == [
        ("a", 0, 30, 30),
        ("a", 1, 10, 10),
        ("b", 0, 40, 60),
    ]


def test_streams_created_since_that_match_the_pattern_join_from_their_earliest() -> None:
    a, b, _ = readers()
    c = Scripted("c", {0: 99}, {0: 5})
    created: list[Scripted] = []
    asked: list[set[str]] = []

    def discover(known: set[str]) -> list[Scripted]:
        asked.append(set(known))
        return [r for r in created if r.stream not in known]

    several = SeveralStreamReader([a, b], discover=discover)
    start = several.initialOffset()
    end = several.latestOffset(start, ReadAllAvailable())
    assert set(end) == {"a", "b"}
    created.append(c)
    end = several.latestOffset(end, ReadAllAvailable())
    assert end["c"] == {"0": 5}  # from its earliest (0), not its startingOffsets (99)
    assert asked == [{"a", "b"}, {"a", "b"}]
    several.prepareForTriggerAvailableNow()  # AvailableNow: what was there when it began
    created.append(Scripted("d", {0: 0}, {0: 1}))
    assert "d" not in several.latestOffset(end, ReadAllAvailable())
    assert len(asked) == 2


def test_reads_commits_and_stop_go_to_each_streams_reader() -> None:
    a, b, several = readers()
    assert list(several.read(Part("b", 0, 0, 5))) == [("b", 0)]
    assert list(several.read(object())) == []  # PySpark's stand-in for an empty read
    several.commit({"a": {"0": 3}, "b": {"0": 6}})
    assert a.committed == [{"a": {"0": 3}}]
    assert b.committed == [{"b": {"0": 6}}]
    several.prepareForTriggerAvailableNow()
    assert a.available_now
    assert b.available_now
    several.stop()
    assert a.stopped


def test_the_lag_is_per_stream_and_over_all_of_them() -> None:
    a, b, several = readers()
    a.lag = {
        "offsetsBehindLatest": {"0": 4, "1": 0},
        "minOffsetsBehindLatest": 0,
        "maxOffsetsBehindLatest": 4,
        "avgOffsetsBehindLatest": 2.0,
        "estimatedBytesBehindLatest": 40,
    }
    b.lag = {**a.lag, "offsetsBehindLatest": {"0": 8}, "estimatedBytesBehindLatest": None}
    report = several.reportLatestOffset()
    assert report is not None
    assert report["a"] == {"0": 30, "1": 10}
    lag = report[LAG_KEY]
    assert lag["offsetsBehindLatest"] == {"a": {"0": 4, "1": 0}, "b": {"0": 8}}
    assert (lag["minOffsetsBehindLatest"], lag["maxOffsetsBehindLatest"]) == (0, 8)
    assert lag["avgOffsetsBehindLatest"] == 4.0
    assert lag["estimatedBytesBehindLatest"] is None  # b has no estimate yet
    b.lag["estimatedBytesBehindLatest"] = 16
    report = several.reportLatestOffset()
    assert report is not None
    assert report[LAG_KEY]["estimatedBytesBehindLatest"] == 56


def test_the_batch_reader_reads_each_range_with_its_streams_reader() -> None:
    class Batch:
        def __init__(self, stream: str) -> None:
            self.options = SourceOptions.parse({"url": URL, "stream": stream}, streaming=False)
            self.schema = None

        def partitions(self) -> Sequence[Any]:
            return [Part(self.options.stream, 0, 0, 1)]

        def read(self, partition: Any) -> Iterator[Any]:
            return iter([self.options.stream])

    several = SeveralBatchReader([Batch("a"), Batch("b")])
    parts = several.partitions()
    assert [p.stream for p in parts] == ["a", "b"]
    assert [list(several.read(p)) for p in parts] == [["a"], ["b"]]


# --- with a broker, through Spark -----------------------------------------------------------


def _published(t: Any, stream: str, values: list[bytes]) -> None:
    publish(t, stream, [streamwire.Message(v) for v in values])


@pytest.mark.integration
def test_a_batch_read_of_several_streams(spark: Any, any_broker: Any) -> None:
    """``streams=a,b``: every message of both, each row with its stream; JSON offsets per
    stream (``b`` from its second offset on the first partition, ``a`` left out: from its
    earliest)."""
    a, b = any_broker.new_stream("several-a"), any_broker.new_stream("several-b")
    try:
        _published(any_broker, a, [b"a0", b"a1", b"a2"])
        _published(any_broker, b, [b"b0", b"b1"])
        reader = (
            spark.read.format("streamwire")
            .option("url", any_broker.url)
            .option("streams", f"{a},{b}")
        )
        rows = reader.load().select("stream", "value").collect()
        assert sorted((r.stream, r.value) for r in rows) == [
            (a, b"a0"),
            (a, b"a1"),
            (a, b"a2"),
            (b, b"b0"),
            (b, b"b1"),
        ]
        # b from the second offset of every partition on, a left out: from its earliest;
        # as reading b alone from there
        spec = {str(p): 1 for p in range(any_broker.partitions)}
        got = reader.option("startingOffsets", json.dumps({b: spec})).load()
        alone = (
            spark.read.format("streamwire")
            .option("url", any_broker.url)
            .option("stream", b)
            .option("startingOffsets", json.dumps(spec))
            .load()
        )
        b_rest = [(b, r.value) for r in alone.select("value").collect()]
        assert len(b_rest) < 2  # the first message of b's partition 0 or 1 is left out
        expected = sorted([(a, b"a0"), (a, b"a1"), (a, b"a2"), *b_rest])
        assert (
            sorted((r.stream, r.value) for r in got.select("stream", "value").collect()) == expected
        )
    finally:
        any_broker.delete_stream(a)
        any_broker.delete_stream(b)


@pytest.mark.integration
@pytest.mark.skipif(not ADMISSION_CONTROL, reason="admission control needs pyspark >= 4.2")
def test_a_streaming_read_of_several_streams_resumes_and_takes_a_stream_added(
    spark: Any, any_broker: Any, tmp_path: Any
) -> None:
    """``Trigger.AvailableNow`` with ``maxRecordsPerTrigger=3`` over two streams: batches of
    at most 3 rows taken from both, every message once. Run again from the checkpoint with
    a third stream added to ``streams`` and more messages: the new ones of the first two
    and all of the third (``startingOffsets=earliest``), once."""
    names = [any_broker.new_stream(f"several-{n}") for n in "abc"]
    checkpoint = tmp_path / "ckpt"

    def run(streams: list[str]) -> list[list[tuple[str, bytes]]]:
        batches: list[list[tuple[str, bytes]]] = []

        def collect(df: Any, batch_id: int) -> None:
            batches.append([(r.stream, r.value) for r in df.select("stream", "value").collect()])

        options = {
            "url": any_broker.url,
            "streams": ",".join(streams),
            "startingOffsets": "earliest",
            "maxRecordsPerTrigger": 3,
        }
        run_available_now(spark, options, checkpoint, collect)
        return batches

    try:
        a, b, c = names
        _published(any_broker, a, [b"a0", b"a1", b"a2", b"a3"])
        _published(any_broker, b, [b"b0", b"b1", b"b2"])
        first = run([a, b])
        assert all(len(batch) <= 3 for batch in first), first
        assert sorted(row for batch in first for row in batch) == sorted(
            [(a, b"a0"), (a, b"a1"), (a, b"a2"), (a, b"a3"), (b, b"b0"), (b, b"b1"), (b, b"b2")]
        )
        _published(any_broker, a, [b"a4"])
        _published(any_broker, c, [b"c0", b"c1"])
        second = run([a, b, c])
        assert sorted(row for batch in second for row in batch) == [
            (a, b"a4"),
            (c, b"c0"),
            (c, b"c1"),
        ]
    finally:
        for name in names:
            any_broker.delete_stream(name)


@pytest.mark.integration
def test_a_stream_pattern_reads_the_streams_it_matches(spark: Any, any_broker: Any) -> None:
    """``streamPattern``: a batch read of the two streams of three whose names match, on
    brokers that list their streams; on RabbitMQ, whose protocol cannot, an error saying
    to name them with ``streams``."""
    token = uuid.uuid4().hex[:8]  # this run's streams, and no other
    names = [any_broker.new_stream(f"pattern{token}-{n}") for n in ("in1", "in2", "out")]
    try:
        for name in names:
            _published(any_broker, name, [name.encode()])
        pattern = f"spark-pattern{token}-in.*"
        reader = (
            spark.read.format("streamwire")
            .option("url", any_broker.url)
            .option("streamPattern", pattern)
        )
        if any_broker.broker == "rabbitmq":
            with pytest.raises(Exception, match="name the streams with the option 'streams'"):
                reader.load().collect()
            return
        rows = reader.load().select("stream", "value").collect()
        got = sorted((r.stream, r.value) for r in rows)
        assert got == [(names[0], names[0].encode()), (names[1], names[1].encode())]
    finally:
        for name in names:
            any_broker.delete_stream(name)
