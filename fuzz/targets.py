"""Fuzz targets: every decoder that reads bytes from the network or from a broker.

Each target takes arbitrary bytes and must either return or raise a
:class:`~streamwire.StreamwireError` — anything else (IndexError, struct.error, a hang) is a
bug.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from streamwire.codec import IGGY_HEADER, LENGTH_PREFIX_U32, FrameAccumulator
from streamwire.codec.amqp import decode_message, decode_value
from streamwire.codec.headers import HeaderValue
from streamwire.codec.reader import Reader
from streamwire.errors import StreamwireError
from streamwire.iggy.protocol.batch import decode_batches
from streamwire.iggy.protocol.framing import decode_request, decode_server_frame
from streamwire.iggy.protocol.tlv import decode_options, decode_user_headers
from streamwire.liftbridge.protocol.envelope import decode_envelope
from streamwire.liftbridge.protocol.messages import decode_ack, decode_publish
from streamwire.rabbitmq._amqp_map import decode_chunk
from streamwire.rabbitmq.protocol.frames import decode_frame
from streamwire.rabbitmq.protocol.machine import StreamsConnection

__all__ = ("SEEDS", "TARGETS", "check")

VECTORS = Path(__file__).resolve().parent.parent / "tests" / "vectors"


def _rabbitmq_frame(data: bytes) -> None:
    decode_frame(data[4:] if len(data) >= 4 else data)


def _rabbitmq_chunk(data: bytes) -> None:
    decode_chunk(data, stream="fuzz", verify_crc=len(data) % 2 == 0)


def _rabbitmq_machine(data: bytes) -> None:
    """The connection machine in every handshake state it can reach, fed hostile bytes."""
    machine = StreamsConnection()
    machine.start(0.0)
    step = max(1, len(data) // 7 or 1)
    for i in range(0, len(data), step):
        machine.receive_data(data[i : i + step], float(i))
        machine.advance_time(float(i) + 100.0)


def _framing(data: bytes) -> None:
    for spec in (LENGTH_PREFIX_U32, IGGY_HEADER):
        acc = FrameAccumulator(spec, max_frame_size=1 << 16)
        acc.feed(data)
        for _ in acc.frames():
            pass


def _amqp_message(data: bytes) -> None:
    decode_message(data)


def _amqp_value(data: bytes) -> None:
    decode_value(data)


def _header_value(data: bytes) -> None:
    if data:
        HeaderValue.from_bytes(data[0], data[1:])


def _liftbridge(data: bytes) -> None:
    """The envelope, and the Ack (what arrives on the ack inbox) and Message payloads."""
    try:
        decode_envelope(data)
    finally:
        try:
            decode_ack(data)
        finally:
            decode_publish(data)


def _iggy_frame(data: bytes) -> None:
    try:
        decode_server_frame(data)
    finally:
        decode_request(data)


def _iggy_batch(data: bytes) -> None:
    decode_batches(Reader(data, frame="fuzz"))


def _iggy_tlv(data: bytes) -> None:
    try:
        decode_user_headers(data)
    finally:
        decode_options(data)


TARGETS: dict[str, Callable[[bytes], object]] = {
    "rabbitmq-frame": _rabbitmq_frame,
    "rabbitmq-chunk": _rabbitmq_chunk,
    "rabbitmq-machine": _rabbitmq_machine,
    "framing": _framing,
    "amqp-message": _amqp_message,
    "amqp-value": _amqp_value,
    "header-value": _header_value,
    "liftbridge-envelope": _liftbridge,
    "iggy-frame": _iggy_frame,
    "iggy-batch": _iggy_batch,
    "iggy-tlv": _iggy_tlv,
}
SEEDS: dict[str, str] = {  # target -> vector folder (every *.hex in it seeds the corpus)
    "rabbitmq-frame": "rabbitmq",
    "rabbitmq-chunk": "rabbitmq",
    "rabbitmq-machine": "rabbitmq",
    "framing": "rabbitmq",
    "amqp-message": "rabbitmq",
    "amqp-value": "rabbitmq",
    "header-value": "rabbitmq",
    "liftbridge-envelope": "liftbridge",
    "iggy-frame": "iggy",
    "iggy-batch": "iggy",
    "iggy-tlv": "iggy",
}


def seeds(target: str) -> list[bytes]:
    """The seed corpus of a target: the golden vectors of its protocol (hex files)."""
    folder = VECTORS / SEEDS.get(target, "rabbitmq")
    out: list[bytes] = []
    for path in sorted(folder.glob("*.hex")):
        text = "".join(
            line.split("#", 1)[0] for line in path.read_text().splitlines() if line.strip()
        )
        try:
            out.append(bytes.fromhex("".join(text.replace("|", " ").split())))
        except ValueError:
            continue
    return out


def check(target: str, data: bytes) -> None:
    """Run one input; re-raise anything that is not a streamwire error."""
    with contextlib.suppress(StreamwireError):
        TARGETS[target](data)
