"""The meters every producer, consumer and connection keeps, and the observer hook."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from streamwire.metrics import (
    LATENCY_BOUNDS,
    ConnectionMeter,
    ConsumerMeter,
    Destination,
    LatencyHistogram,
    ProducerMeter,
    combine_consumer_stats,
    combine_producer_stats,
    current_observer,
    set_observer,
)

WHERE = Destination("rabbitmq", "orders", "127.0.0.1:5552")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []

    def send(self, where: Destination, count: int, nbytes: int) -> object:
        self.events.append(("send", where.stream, count, nbytes))
        return f"token-{len(self.events)}"

    def settled(
        self, where: Destination, token: object, confirmed: int, failed: int, seconds: float
    ) -> None:
        self.events.append(("settled", token, confirmed, failed))

    def received(self, where: Destination, count: int, nbytes: int, lag: int | None) -> None:
        self.events.append(("received", count, nbytes, lag))

    def connection(self, where: Destination, event: str) -> None:
        self.events.append(("connection", event))


class Broken(Recorder):
    def send(self, where: Destination, count: int, nbytes: int) -> object:
        raise RuntimeError("observer bug")

    def received(self, where: Destination, count: int, nbytes: int, lag: int | None) -> None:
        raise RuntimeError("observer bug")


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    found = Recorder()
    previous = set_observer(found)
    try:
        yield found
    finally:
        set_observer(previous)


def test_histogram_buckets_and_quantiles() -> None:
    histogram = LatencyHistogram()
    assert histogram.snapshot().quantile(0.5) is None
    histogram.record(0.0004)  # first bucket
    histogram.record(0.001)  # a bound belongs to its own bucket
    histogram.record(0.003, samples=2)
    histogram.record(60.0)  # above the last bound
    snap = histogram.snapshot()
    assert snap.count == 5
    assert snap.counts[0] == 1
    assert snap.counts[LATENCY_BOUNDS.index(0.001)] == 1
    assert snap.counts[LATENCY_BOUNDS.index(0.005)] == 2
    assert snap.counts[-1] == 1
    assert snap.total == pytest.approx(0.0004 + 0.001 + 0.006 + 60.0)
    assert snap.quantile(0.2) == 0.0005
    assert snap.quantile(0.6) == 0.005
    assert snap.quantile(1.0) == float("inf")
    assert snap.mean == pytest.approx(snap.total / 5)
    with pytest.raises(ValueError, match="q must be"):
        snap.quantile(0.0)


def test_producer_meter_counts_and_in_flight() -> None:
    meter = ProducerMeter(WHERE)
    first = meter.sent(3, 300)
    second = meter.sent(1, 10)
    assert meter.snapshot().in_flight == 4
    meter.settled(first, confirmed=2, failed=1)
    stats = meter.snapshot()
    assert (stats.published, stats.confirmed, stats.failed, stats.in_flight) == (4, 2, 1, 1)
    assert stats.bytes_published == 310
    assert stats.confirm_latency.count == 2  # failures have no confirm latency
    meter.settled(second, confirmed=1, failed=0)
    assert meter.snapshot().in_flight == 0
    assert meter.snapshot().stream == "orders"


def test_consumer_meter_lag_follows_the_broker_s_end() -> None:
    meter = ConsumerMeter(WHERE)
    assert meter.snapshot().lag is None
    meter.stream_ends_at(9)  # offsets 0..9 stored
    assert meter.lag == 10
    meter.received(4, 40, last_offset=3)
    assert meter.lag == 6
    meter.stream_ends_at(5)  # an older answer never moves the end back
    assert meter.lag == 6
    meter.received(0, 0, last_offset=None)  # an empty batch is not a delivery
    meter.committed(3)
    stats = meter.snapshot()
    assert (stats.consumed, stats.bytes_consumed, stats.last_offset) == (4, 40, 3)
    assert (stats.committed_offset, stats.lag) == (3, 6)


def test_consumer_meter_lag_sums_partitions_and_counts_the_queue() -> None:
    meter = ConsumerMeter(WHERE)
    meter.stream_ends_at(149, partition=1)
    meter.received(10, 100, last_offset=109, partition=1)  # a reply of 100..109, queued
    assert meter.lag == 40
    meter.stream_ends_at(9, partition=0)
    assert meter.lag == 40 + 10
    # 4 of the 10 are still queued: not handed over, so not consumed, and lag
    stats = meter.snapshot(queued=4, handed_over=105)
    assert (stats.consumed, stats.last_offset, stats.lag) == (6, 105, 40 + 10 + 4)
    meter.unreceived(4)  # the queue was dropped
    assert meter.snapshot().consumed == 6


def test_messages_received_with_more_are_told_with_the_next(recorder: Recorder) -> None:
    meter = ConsumerMeter(WHERE)
    meter.received(1, 10, last_offset=0, more=True)
    meter.received(1, 10, last_offset=1, more=True)
    assert recorder.events == []
    assert meter.snapshot().consumed == 2  # counted at once, told later
    meter.received(1, 10, last_offset=2)
    assert recorder.events == [("received", 3, 30, None)]


def test_accepted_then_begin_settles_in_other_units() -> None:
    meter = ProducerMeter(WHERE)
    meter.accepted(3, 30)
    meter.accepted(2, 20)
    assert meter.snapshot().in_flight == 5
    started = meter.begin(5, 0, waited=2.0)  # a request of both calls, sent 2 s later
    meter.settled(started, confirmed=5, failed=0)
    stats = meter.snapshot()
    assert (stats.published, stats.confirmed, stats.in_flight, stats.bytes_published) == (
        5,
        5,
        0,
        50,
    )
    assert stats.confirm_latency.count == 5
    assert stats.confirm_latency.total >= 5 * 2.0  # from acceptance, not from the request


def test_stats_of_several_producers_and_consumers_add_up() -> None:
    first, second = ProducerMeter(WHERE), ProducerMeter(WHERE)
    first.settled(first.sent(2, 20), confirmed=2, failed=0)
    second.sent(1, 5)
    total = combine_producer_stats("super", [first.snapshot(), second.snapshot()])
    assert (total.stream, total.published, total.confirmed, total.in_flight) == ("super", 3, 2, 1)
    assert total.bytes_published == 25
    assert total.confirm_latency.count == 2
    assert sum(total.confirm_latency.counts) == 2
    known, unknown = ConsumerMeter(WHERE), ConsumerMeter(WHERE)
    known.stream_ends_at(9)
    known.received(4, 40, last_offset=3)
    unknown.received(1, 10, last_offset=0)
    both = combine_consumer_stats("super", [known.snapshot(), unknown.snapshot()])
    assert (both.consumed, both.bytes_consumed, both.lag, both.last_offset) == (5, 50, 6, None)
    assert combine_consumer_stats("super", [unknown.snapshot()]).lag is None


def test_connection_meter_tells_reconnects_from_connects() -> None:
    meter = ConnectionMeter(WHERE)
    meter.connected()
    meter.failed()
    meter.connected()
    stats = meter.snapshot()
    assert (stats.connects, stats.reconnects, stats.errors) == (2, 1, 1)
    meter.connected(again=False)  # a client's second connection, not a replacement
    assert meter.snapshot().reconnects == 1
    assert meter.snapshot().connects == 3


def test_the_observer_sees_what_the_meters_count(recorder: Recorder) -> None:
    producer = ProducerMeter(WHERE)
    started = producer.sent(2, 20)
    producer.settled(started, confirmed=2, failed=0)
    consumer = ConsumerMeter(WHERE)
    consumer.stream_ends_at(4)
    consumer.received(2, 20, last_offset=1)
    connection = ConnectionMeter(WHERE)
    connection.connected()
    connection.connected()
    connection.failed()
    assert recorder.events == [
        ("send", "orders", 2, 20),
        ("settled", "token-1", 2, 0),
        ("received", 2, 20, 3),
        ("connection", "connect"),
        ("connection", "reconnect"),
        ("connection", "error"),
    ]


def test_meters_created_before_the_observer_are_not_observed(recorder: Recorder) -> None:
    set_observer(None)
    meter = ProducerMeter(WHERE)
    set_observer(recorder)
    meter.settled(meter.sent(1, 1), confirmed=1, failed=0)
    assert recorder.events == []
    assert current_observer() is recorder


def test_a_failing_observer_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    previous = set_observer(Broken())
    try:
        producer = ProducerMeter(WHERE)
        consumer = ConsumerMeter(WHERE)
    finally:
        set_observer(previous)
    with caplog.at_level(logging.ERROR, logger="streamwire.metrics"):
        started = producer.sent(1, 5)
        producer.settled(started, confirmed=1, failed=0)
        consumer.received(1, 5, last_offset=0)
    assert producer.snapshot().confirmed == 1
    assert consumer.snapshot().consumed == 1
    assert sum("observer" in record.getMessage() for record in caplog.records) == 2
