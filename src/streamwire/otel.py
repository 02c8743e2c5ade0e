"""OpenTelemetry metrics and spans for every streamwire producer, consumer and connection
(``pip install 'streamwire[otel]'``).

``streamwire.otel.instrument()`` installs an observer (:mod:`streamwire.metrics`) that uses the
OpenTelemetry API, so whatever SDK and exporters the application configured receive:

* metrics, named as the OTel messaging semantic conventions name them:
  ``messaging.client.sent.messages`` (counter; failed sends carry ``error.type``),
  ``messaging.client.consumed.messages`` (counter), ``messaging.client.operation.duration``
  (histogram, seconds, from the send call to the broker's confirmation), plus
  ``streamwire.consumer.lag`` (gauge, messages) and ``streamwire.client.connection.events``
  (counter, attribute ``streamwire.connection.event``: connect, reconnect, error); the
  Spark streaming source's lag per partition (:class:`~streamwire.metrics.LagObserver`) as
  ``streamwire.consumer.lag`` and ``streamwire.consumer.lag.bytes`` (gauge, estimated
  bytes), with ``messaging.destination.partition.id``;
* spans: ``send <stream>`` (kind PRODUCER) from a send call to its confirmation, one per call
  (a batch is one span, with ``messaging.batch.message_count``), status ERROR when any
  message of it failed; ``receive <stream>`` (kind CONSUMER) for each batch handed to the
  application.

Attributes: ``messaging.system`` (``rabbitmq``, ``liftbridge`` or ``iggy``),
``messaging.destination.name``, ``messaging.operation.name`` and ``.type``, ``server.address``,
``server.port``. Producers and consumers created before :func:`instrument` are not observed.
Without it nothing here runs (docs/architecture.md, "Metrics and tracing").
"""

from __future__ import annotations

from streamwire._extras import require

require("streamwire.otel", "otel", "opentelemetry")

from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, SpanKind, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from streamwire.metrics import LATENCY_BOUNDS, Destination, set_observer

__all__ = ("OTelObserver", "instrument", "uninstrument")

_SCOPE = "streamwire"


def _version() -> str:
    from streamwire import __version__

    return __version__


class OTelObserver:
    """An :class:`~streamwire.metrics.Observer` reporting through the OpenTelemetry API."""

    def __init__(
        self,
        meter_provider: MeterProvider | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        meter = metrics.get_meter(_SCOPE, _version(), meter_provider)
        self._tracer = trace.get_tracer(_SCOPE, _version(), tracer_provider)
        self._sent = meter.create_counter(
            "messaging.client.sent.messages",
            unit="{message}",
            description="Messages a producer sent and the broker settled",
        )
        self._consumed = meter.create_counter(
            "messaging.client.consumed.messages",
            unit="{message}",
            description="Messages handed to the application by a consumer",
        )
        self._duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="From a send call to the broker's confirmation",
            explicit_bucket_boundaries_advisory=list(LATENCY_BOUNDS),
        )
        self._lag = meter.create_gauge(
            "streamwire.consumer.lag",
            unit="{message}",
            description="Messages in the stream after the last one handed over",
        )
        self._lag_bytes = meter.create_gauge(
            "streamwire.consumer.lag.bytes",
            unit="By",
            description="Estimated bytes in the stream after what a reader will have read",
        )
        self._connections = meter.create_counter(
            "streamwire.client.connection.events",
            unit="{event}",
            description="Connections made, remade and lost",
        )
        self._attributes: dict[tuple[Destination, str], dict[str, AttributeValue]] = {}

    def _attrs(self, where: Destination, operation: str) -> dict[str, AttributeValue]:
        key = (where, operation)
        found = self._attributes.get(key)
        if found is None:
            host, _, port = where.address.rpartition(":")
            found = {"messaging.system": where.system, "server.address": host or where.address}
            if port.isdigit():
                found["server.port"] = int(port)
            if where.stream:
                found["messaging.destination.name"] = where.stream
            if operation:
                found["messaging.operation.name"] = operation
                found["messaging.operation.type"] = operation
            if len(self._attributes) < 4096:  # bounded: one entry per stream and operation
                self._attributes[key] = found
        return found

    def send(self, where: Destination, count: int, nbytes: int) -> object:
        attributes = {**self._attrs(where, "send"), "messaging.batch.message_count": count}
        return self._tracer.start_span(
            f"send {where.stream}", kind=SpanKind.PRODUCER, attributes=attributes
        )

    def settled(
        self, where: Destination, token: object, confirmed: int, failed: int, seconds: float
    ) -> None:
        attributes = self._attrs(where, "send")
        if confirmed:
            self._sent.add(confirmed, attributes)
            self._duration.record(seconds, attributes)
        if failed:
            failed_attributes = {**attributes, "error.type": "_OTHER"}
            self._sent.add(failed, failed_attributes)
            self._duration.record(seconds, failed_attributes)
        if isinstance(token, Span):
            if failed:
                token.set_status(StatusCode.ERROR, f"{failed} of {confirmed + failed} failed")
                token.set_attribute("error.type", "_OTHER")
            token.end()

    def received(self, where: Destination, count: int, nbytes: int, lag: int | None) -> None:
        attributes = self._attrs(where, "receive")
        self._consumed.add(count, attributes)
        if lag is not None:
            self._lag.set(lag, attributes)
        span = self._tracer.start_span(
            f"receive {where.stream}",
            kind=SpanKind.CONSUMER,
            attributes={**attributes, "messaging.batch.message_count": count},
        )
        span.end()

    def partition_lag(
        self, where: Destination, partition: int, messages: int, nbytes: int | None
    ) -> None:
        attributes = {
            **self._attrs(where, "receive"),
            "messaging.destination.partition.id": str(partition),
        }
        self._lag.set(messages, attributes)
        if nbytes is not None:
            self._lag_bytes.set(nbytes, attributes)

    def connection(self, where: Destination, event: str) -> None:
        self._connections.add(1, {**self._attrs(where, ""), "streamwire.connection.event": event})


def instrument(
    meter_provider: MeterProvider | None = None, tracer_provider: TracerProvider | None = None
) -> OTelObserver:
    """Observe every producer, consumer and connection created from now on through
    OpenTelemetry (the global providers unless given); returns the observer."""
    observer = OTelObserver(meter_provider, tracer_provider)
    set_observer(observer)
    return observer


def uninstrument() -> None:
    """Stop observing producers, consumers and connections created from now on."""
    set_observer(None)
