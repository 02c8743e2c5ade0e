"""Helpers of the offline driver tests: what the scripted broker stored, read back with the
client's own chunk decoder."""

from __future__ import annotations

from streamwire.codec.message import Message
from streamwire.rabbitmq._amqp_map import decode_chunk
from streamwire.rabbitmq.protocol.frames import Publish
from tests.rabbitmq_double import RabbitMQDouble


def stored(broker: RabbitMQDouble, stream: str) -> list[Message]:
    """Every message of ``stream`` in offset order."""
    return [
        m
        for chunk in broker.state.streams[stream].chunks
        for m in decode_chunk(chunk.data, stream=stream)
    ]


def stored_values(broker: RabbitMQDouble, stream: str) -> list[bytes]:
    return [bytes(m.value) for m in stored(broker, stream)]


def published_ids(broker: RabbitMQDouble) -> list[int]:
    """The publishing ids of every Publish frame received, in order."""
    return [e.publishing_id for p in broker.frames(Publish) for e in p.entries]
