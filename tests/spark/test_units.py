"""The pure parts of streamwire.spark: offsets, admission control, options, id scheme,
the sink's column contract and pickling. No SparkSession, no broker."""

from __future__ import annotations

import asyncio
import itertools
import json
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
)

import streamwire
from streamwire.spark import SinkSchemaError, SparkConfigurationError, foreach_batch_sink
from streamwire.spark._offsets import (
    cap,
    cap_bytes,
    decode,
    encode,
    lost,
    parse_spec,
    resolve,
    split,
)
from streamwire.spark._options import SinkOptions, SourceOptions
from streamwire.spark._publish import publishing_id, reference
from streamwire.spark._runtime import close_runtime, runtime
from streamwire.spark._schema import SinkLayout, sink_layout
from streamwire.spark.datasource import _store_progress

pytestmark = [pytest.mark.spark, pytest.mark.integration]

URL = "rabbitmq-stream://guest:guest@127.0.0.1:5552/"


# --- offsets -----------------------------------------------------------------------------


def test_lost_offsets_are_the_part_of_a_range_below_the_earliest_or_in_a_gone_partition() -> None:
    bounds = {0: (100, 500), 1: (0, 40), 2: (30, 30)}
    start = {0: 50, 1: 10, 2: 30, 3: 7}
    end = {0: 400, 1: 40, 2: 30, 3: 9}
    # partition 0 lost 50..99; 1 is whole; 2 has no range; 3 is gone
    assert lost(start, end, bounds) == {0: (50, 100), 3: (7, 9)}
    # a range entirely below the earliest is lost entirely
    assert lost({0: 10}, {0: 60}, bounds) == {0: (10, 60)}
    assert lost({0: 100}, {0: 400}, bounds) == {}
    # a partition new since the start offsets begins at 0
    assert lost({}, {0: 200}, bounds) == {0: (0, 100)}


def test_min_partitions_cuts_large_ranges_as_kafka_does() -> None:
    ranges = [(0, 0, 900), (1, 50, 150), (2, 7, 7)]
    assert split(ranges, None) == [(0, 0, 900), (1, 50, 150)]
    assert split(ranges, 2) == [(0, 0, 900), (1, 50, 150)]  # already as many ranges
    assert split(ranges, 10) == [
        (0, 0, 100), (0, 100, 200), (0, 200, 300), (0, 300, 400), (0, 400, 500),
        (0, 500, 600), (0, 600, 700), (0, 700, 800), (0, 800, 900), (1, 50, 150),
    ]  # fmt: skip
    assert split([(0, 0, 10)], 3) == [(0, 0, 4), (0, 4, 7), (0, 7, 10)]
    assert split([(0, 0, 2)], 5) == [(0, 0, 1), (0, 1, 2)]  # never an empty piece


@given(
    sizes=st.lists(st.integers(0, 5000), min_size=1, max_size=6),
    want=st.one_of(st.none(), st.integers(1, 40)),
)
def test_min_partitions_pieces_cover_each_range_once_in_order(
    sizes: list[int], want: int | None
) -> None:
    ranges = [(p, 1000 * p, 1000 * p + n) for p, n in enumerate(sizes)]
    pieces = split(ranges, want)
    for p, start, end in ranges:
        mine = [(s, e) for q, s, e in pieces if q == p]
        if end == start:
            assert mine == []
            continue
        assert mine[0][0] == start
        assert mine[-1][1] == end
        assert all(a[1] == b[0] for a, b in itertools.pairwise(mine))
        assert all(e > s for s, e in mine)
        assert max(e - s for s, e in mine) - min(e - s for s, e in mine) <= 1
    assert pieces == sorted(pieces)
    non_empty = sum(1 for n in sizes if n)
    if want is None or non_empty >= want:
        assert len(pieces) == non_empty
    else:  # about want: each range's share rounds by at most one piece
        assert min(want, sum(sizes)) - non_empty <= len(pieces) <= want + non_empty


def test_offsets_are_string_keyed_sorted_json_that_round_trips() -> None:
    offsets = encode("orders", {10: 5, 2: 7, 0: 0})
    text = json.dumps(offsets)
    assert text == '{"orders": {"0": 0, "2": 7, "10": 5}}'
    # Spark hands back what json.loads makes of it; encoding that again is byte-identical
    again = encode("orders", decode("orders", json.loads(text)))
    assert json.dumps(again) == text


def test_offsets_of_another_stream_are_refused() -> None:
    with pytest.raises(SparkConfigurationError, match="not for stream 'b'"):
        decode("b", {"a": {"0": 1}})
    with pytest.raises(SparkConfigurationError, match="not a number"):
        decode("a", {"a": {"x": 1}})
    with pytest.raises(SparkConfigurationError, match="bad offset"):
        decode("a", {"a": {"0": -1}})


def test_starting_offsets_spec() -> None:
    assert parse_spec(None, "s", default="latest", option="o") == "latest"
    assert parse_spec("EARLIEST", "s", default="latest", option="o") == "earliest"
    assert parse_spec('{"0": 5, "1": -2}', "s", default="latest", option="o") == {0: 5, 1: -2}
    assert parse_spec('{"s": {"1": -1}}', "s", default="latest", option="o") == {1: -1}
    with pytest.raises(SparkConfigurationError, match="startingOffsets must be"):
        parse_spec("soon", "s", default="latest", option="startingOffsets")
    bounds = {0: (3, 10), 1: (0, 4)}
    assert resolve("earliest", bounds) == {0: 3, 1: 0}
    assert resolve("latest", bounds) == {0: 10, 1: 4}
    assert resolve({0: 5, 1: -1}, bounds) == {0: 5, 1: 4}
    assert resolve({1: 2}, bounds) == {0: 3, 1: 2}  # left out: earliest


def test_admission_control_caps_proportionally_and_never_goes_backwards() -> None:
    assert cap({0: 0}, {0: 10}, None) == {0: 10}
    assert cap({0: 0}, {0: 10}, 4) == {0: 4}
    assert cap({0: 8}, {0: 10}, 4) == {0: 10}
    # 30 and 10 available, 8 allowed: 6 and 2
    assert cap({0: 0, 1: 0}, {0: 30, 1: 10}, 8) == {0: 6, 1: 2}
    # remainders: 5 and 5 available, 3 allowed -> the lower partition gets the extra one
    assert cap({0: 0, 1: 0}, {0: 5, 1: 5}, 3) == {0: 2, 1: 1}
    # a tail below the start (stream recreated?) never moves the offset back
    assert cap({0: 9}, {0: 4}, 3) == {0: 9}
    # a partition new in the tails starts from 0
    assert cap({0: 2}, {0: 2, 1: 3}, None) == {0: 2, 1: 3}
    for limit in range(1, 12):
        end = cap({0: 0, 1: 2, 2: 7}, {0: 9, 1: 3, 2: 7}, limit)
        assert sum(end[p] - s for p, s in {0: 0, 1: 2, 2: 7}.items()) == min(limit, 10)


def test_a_byte_limit_keeps_the_same_fraction_of_every_partition() -> None:
    sizes = {0: 100.0, 1: 300.0}
    # 10 and 10 available: 4 000 bytes; 2 000 allowed -> half of each
    assert cap_bytes({0: 0, 1: 0}, {0: 10, 1: 10}, 2000, sizes, unsampled=1) == {0: 5, 1: 5}
    # within the limit: everything
    assert cap_bytes({0: 0, 1: 0}, {0: 10, 1: 10}, 4000, sizes, unsampled=1) == {0: 10, 1: 10}
    # a limit below one message still moves the partition with the most
    assert cap_bytes({0: 0, 1: 4}, {0: 3, 1: 9}, 1, sizes, unsampled=1) == {0: 0, 1: 5}
    # a partition without a sample counts as the mean of the others (200 bytes)
    assert cap_bytes({0: 0, 1: 0, 2: 0}, {0: 4, 1: 4, 2: 4}, 1200, sizes, unsampled=1) == {
        0: 2,
        1: 2,
        2: 2,
    }
    # nothing sampled: no estimate, so a small batch (at most `unsampled` offsets each)
    assert cap_bytes({0: 0, 1: 5}, {0: 900, 1: 6}, 10, {}, unsampled=100) == {0: 100, 1: 6}
    assert cap_bytes({0: 7, 1: 0}, {0: 4, 1: 10}, 10, {}, unsampled=3) == {0: 7, 1: 3}
    # a partition with nothing to read keeps its offset, never going back
    assert cap_bytes({0: 7, 1: 0}, {0: 4, 1: 10}, 1500, sizes, unsampled=1) == {0: 7, 1: 5}
    with pytest.raises(SparkConfigurationError):
        cap_bytes({0: 0}, {0: 1}, 0, sizes, unsampled=1)


@given(
    st.dictionaries(
        st.integers(0, 5),
        st.tuples(st.integers(0, 1000), st.integers(0, 1000), st.floats(0.5, 5000)),
        min_size=1,
    ),
    st.integers(1, 10**7),
)
def test_a_byte_limit_never_overshoots_more_than_one_message(
    parts: dict[int, tuple[int, int, float]], max_bytes: int
) -> None:
    start = {p: a for p, (a, _, _) in parts.items()}
    end = {p: a + n for p, (a, n, _) in parts.items()}
    sizes = {p: size for p, (_, _, size) in parts.items()}
    out = cap_bytes(start, end, max_bytes, sizes, unsampled=100)
    assert all(start[p] <= out[p] <= end[p] for p in parts)
    taken = {p: out[p] - start[p] for p in parts}
    used = sum(taken[p] * sizes[p] for p in parts)
    if sum(end[p] - start[p] for p in parts):
        assert sum(taken.values()) >= 1  # progress
        assert used <= max_bytes or sum(taken.values()) == 1
    if sum((end[p] - start[p]) * sizes[p] for p in parts) <= max_bytes:
        assert out == end


# --- the publishing id scheme ------------------------------------------------------------


def test_publishing_ids_increase_across_batches_and_are_never_zero() -> None:
    assert publishing_id(0, 0) == 1
    assert publishing_id(3, 0) == 3 * 2**32 + 1
    assert publishing_id(3, 41) == 3 * 2**32 + 42
    assert publishing_id(3, 2**32 - 2) < publishing_id(4, 0)
    with pytest.raises(SparkConfigurationError):
        publishing_id(2**32, 0)
    with pytest.raises(SparkConfigurationError):
        publishing_id(0, 2**32 - 1)


def test_references_fit_the_broker_limit_and_stay_distinct() -> None:
    qid = "0b0f1a3e-8d5e-4d8e-9a8e-6f3f0e2b6c11"
    assert reference("sink", qid, 3) == f"sink-{qid}-p3"
    long_name = "n" * 300
    refs = {reference(long_name, qid, p) for p in range(3)}
    assert len(refs) == 3
    assert all(len(r.encode()) <= 255 and r.endswith(f"-p{r[-1]}") for r in refs)
    assert reference(long_name, qid, 0) != reference(long_name, qid.replace("0", "1"), 0)


# --- options -----------------------------------------------------------------------------


def test_source_options() -> None:
    opts = SourceOptions.parse(
        {"URL": URL, "stream": "s", "MaxRecordsPerTrigger": "5", "timeout": "2.5"},
        streaming=True,
    )
    assert (opts.stream, opts.max_records, opts.timeout, opts.starting) == ("s", 5, 2.5, "latest")
    assert SourceOptions.parse({"url": URL, "stream": "s"}, streaming=False).starting == "earliest"
    with pytest.raises(SparkConfigurationError, match="'stream'"):
        SourceOptions.parse({"url": URL}, streaming=True)
    with pytest.raises(SparkConfigurationError, match="maxRecordsPerTrigger"):
        SourceOptions.parse(
            {"url": URL, "stream": "s", "maxRecordsPerTrigger": "0"}, streaming=True
        )
    with pytest.raises(SparkConfigurationError, match="batch reads only"):
        SourceOptions.parse({"url": URL, "stream": "s", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(streamwire.ConfigurationError, match="scheme"):
        SourceOptions.parse({"url": "kafka://x", "stream": "s"}, streaming=True)


def test_the_retry_interval_is_a_duration_in_milliseconds_by_default() -> None:
    def interval(value: str | None) -> float:
        options = {"url": URL, "stream": "s"}
        if value is not None:
            options["fetchOffset.retryIntervalMs"] = value
        return SourceOptions.parse(options, streaming=True).retry_interval

    assert (interval(None), interval("250"), interval("2s")) == (1.0, 0.25, 2.0)
    with pytest.raises(SparkConfigurationError, match=r"fetchOffset\.retryIntervalMs"):
        interval("soon")


def test_a_bare_stream_name_works_for_every_broker() -> None:
    iggy = "iggy://iggy:iggy@127.0.0.1:8090"
    for url in (iggy, URL):
        for name in ("events", "events/eu"):
            assert SourceOptions.parse({"url": url, "stream": name}, streaming=True).stream == name
            assert SinkOptions.parse({"url": url, "stream": name}).stream == name
    with pytest.raises(SparkConfigurationError, match="stream is required"):
        foreach_batch_sink(iggy, "")


def test_sink_options() -> None:
    opts = SinkOptions.parse({"url": URL, "stream": "s", "ignoreExtraColumns": "TRUE"})
    assert (opts.name, opts.max_in_flight, opts.ignore_extra_columns) == (
        "streamwire-sink",
        10_000,
        True,
    )
    with pytest.raises(SparkConfigurationError, match="true or false"):
        SinkOptions.parse({"url": URL, "stream": "s", "ignoreExtraColumns": "yes"})
    assert opts.chunk_rows == 10_000
    assert SinkOptions.parse({"url": URL, "stream": "s", "CHUNKROWS": "100"}).chunk_rows == 100
    with pytest.raises(SparkConfigurationError, match="chunkRows"):
        SinkOptions.parse({"url": URL, "stream": "s", "chunkRows": "0"})


# --- the column contract -----------------------------------------------------------------

HEADERS = MapType(StringType(), BinaryType())


def schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, t) for name, t in fields])  # type: ignore[arg-type]


def test_sink_layout_accepts_value_key_headers_in_any_order() -> None:
    layout = sink_layout(
        schema(("headers", HEADERS), ("key", StringType()), ("value", BinaryType()))
    )
    assert layout == SinkLayout(value=2, key=1, headers=0)
    msg = layout.message(({"a": b"1", "gone": None}, "k", b"v"), 0)
    assert (msg.value, msg.key, msg.headers) == (
        b"v",
        b"k",
        {"a": streamwire.HeaderValue.raw(b"1")},
    )
    assert sink_layout(schema(("value", StringType()))).message(("text",), 0).value == b"text"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ((("key", BinaryType()),), "'value' column (binary) is missing"),
        ((("value", IntegerType()),), "column 'value' must be binary (or string), not int"),
        ((("value", BinaryType()), ("key", IntegerType())), "column 'key' must be binary"),
        (
            (("value", BinaryType()), ("headers", MapType(StringType(), IntegerType()))),
            "column 'headers' must be map<string,binary>, not map<string,int>",
        ),
        ((("value", BinaryType()), ("extra", StringType())), "unexpected column(s) 'extra'"),
    ],
)
def test_sink_layout_says_what_is_wrong(
    fields: tuple[tuple[str, object], ...], problem: str
) -> None:
    with pytest.raises(SinkSchemaError) as caught:
        sink_layout(schema(*fields))
    assert problem in str(caught.value)
    assert isinstance(caught.value, streamwire.ConfigurationError)


def test_extra_columns_can_be_ignored_and_null_values_are_refused() -> None:
    layout = sink_layout(
        schema(("id", IntegerType()), ("value", BinaryType())), ignore_extra_columns=True
    )
    assert layout == SinkLayout(value=1)
    with pytest.raises(SinkSchemaError, match=r"row 7 .* null 'value'"):
        layout.message((1, None), 7)


# --- pickling ----------------------------------------------------------------------------


def test_sink_function_pickles_to_its_configuration() -> None:
    sink = foreach_batch_sink(URL, "events", name="orders", max_in_flight=50, sub_batch_size=0)
    data = pickle.dumps(sink)
    assert len(data) < 2000  # configuration only
    clone = pickle.loads(data)  # noqa: S301 (our own bytes)
    assert (clone.url, clone.stream, clone.name, clone.max_in_flight) == (
        URL,
        "events",
        "orders",
        50,
    )
    assert clone.producer_options == (("sub_batch_size", 0),)
    assert clone.metrics.batches == []


def test_sink_arguments_are_checked_when_it_is_made() -> None:
    with pytest.raises(streamwire.ConfigurationError, match="scheme"):
        foreach_batch_sink("http://x", "s")
    with pytest.raises(SparkConfigurationError, match="max_in_flight"):
        foreach_batch_sink(URL, "s", max_in_flight=0)
    with pytest.raises(SparkConfigurationError, match="stream"):
        foreach_batch_sink(URL, "")


# --- what exactly-once needs (checked on the driver) ----------------------------------------


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _Session:
    def __init__(self, conf: dict[str, str]) -> None:
        self.conf = _Conf(conf)
        self.sparkContext = self

    def getLocalProperty(self, name: str) -> str | None:
        return None  # outside a streaming query


class _BatchFrame:
    """What the sink asks of a micro-batch's DataFrame before any job: its schema and its
    session (conf, local properties). Publishing it would need Spark, so it has no rows."""

    def __init__(self, conf: dict[str, str] | None = None) -> None:
        self.schema = schema(("value", BinaryType()))
        self.sparkSession = _Session(conf or {})


def test_exactly_once_without_a_query_identity_is_refused_unless_at_least_once_is_asked() -> None:
    sink = foreach_batch_sink(URL, "events")
    with pytest.raises(SparkConfigurationError, match=r"no streaming query id .* query_id="):
        sink(_BatchFrame(), 0)
    with pytest.raises(SparkConfigurationError, match="guarantee='at-least-once'"):
        sink(_BatchFrame(), 0)
    assert sink.metrics.batches == []
    # an identity given: the check passes (the job itself is not run here)
    assert foreach_batch_sink(URL, "e", query_id="q")._identity(_BatchFrame()) == "q"
    lenient = foreach_batch_sink(URL, "e", guarantee="at-least-once")
    assert lenient._identity(_BatchFrame({"spark.speculation": "true"})) is None


def test_speculative_execution_is_refused_for_exactly_once() -> None:
    sink = foreach_batch_sink(URL, "events", query_id="q")
    for on in ("true", "TRUE", " true "):
        with pytest.raises(SparkConfigurationError, match=r"spark\.speculation is on"):
            sink(_BatchFrame({"spark.speculation": on}), 0)
    assert sink._identity(_BatchFrame({"spark.speculation": "false"})) == "q"


def test_an_unknown_guarantee_is_refused_when_the_sink_is_made() -> None:
    with pytest.raises(SparkConfigurationError, match="guarantee must be one of"):
        foreach_batch_sink(URL, "s", guarantee="at-most-once")  # type: ignore[arg-type]


# --- consumerName ------------------------------------------------------------------------


def test_a_consumer_name_store_that_times_out_is_logged_not_raised(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The checkpoint is what the query resumes from: a failed store of the progress under
    ``consumerName`` is a WARNING. A store that timed out inside the coroutine (asyncio's
    builtin TimeoutError) used to escape the StreamwireError handler and fail the commit."""

    class SlowBroker:
        async def store_offset(
            self, stream: str, name: str, offset: int, *, partition: int | None = None
        ) -> None:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(5)

    rt = runtime()
    try:
        monkeypatch.setattr(rt, "with_client", lambda key, use: use(SlowBroker()))
        opts = SourceOptions.parse(
            {"url": "rabbitmq-stream://localhost", "stream": "s", "consumerName": "n"},
            streaming=True,
        )
        with caplog.at_level("WARNING", logger="streamwire.spark.datasource"):
            _store_progress(opts, "n", {0: 5})
        assert "storing the progress of s as 'n' failed" in caplog.text
        assert "timed out" in caplog.text
    finally:
        close_runtime()


class _Recorded:
    """A producer that records the options it was made with."""

    def __init__(self, options: dict[str, object]) -> None:
        self.options = options

    async def __aenter__(self) -> _Recorded:
        return self


class _Client:
    producer_options = frozenset({"ack_policy", "max_in_flight"})

    def producer(self, stream: str, *, name: str | None, **options: object) -> _Recorded:
        return _Recorded(options)


class _ReplicatingClient(_Client):
    @property
    def replicated_ack_options(self) -> dict[str, object]:
        return {"ack_policy": "all"}


@pytest.mark.parametrize(
    ("client", "given", "made"),
    [
        (_ReplicatingClient(), {}, {"ack_policy": "all", "max_in_flight": 10}),
        (_ReplicatingClient(), {"ack_policy": "one"}, {"ack_policy": "one", "max_in_flight": 10}),
        (_Client(), {}, {"max_in_flight": 10}),
    ],
)  # fmt: skip
def test_the_sink_asks_for_replicated_acks_where_a_broker_confirms_before_them(
    client: _Client, given: dict[str, object], made: dict[str, object]
) -> None:
    """On a ``streamwire.ReplicatedAcks`` client (Liftbridge) the sink's producers confirm
    only what the replicas have, unless the user's producer options say otherwise."""
    from streamwire.spark._brokers import Broker

    assert isinstance(client, streamwire.ReplicatedAcks) is isinstance(client, _ReplicatingClient)
    publisher = asyncio.run(
        Broker.of("liftbridge://127.0.0.1:9292").open_publisher(
            client,  # type: ignore[arg-type]
            "s",
            reference=None,
            options=given,
            max_in_flight=10,
        )
    )
    assert publisher.producer.options == made  # type: ignore[attr-defined]


def test_a_reader_counts_each_loss_once_and_remembers_a_bounded_few() -> None:
    """The ``failOnDataLoss=false`` count (the query progress's skipped offsets): a loss met
    twice (when a batch's end is chosen, and when it is planned) counts once; a query that
    meets a loss in every batch keeps a bounded memory of them."""
    from streamwire.spark.datasource import COUNTED_KEPT, _Losses

    losses = _Losses()
    assert losses._count("gone", {0: (0, 10)}) == 10
    assert losses._count("gone", {0: (0, 10)}) == 0  # the same loss, planned
    for batch in range(1, 5 * COUNTED_KEPT):
        assert losses._count("gone", {0: (batch * 10, batch * 10 + 10)}) == 10
    assert losses.skipped == 10 * 5 * COUNTED_KEPT
    assert len(losses._counted) == COUNTED_KEPT


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_a_committed_tail_below_the_checkpoint_with_the_messages_still_appended_waits(
    monkeypatch: pytest.MonkeyPatch, fail_on_data_loss: str
) -> None:
    """A Liftbridge server restarted after a crash reports its committed tail below what
    the query already read, though its log still holds it (``Settling.appended_bounds``):
    nothing new to read, not a recreated stream. Where the appended tail is below the
    checkpoint too, the stream was recreated (a DataLossError, or read again)."""
    from streamwire.spark import DataLossError
    from streamwire.spark import _offsets as offsets_mod
    from streamwire.spark import datasource as ds

    opts = SourceOptions.parse(
        {
            "url": "liftbridge://127.0.0.1:9292",
            "stream": "orders",
            "failOnDataLoss": fail_on_data_loss,
        },
        streaming=True,
    )
    appended = {0: 120, 1: 40}
    monkeypatch.setattr(ds, "_bounds", lambda o: {0: (0, 50), 1: (0, 40)})
    monkeypatch.setattr(ds, "_appended", lambda o: appended)
    reader = ds.StreamwireStreamReader(opts)
    start = offsets_mod.encode("orders", {0: 100, 1: 30})
    end = offsets_mod.decode("orders", reader.latestOffset(start, ds.ReadAllAvailable()))
    assert end == {0: 100, 1: 40}  # partition 0 waits for its tail to be committed
    assert reader._losses.skipped == 0

    appended[0] = 60  # what the checkpoint read is not in the log: recreated
    if fail_on_data_loss == "true":
        with pytest.raises(DataLossError, match="deleted and created again"):
            reader.latestOffset(start, ds.ReadAllAvailable())
    else:
        end = offsets_mod.decode("orders", reader.latestOffset(start, ds.ReadAllAvailable()))
        assert end == {0: 50, 1: 40}  # read again from the earliest offset
        assert reader._losses.skipped > 0


def test_a_read_leaves_out_the_message_commit_tail_wrote() -> None:
    from streamwire._api import TAIL_COMMIT_HEADER
    from streamwire.spark.datasource import _messages_in_range

    def message(offset: int, value: bytes, **headers: bytes) -> streamwire.Message:
        m = streamwire.Message(value, headers=headers)
        m.offset = offset
        return m

    batch = [
        message(4, b"a"),
        message(5, b"", **{TAIL_COMMIT_HEADER: b""}),
        message(6, b""),  # an empty row is a row
        message(7, b"x", **{TAIL_COMMIT_HEADER: b""}),  # so is one with a value
    ]
    taken, done = _messages_in_range(batch, 4, 8)
    assert [m.offset for m in taken] == [4, 6, 7]
    assert done
    taken, done = _messages_in_range(batch[:2], 4, 6)  # ends on the marker
    assert [m.offset for m in taken] == [4]
    assert done


def test_min_offsets_per_trigger_and_its_delay_are_parsed_and_checked() -> None:
    opts = SourceOptions.parse(
        {"url": URL, "stream": "s", "minOffsetsPerTrigger": "10", "maxTriggerDelay": "30s"},
        streaming=True,
    )
    assert (opts.min_records, opts.max_trigger_delay) == (10, 30.0)
    assert SourceOptions.parse(
        {"url": URL, "stream": "s", "minOffsetsPerTrigger": "1"}, streaming=True
    ).max_trigger_delay == pytest.approx(900.0)  # Kafka's 15 minutes
    for text, seconds in (("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0), ("250", 0.25)):
        parsed = SourceOptions.parse(
            {"url": URL, "stream": "s", "minOffsetsPerTrigger": "1", "maxTriggerDelay": text},
            streaming=True,
        )
        assert parsed.max_trigger_delay == pytest.approx(seconds), text
    with pytest.raises(SparkConfigurationError, match="streaming reads only"):
        SourceOptions.parse(
            {"url": URL, "stream": "s", "minOffsetsPerTrigger": "5"}, streaming=False
        )
    with pytest.raises(SparkConfigurationError, match="above maxRecordsPerTrigger"):
        SourceOptions.parse(
            {"url": URL, "stream": "s", "minOffsetsPerTrigger": "5", "maxRecordsPerTrigger": "4"},
            streaming=True,
        )
    with pytest.raises(SparkConfigurationError, match="needs minOffsetsPerTrigger"):
        SourceOptions.parse({"url": URL, "stream": "s", "maxTriggerDelay": "1s"}, streaming=True)
    with pytest.raises(SparkConfigurationError, match="a duration such as"):
        SourceOptions.parse(
            {"url": URL, "stream": "s", "minOffsetsPerTrigger": "1", "maxTriggerDelay": "soon"},
            streaming=True,
        )


def test_min_offsets_per_trigger_holds_batches_back_until_enough_or_the_delay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As Kafka's source: no batch while fewer than ``minOffsetsPerTrigger`` new offsets are
    there, unless ``maxTriggerDelay`` passed since the last batch; the upper limit still
    caps a batch; ``Trigger.AvailableNow`` and ``Trigger.Once`` ignore it."""
    from streamwire.spark import _offsets as offsets_mod
    from streamwire.spark import datasource as ds

    now = [100.0]
    tails = {0: 3, 1: 2}
    monkeypatch.setattr(ds, "_clock", lambda: now[0])
    monkeypatch.setattr(ds, "_bounds", lambda o: {p: (0, t) for p, t in tails.items()})
    opts = SourceOptions.parse(
        {
            "url": URL,
            "stream": "s",
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "60s",
            "maxRecordsPerTrigger": "12",
        },
        streaming=True,
    )
    reader = ds.StreamwireStreamReader(opts)
    limit = reader.getDefaultReadLimit()
    start = offsets_mod.encode("s", {0: 0, 1: 0})

    def end(begin: dict[str, Any] = start, read_limit: Any = limit) -> dict[int, int]:
        return offsets_mod.decode("s", reader.latestOffset(begin, read_limit))

    assert end() == {0: 0, 1: 0}  # 5 new offsets of 10: held back
    now[0] += 30
    tails.update({0: 6, 1: 3})
    assert end() == {0: 0, 1: 0}  # 9, 30 s: still held back
    tails[1] = 4
    assert end() == {0: 6, 1: 4}  # 10: a batch
    after = offsets_mod.encode("s", {0: 6, 1: 4})
    tails.update({0: 8})
    now[0] += 59
    assert end(after) == {0: 6, 1: 4}  # 2 new, 59 s since that batch
    now[0] += 1
    assert end(after) == {0: 8, 1: 4}  # the delay passed: a batch of 2
    tails.update({0: 30, 1: 20})
    assert sum(end(offsets_mod.encode("s", {0: 8, 1: 4})).values()) == 12 + 12  # capped at 12
    # Trigger.Once (everything available) and AvailableNow ignore the minimum
    tails.update({0: 9, 1: 4})
    once = offsets_mod.encode("s", {0: 8, 1: 4})
    assert end(once, ds.ReadAllAvailable()) == {0: 9, 1: 4}
    reader.prepareForTriggerAvailableNow()
    assert end(once) == {0: 9, 1: 4}


def test_time_positions_are_parsed_as_kafkas_source_takes_them() -> None:
    from streamwire.spark._timestamps import TimeSpec, first_at_or_after

    opts = SourceOptions.parse(
        {"url": URL, "stream": "s", "startingTimestamp": "1000", "endingTimestamp": "2000"},
        streaming=False,
    )
    assert opts.starting_time == TimeSpec(every=1000)
    assert opts.ending_time == TimeSpec(every=2000)
    assert opts.time_strategy == "error"
    both = SourceOptions.parse(  # the single time wins over the per-partition JSON
        {
            "url": URL,
            "stream": "s",
            "startingTimestamp": "5",
            "startingOffsetsByTimestamp": '{"0": 7}',
            "startingOffsetsByTimestampStrategy": "LATEST",
        },
        streaming=True,
    )
    assert (both.starting_time, both.time_strategy) == (TimeSpec(every=5), "latest")
    keyed = SourceOptions.parse(
        {"url": URL, "stream": "s", "startingOffsetsByTimestamp": '{"s": {"0": 7, "2": 9}}'},
        streaming=True,
    )
    assert keyed.starting_time is not None
    assert [keyed.starting_time.of(p) for p in range(3)] == [7, None, 9]
    for bad, says in (
        ({"startingTimestamp": "soon"}, "milliseconds since the epoch"),
        ({"startingTimestamp": "-1"}, "an integer >= 0"),
        ({"startingOffsetsByTimestamp": "[1]"}, "must be JSON"),
        ({"startingOffsetsByTimestamp": '{"x": 1}'}, "is not a number"),
        ({"startingOffsetsByTimestampStrategy": "earliest"}, "must be error or latest"),
    ):
        with pytest.raises(SparkConfigurationError, match=says):
            SourceOptions.parse({"url": URL, "stream": "s", **bad}, streaming=False)
    with pytest.raises(SparkConfigurationError, match="batch reads only"):
        SourceOptions.parse({"url": URL, "stream": "s", "endingTimestamp": "1"}, streaming=True)

    def message(offset: int, millis: int | None) -> streamwire.Message:
        m = streamwire.Message(b"v")
        m.offset = offset
        m.timestamp_us = None if millis is None else millis * 1000
        return m

    batch = [message(3, 10), message(4, None), message(5, 20), message(6, 20)]
    assert first_at_or_after(batch, 11) == 5
    assert first_at_or_after(batch, 10) == 3
    assert first_at_or_after(batch, 21) is None


def test_connect_options_reach_the_client_and_are_checked_when_parsed() -> None:
    source = SourceOptions.parse(
        {"url": URL, "stream": "s", "connectOptions": '{"load_balancer": true}'}, streaming=True
    )
    assert source.client_key == (URL, (("timeout", 60.0), ("load_balancer", True)))
    sink = SinkOptions.parse({"url": URL, "stream": "s", "connectOptions": '{"reconnect": null}'})
    assert sink.connect_options == (("reconnect", None),)
    for text, says in (
        ("yes", "must be a JSON object"),
        ('{"tls": {"ca": 1}}', "with plain values"),
        ('{"timeout": 5}', "the option 'timeout'"),
        ('{"load_balancr": true}', "load_balancer"),  # streamwire.connect names the close match
        ('{"reconnect": true}', "reconnect must be a ReconnectPolicy"),
    ):
        with pytest.raises(streamwire.ConfigurationError, match=says):
            SourceOptions.parse({"url": URL, "stream": "s", "connectOptions": text}, streaming=True)


def test_an_address_resolver_in_connect_options_is_a_json_object_of_addresses() -> None:
    """The one option whose value may be an object: advertised ``host:port`` to the one to
    dial, an :class:`streamwire.AddressMap` in the client's key (hashable, picklable)."""
    text = '{"address_resolver": {"127.0.0.1:9292": "127.0.0.1:19292"}}'
    for url in (URL, "liftbridge://127.0.0.1:9292"):
        source = SourceOptions.parse(
            {"url": url, "stream": "s", "connectOptions": text}, streaming=True
        )
        ((name, resolver),) = source.connect_options
        assert name == "address_resolver"
        assert isinstance(resolver, streamwire.AddressMap)
        assert resolver("127.0.0.1", 9292) == ("127.0.0.1", 19292)
        assert hash(source.client_key) == hash(
            SourceOptions.parse(
                {"url": url, "stream": "s", "connectOptions": text}, streaming=True
            ).client_key
        )
    with pytest.raises(SparkConfigurationError, match=r"address_resolver.*not a number"):
        SourceOptions.parse(
            {"url": URL, "stream": "s", "connectOptions": '{"address_resolver": {"a:x": "b:1"}}'},
            streaming=True,
        )


# --- filter pushdown -----------------------------------------------------------------------


def test_pushed_filters_on_partition_and_offset_are_exact_and_the_rest_is_left() -> None:
    from datetime import UTC, datetime

    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        IsNotNull,
        LessThan,
        LessThanOrEqual,
        Not,
    )

    from streamwire.spark._filters import Narrowing, narrow

    when = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)
    key = EqualTo(("key",), b"k")
    in_offsets = In(("offset",), (7, 3, 9))
    since = GreaterThan(("timestamp",), when)
    n, left = narrow(
        [
            GreaterThan(("offset",), 2),
            LessThanOrEqual(("offset",), 10),
            In(("partition",), (0, 2, 5)),
            EqualTo(("partition",), 2),
            key,
            in_offsets,
            since,
            Not(EqualTo(("offset",), 4)),
            IsNotNull(("key",)),
        ]
    )
    assert n == Narrowing(
        partitions=frozenset({2}), first=3, end=10, since_ms=int(when.timestamp() * 1000)
    )
    # the offsets' IN narrows to its span (3..9, within > 2 and <= 10); Spark keeps its values
    assert left[:3] == [key, in_offsets, since]
    assert len(left) == 5
    assert n.ranges({0: 0, 2: 0}, {0: 20, 2: 20}) == ({0: 3, 2: 3}, {0: 3, 2: 10})

    nothing, _ = narrow([GreaterThanOrEqual(("offset",), 5), LessThan(("offset",), 5)])
    assert nothing.nothing
    assert nothing.ranges({0: 0}, {0: 9}) == ({0: 5}, {0: 5})
    disjoint, _ = narrow([EqualTo(("partition",), 1), EqualTo(("partition",), 2)])
    assert disjoint.nothing
    assert disjoint.partitions == frozenset()
    naive, _ = narrow([GreaterThanOrEqual(("timestamp",), datetime(2026, 1, 1))])
    assert naive.since_ms == int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    untouched, kept = narrow([LessThan(("timestamp",), when), EqualTo(("offset",), "x")])
    assert untouched == Narrowing()
    assert len(kept) == 2


def test_push_filters_is_a_batch_option() -> None:
    url = "rabbitmq-stream://guest:guest@127.0.0.1:5552/"
    assert SourceOptions.parse(
        {"url": url, "stream": "s", "pushFilters": "true"}, streaming=False
    ).push_filters
    with pytest.raises(SparkConfigurationError, match="batch reads only"):
        SourceOptions.parse({"url": url, "stream": "s", "pushFilters": "true"}, streaming=True)
    with pytest.raises(SparkConfigurationError, match="true or false"):
        SourceOptions.parse({"url": url, "stream": "s", "pushFilters": "yes"}, streaming=False)


class _Entries:
    """A deduplicating producer that stores each ``send_many`` as one entry, as RabbitMQ
    does with ``sub_batch_size``, and drops an entry whose id is not above the last stored."""

    def __init__(self, stored: list[tuple[int, list[int]]]) -> None:
        self.stored = stored

    @property
    def last_publishing_id(self) -> int:
        return self.stored[-1][0] if self.stored else 0

    async def send_many(self, values: list[Any], *, publishing_id: int) -> asyncio.Future[Any]:
        if publishing_id > self.last_publishing_id:
            self.stored.append((publishing_id, [int(v.split(b"-")[0]) for v in values]))
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def flush(self, timeout: float) -> None:
        pass


def _row(i: int, pads: list[int]) -> bytes:
    return f"{i}-".encode() + b"x" * pads[i]


def _attempt(
    stored: list[tuple[int, list[int]]],
    pads: list[int],
    size: int,
    cuts: list[int],
    stop: int | None,
) -> None:
    """One attempt of a task over rows ``0..len(pads)-1`` in runs cut at ``cuts``, as
    ``publish_partition`` drives a ``_Partition`` (entries of up to 60 bytes): rows already
    stored are skipped; the attempt fails (stops) before handing over row ``stop``, or ends
    (``None``)."""
    from streamwire.spark._brokers import Publisher
    from streamwire.spark._publish import _Partition

    rows = len(pads)

    async def run() -> None:
        producer = _Entries(stored)
        publisher = Publisher(producer, dedup=producer, last_stored=producer.last_publishing_id)  # type: ignore[arg-type]
        part = _Partition(publisher, 0, size, entry_bytes=60)
        bounds = [0, *sorted(c for c in set(cuts) if 0 < c < rows), rows]
        for first, end in itertools.pairwise(bounds):
            skip = part.already_stored(first, end - first)
            end = end if stop is None else min(end, stop)
            if first + skip < end:
                await part.send(first + skip, [_row(i, pads) for i in range(first + skip, end)])
            if end == stop:
                return
        await part.flush(1.0)

    asyncio.run(run())


def _entries(pads: list[int], size: int, limit: int) -> list[list[int]]:
    """The entries the rows make: from the first row on, each takes as many rows as fit,
    up to ``size`` rows and ``limit`` bytes as ``row_bytes`` counts them (a larger row goes
    alone)."""
    from streamwire.spark._publish import row_bytes

    out: list[list[int]] = []
    used = 0
    for i in range(len(pads)):
        n = row_bytes(_row(i, pads))
        if out and len(out[-1]) < size and used + n <= limit:
            out[-1].append(i)
            used += n
        else:
            out.append([i])
            used = n
    return out


@given(
    pads=st.lists(st.integers(0, 70), min_size=1, max_size=60),
    size=st.integers(2, 9),
    cuts=st.lists(st.lists(st.integers(1, 59), max_size=6), min_size=1, max_size=3),
    stops=st.lists(st.integers(0, 60), max_size=2),
)
def test_sub_batch_entries_are_the_rows_own_so_a_replay_stores_each_row_once(
    pads: list[int], size: int, cuts: list[list[int]], stops: list[int]
) -> None:
    """With ``sub_batch_size`` the broker keeps one id per entry. Attempts cut into runs
    anywhere, failing anywhere, then one that ends: every row is stored once, in order, in
    the entries the rows alone decide (up to ``size`` rows and the byte bound), each under
    its last row's id."""
    stored: list[tuple[int, list[int]]] = []
    attempts: list[int | None] = [*(min(stop, len(pads)) for stop in stops), None]
    for n, stop in enumerate(attempts):
        _attempt(stored, pads, size, cuts[n % len(cuts)], stop)
    assert [entry for _, entry in stored] == _entries(pads, size, 60)
    assert all(pid == publishing_id(0, entry[-1]) for pid, entry in stored)


@given(
    value=st.binary(max_size=600),
    key=st.none() | st.binary(max_size=300),
    headers=st.dictionaries(
        st.text(min_size=1, max_size=40),
        st.binary(max_size=300) | st.text(max_size=100),
        max_size=6,
    ),
)
def test_a_rows_bound_covers_its_record_in_a_sub_batch_entry(
    value: bytes, key: bytes | None, headers: dict[str, bytes | str]
) -> None:
    """``row_bytes`` never counts less than what the RabbitMQ producer puts in an entry for
    the row: its AMQP message and its size word (so an entry of rows within 512 KiB by that
    count is within 512 KiB)."""
    from streamwire.rabbitmq._amqp_map import encode_message
    from streamwire.spark._publish import row_bytes

    message = streamwire.Message(value, key=key, headers=headers)
    assert row_bytes(message) >= len(encode_message(message)) + 4
    assert row_bytes(value) >= len(encode_message(streamwire.Message(value))) + 4
