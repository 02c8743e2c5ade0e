"""The keyword options of the RabbitMQ client's ``create_stream``, ``producer()`` and
``consumer()``, typed (they mirror :class:`ProducerOptions` and :class:`ConsumerOptions`;
docs/api.md, "Options")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from streamwire import _api
from streamwire.codec.message import Message
from streamwire.codec.offset import OffsetLike

__all__ = ("ConsumerKwargs", "ProducerKwargs", "StreamKwargs")


class StreamKwargs(_api.StreamKwargs, total=False):
    max_length_bytes: int
    max_age: str
    """Retention by age, e.g. ``"7D"``."""
    max_segment_size_bytes: int
    initial_cluster_size: int
    leader_locator: str
    filter_size_bytes: int


class ProducerKwargs(_api.ProducerKwargs, total=False):
    max_buffer_messages: int
    max_buffer_bytes: int
    max_in_flight: int
    max_frame_messages: int
    amqp: bool
    filter_value: Callable[[Message], str | None] | None
    sub_batch_size: int
    compression: str


class ConsumerKwargs(_api.ConsumerKwargs, total=False):
    initial_credit: int
    credit_batch: int
    manual_credit: bool
    verify_crc: bool
    amqp: bool
    auto_commit_messages: int | None
    auto_commit_interval: float | None
    properties: dict[str, str]
    single_active: bool
    super_stream: str | None
    filter_values: Sequence[str]
    match_unfiltered: bool
    post_filter: Callable[[Message], bool] | None
    from_replica: bool
    on_activate: Callable[[str], OffsetLike | Awaitable[OffsetLike | None] | None] | None
