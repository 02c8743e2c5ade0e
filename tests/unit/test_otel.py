"""streamwire.otel with the OpenTelemetry SDK's in-memory reader and exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from streamwire import otel
from streamwire.metrics import (
    ConnectionMeter,
    ConsumerMeter,
    Destination,
    LagObserver,
    ProducerMeter,
    current_observer,
)

WHERE = Destination("iggy", "orders/events", "127.0.0.1:8090")


class Sdk:
    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.spans = InMemorySpanExporter()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))

    def points(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        assert data is not None
        found: dict[str, list[Any]] = {}
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                assert scope.scope.name == "streamwire"
                for metric in scope.metrics:
                    found[metric.name] = list(metric.data.data_points)
        return found


@pytest.fixture
def sdk() -> Iterator[Sdk]:
    found = Sdk()
    observer = otel.instrument(found.meter_provider, found.tracer_provider)
    try:
        assert current_observer() is observer
        yield found
    finally:
        otel.uninstrument()
        found.meter_provider.shutdown()
        found.tracer_provider.shutdown()


def test_a_send_is_a_producer_span_and_counted(sdk: Sdk) -> None:
    producer = ProducerMeter(WHERE)
    producer.settled(producer.sent(3, 30), confirmed=2, failed=1)
    (span,) = sdk.spans.get_finished_spans()
    assert span.name == "send orders/events"
    assert span.kind is SpanKind.PRODUCER
    assert span.status.status_code is StatusCode.ERROR
    attributes = dict(span.attributes or {})
    assert attributes["messaging.system"] == "iggy"
    assert attributes["messaging.destination.name"] == "orders/events"
    assert attributes["messaging.operation.type"] == "send"
    assert attributes["messaging.batch.message_count"] == 3
    assert (attributes["server.address"], attributes["server.port"]) == ("127.0.0.1", 8090)
    points = sdk.points()
    sent_points = points["messaging.client.sent.messages"]
    sent = {p.attributes.get("error.type"): p.value for p in sent_points}
    assert sent == {None: 2, "_OTHER": 1}
    durations = points["messaging.client.operation.duration"]
    assert sum(p.count for p in durations) == 2
    assert list(durations[0].explicit_bounds)[:2] == [0.0005, 0.001]


def test_a_delivery_is_a_consumer_span_with_lag(sdk: Sdk) -> None:
    consumer = ConsumerMeter(WHERE)
    consumer.stream_ends_at(99)
    consumer.received(10, 100, last_offset=9)
    (span,) = sdk.spans.get_finished_spans()
    assert (span.name, span.kind) == ("receive orders/events", SpanKind.CONSUMER)
    assert dict(span.attributes or {})["messaging.batch.message_count"] == 10
    points = sdk.points()
    assert [p.value for p in points["messaging.client.consumed.messages"]] == [10]
    assert [p.value for p in points["streamwire.consumer.lag"]] == [90]


def test_connection_events_are_counted_by_kind(sdk: Sdk) -> None:
    connection = ConnectionMeter(Destination("rabbitmq", "", "localhost:5552"))
    connection.connected()
    connection.failed()
    connection.connected()
    points = sdk.points()["streamwire.client.connection.events"]
    counted = {p.attributes["streamwire.connection.event"]: p.value for p in points}
    assert counted == {"connect": 1, "reconnect": 1, "error": 1}
    assert all(p.attributes["messaging.system"] == "rabbitmq" for p in points)


def test_uninstrument_stops_observing_new_meters(sdk: Sdk) -> None:
    otel.uninstrument()
    producer = ProducerMeter(WHERE)
    producer.settled(producer.sent(1, 1), confirmed=1, failed=0)
    assert sdk.spans.get_finished_spans() == ()
    assert producer.snapshot().confirmed == 1


def test_a_partition_lag_is_two_gauges_with_the_partition(sdk: Sdk) -> None:
    """What the Spark streaming source's driver reports per partition (``LagObserver``)."""
    observer: object = current_observer()
    assert isinstance(observer, LagObserver)
    observer.partition_lag(WHERE, 0, 10, 700)
    observer.partition_lag(WHERE, 1, 4, None)  # no estimate: no bytes point for it
    points = sdk.points()
    lag = {
        p.attributes["messaging.destination.partition.id"]: p.value
        for p in points["streamwire.consumer.lag"]
    }
    assert lag == {"0": 10, "1": 4}
    by_partition = points["streamwire.consumer.lag.bytes"]
    assert {p.attributes["messaging.destination.partition.id"]: p.value for p in by_partition} == {
        "0": 700
    }
    (point, *_) = by_partition
    assert point.attributes["messaging.destination.name"] == "orders/events"
    assert not sdk.spans.get_finished_spans()  # a lag is no delivery: no receive span
