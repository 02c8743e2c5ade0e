"""Capture ack envelopes from a real Liftbridge server (tests/vectors/liftbridge/PROVENANCE.md).

Raw nats-py and grpcio only, with publish envelopes written out by hand (the bytes of
docs/protocol/liftbridge.md §1.5, with another inbox), so that no streamwire encoder is involved::

    integration/brokers.sh up liftbridge
    .venv/bin/python -m tests.integration.liftbridge.capture_vectors

Prints one ``name: hex`` line per captured ack. Creates the streams ``vector-stream``
(subject ``vector.subject``, 2 partitions) and ``vector-occ`` (subject ``vector.occ``,
optimistic concurrency control) and deletes them afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import grpc.aio
import nats
from nats.aio.msg import Msg

from streamwire.liftbridge._grpc import METHODS
from streamwire.liftbridge._nats import flush_in_order

GRPC = "127.0.0.1:9292"
NATS = "nats://127.0.0.1:4222"
INBOX = "vec.acks"

# Envelope header (8 bytes, no CRC, Publish) + Message protobuf, all written by hand.
HEADER = bytes.fromhex("b90e43b400080000")
# offset=-1 key="k" value="hello" headers={h: v} ackInbox="vec.acks" correlationId="c1" ALL
PUBLISH_ALL = HEADER + bytes.fromhex(
    "08ffffffffffffffffff01"
    "12016b"
    "1a0568656c6c6f"
    "4a060a0168120176"
    "5208" + INBOX.encode().hex() + "5a026331"
    "6001"
)
# offset=-1 value="p1" ackInbox="vec.acks" correlationId="c2" (LEADER: ackPolicy omitted)
PUBLISH_LEADER = HEADER + bytes.fromhex(
    "08ffffffffffffffffff011a0270315208" + INBOX.encode().hex() + "5a026332"
)
# offset=5 (expected offset on an empty OCC stream: wrong) value="x" correlationId="c3"
PUBLISH_WRONG_OFFSET = HEADER + bytes.fromhex("08051a01785208" + INBOX.encode().hex() + "5a026333")


async def _unary(channel: grpc.aio.Channel, rpc: str, **fields: object) -> None:
    m = METHODS[rpc]
    call = channel.unary_unary(
        m.path,
        request_serializer=m.request.SerializeToString,
        response_deserializer=m.response.FromString,
    )
    await call(m.request(**fields), timeout=10)


async def main() -> None:
    channel = grpc.aio.insecure_channel(GRPC)
    for name in ("vector-stream", "vector-occ"):
        with contextlib.suppress(grpc.aio.AioRpcError):
            await _unary(channel, "DeleteStream", name=name)
    await _unary(
        channel, "CreateStream", name="vector-stream", subject="vector.subject", partitions=2
    )
    occ = METHODS["CreateStream"].request(name="vector-occ", subject="vector.occ")
    occ.optimisticConcurrencyControl.value = True  # type: ignore[attr-defined]
    create = channel.unary_unary(
        METHODS["CreateStream"].path,
        request_serializer=METHODS["CreateStream"].request.SerializeToString,
        response_deserializer=METHODS["CreateStream"].response.FromString,
    )
    await create(occ, timeout=10)
    nc = await nats.connect(NATS)
    acks: asyncio.Queue[Msg] = asyncio.Queue()

    async def on_ack(msg: Msg) -> None:
        await acks.put(msg)

    await nc.subscribe(INBOX, cb=on_ack)
    await flush_in_order(nc, 10)
    cases = [
        ("ack-all-partition0", "vector.subject", PUBLISH_ALL),
        ("ack-leader-partition1", "vector.subject.1", PUBLISH_LEADER),
        ("ack-incorrect-offset", "vector.occ", PUBLISH_WRONG_OFFSET),
    ]
    try:
        for name, subject, data in cases:
            await nc.publish(subject, data)
            ack = await asyncio.wait_for(acks.get(), 10)
            print(f"{name}: {ack.data.hex()}")
    finally:
        await nc.close()
        for name in ("vector-stream", "vector-occ"):
            await _unary(channel, "DeleteStream", name=name)
        await channel.close()


if __name__ == "__main__":
    asyncio.run(main())
