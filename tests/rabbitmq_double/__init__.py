"""A scripted RabbitMQ Streams broker for driver tests, built on streamwire's sans-IO frames.

Not part of the streamwire package. See :mod:`tests.rabbitmq_double.server`.
"""

from __future__ import annotations

from tests.rabbitmq_double.chunks import encode_chunk, simple_entry
from tests.rabbitmq_double.server import RabbitMQDouble
from tests.rabbitmq_double.session import Session, Subscription
from tests.rabbitmq_double.state import BrokerState

__all__ = (
    "BrokerState",
    "RabbitMQDouble",
    "Session",
    "Subscription",
    "encode_chunk",
    "simple_entry",
)
