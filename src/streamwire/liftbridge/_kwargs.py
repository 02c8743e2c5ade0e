"""The keyword options of the Liftbridge client's ``create_stream``, ``producer()`` and
``consumer()``, typed (they mirror :class:`StreamOptions`, :class:`ProducerOptions` and
:class:`ConsumerOptions`; docs/api.md, "Options")."""

from __future__ import annotations

from datetime import datetime

from streamwire import _api
from streamwire.liftbridge.producer import Partitioner, Transport
from streamwire.liftbridge.protocol.messages import AckPolicy

__all__ = ("ConsumerKwargs", "ProducerKwargs", "StreamKwargs")


class StreamKwargs(_api.StreamKwargs, total=False):
    retention_max_bytes: int | None
    retention_max_messages: int | None
    retention_max_age: float | None
    cleaner_interval: float | None
    segment_max_bytes: int | None
    segment_max_age: float | None
    compact_max_goroutines: int | None
    compact_enabled: bool | None
    auto_pause_time: float | None
    auto_pause_disable_if_subscribers: bool | None
    min_isr: int | None
    optimistic_concurrency_control: bool | None
    encryption: bool | None


class ProducerKwargs(_api.ProducerKwargs, total=False):
    ack_policy: AckPolicy
    ack_timeout: float | None
    partitioner: Partitioner
    max_in_flight: int
    crc: bool
    envelope: bool
    max_message_bytes: int | None
    detect_no_responders: bool
    partition: int | None
    subject: str | None
    transport: Transport


class ConsumerKwargs(_api.ConsumerKwargs, total=False):
    max_buffered_messages: int
    resume: bool
    read_isr_replica: bool
    stop_offset: int | None
    stop_latest: bool
    stop_timestamp: datetime | None
    server_headers: bool
