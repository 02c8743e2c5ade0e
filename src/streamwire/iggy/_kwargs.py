"""The keyword options of the Iggy client's ``create_stream`` (topic options),
``producer()`` and ``consumer()``, typed (they mirror ``TOPIC_OPTIONS``,
:class:`ProducerOptions` and :class:`ConsumerOptions`; docs/api.md, "Options")."""

from __future__ import annotations

from typing import Literal

from streamwire import _api
from streamwire.iggy.protocol.constants import AckLevel

__all__ = ("ConsumerKwargs", "ProducerKwargs", "StreamKwargs")


class StreamKwargs(_api.StreamKwargs, total=False):
    message_expiry: float
    """Seconds (sent as µs)."""
    max_topic_size: int
    compression_algorithm: Literal["none", "gzip"]
    segment_size: int
    durability: Literal["replicated", "persisted"]
    consumer_offset_durability: Literal["replicated", "persisted"]
    messages_required_to_save: int
    size_of_messages_required_to_save: int
    preallocate_segments: bool
    enforce_fsync: bool
    """fsync every write (0.9.0-edge.5 and later; docs/iggy.md, "Durability")."""


class ProducerKwargs(_api.ProducerKwargs, total=False):
    partition: int | None
    max_batch_messages: int
    max_batch_bytes: int
    linger: float
    max_buffer_messages: int
    max_buffer_bytes: int
    key_header: str | None


class ConsumerKwargs(_api.ConsumerKwargs, total=False):
    partitions: tuple[int, ...] | None
    partition: int | None
    batch_size: int
    poll_interval: float
    server_auto_commit: bool
    auto_commit_messages: int | None
    auto_commit_interval: float | None
    verify_checksums: bool
    create_group: bool
    key_header: str | None
    ack: AckLevel
    prefetch: bool
