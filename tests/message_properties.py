"""One message with every AMQP property set, for the tests that carry properties through a
broker or a reader (docs/api.md, "Properties and annotations")."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from streamwire import MessageProperties

__all__ = ["CREATED", "EVERY_PROPERTY", "EXPIRES", "MESSAGE_UUID"]

MESSAGE_UUID = uuid.UUID("12345678-1234-5678-1234-567812345678")
CREATED = datetime(2026, 11, 28, 10, 0, 0, 123_000, tzinfo=UTC)
EXPIRES = datetime(2030, 1, 1, tzinfo=UTC)
EVERY_PROPERTY = MessageProperties(
    message_id=MESSAGE_UUID,
    user_id=b"guest",  # RabbitMQ checks it against the connection's user
    to="orders",
    subject="created",
    reply_to="replies",
    correlation_id=2**64 - 1,
    content_type="application/json",
    content_encoding="gzip",
    absolute_expiry_time=EXPIRES,
    creation_time=CREATED,
    group_id="g-1",
    group_sequence=2**32 - 1,
    reply_to_group_id="g-0",
)
