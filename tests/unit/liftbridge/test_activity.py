"""Decoding Liftbridge activity events (``streamwire.liftbridge.activity``) and handing each
out once; the real cluster is in tests/integration/liftbridge/test_activity.py."""

from __future__ import annotations

from typing import Any

import pytest

from streamwire import Message
from streamwire.errors import DecodeError
from streamwire.liftbridge.activity import ActivityEvent, ActivityOp, ActivityStream, decode_event
from streamwire.liftbridge.protocol._pb import api_pb2 as pb


def record(offset: int, event: pb.ActivityStreamEvent) -> Message:
    msg = Message(event.SerializeToString())
    msg.offset = offset
    return msg


CASES: list[tuple[pb.ActivityStreamEvent, ActivityEvent]] = [
    (
        pb.ActivityStreamEvent(
            id=3,
            op=pb.CREATE_STREAM,
            createStreamOp=pb.CreateStreamOp(stream="s", partitions=[0, 1]),
        ),
        ActivityEvent(7, 3, ActivityOp.CREATE_STREAM, stream="s", partitions=(0, 1)),
    ),
    (
        pb.ActivityStreamEvent(
            id=4, op=pb.DELETE_STREAM, deleteStreamOp=pb.DeleteStreamOp(stream="s")
        ),
        ActivityEvent(7, 4, ActivityOp.DELETE_STREAM, stream="s"),
    ),
    (
        pb.ActivityStreamEvent(
            id=5,
            op=pb.PAUSE_STREAM,
            pauseStreamOp=pb.PauseStreamOp(stream="s", partitions=[1], resumeAll=True),
        ),
        ActivityEvent(7, 5, ActivityOp.PAUSE_STREAM, stream="s", partitions=(1,), resume_all=True),
    ),
    (
        pb.ActivityStreamEvent(
            id=6, op=pb.RESUME_STREAM, resumeStreamOp=pb.ResumeStreamOp(stream="s", partitions=[1])
        ),
        ActivityEvent(7, 6, ActivityOp.RESUME_STREAM, stream="s", partitions=(1,)),
    ),
    (
        pb.ActivityStreamEvent(
            id=2**64 - 1,
            op=pb.SET_STREAM_READONLY,
            setStreamReadonlyOp=pb.SetStreamReadonlyOp(stream="s", partitions=[0], readonly=False),
        ),
        ActivityEvent(
            7,
            2**64 - 1,
            ActivityOp.SET_STREAM_READONLY,
            stream="s",
            partitions=(0,),
            readonly=False,
        ),
    ),
    (
        pb.ActivityStreamEvent(
            id=8,
            op=pb.JOIN_CONSUMER_GROUP,
            joinConsumerGroupOp=pb.JoinConsumerGroupOp(
                groupId="g", consumerId="c", streams=["a", "b"]
            ),
        ),
        ActivityEvent(
            7, 8, ActivityOp.JOIN_CONSUMER_GROUP, group_id="g", consumer_id="c", streams=("a", "b")
        ),
    ),
    (
        pb.ActivityStreamEvent(
            id=9,
            op=pb.LEAVE_CONSUMER_GROUP,
            leaveConsumerGroupOp=pb.LeaveConsumerGroupOp(groupId="g", consumerId="c", expired=True),
        ),
        ActivityEvent(
            7, 9, ActivityOp.LEAVE_CONSUMER_GROUP, group_id="g", consumer_id="c", expired=True
        ),
    ),
]


@pytest.mark.parametrize(("wire", "expected"), CASES, ids=[e.op.name for _, e in CASES])
def test_every_operation_decodes_to_its_typed_event(
    wire: pb.ActivityStreamEvent, expected: ActivityEvent
) -> None:
    assert decode_event(record(7, wire)) == expected


def test_what_is_not_an_event_is_a_decode_error() -> None:
    garbage = Message(b"\xff\xff")
    garbage.offset = 3
    with pytest.raises(DecodeError, match="offset 3"):
        decode_event(garbage)
    with pytest.raises(DecodeError, match="unknown operation 42"):
        decode_event(record(4, pb.ActivityStreamEvent(id=1, op=42)))  # type: ignore[arg-type]


class Replayed:
    """A consumer handing out fixed messages, as the activity stream's consumer would."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.committed: list[int] = []

    async def __anext__(self) -> Message:
        if not self.messages:
            raise StopAsyncIteration
        return self.messages.pop(0)

    async def next_batch(self, max_messages: int, timeout: float | None) -> list[Message]:
        n = max_messages
        taken, self.messages = self.messages[:n], self.messages[n:]
        return taken

    async def commit(self, offset: int | None = None) -> None:
        assert offset is not None
        self.committed.append(offset)

    async def start(self) -> Replayed:
        return self

    def _is_started(self) -> bool:
        return True

    async def close(self) -> None:
        self.messages = []


def created(offset: int, event_id: int, stream: str) -> Message:
    op = pb.CreateStreamOp(stream=stream, partitions=[0])
    return record(
        offset, pb.ActivityStreamEvent(id=event_id, op=pb.CREATE_STREAM, createStreamOp=op)
    )


async def test_an_event_recorded_twice_is_handed_out_once() -> None:
    """v1.9.0 writes the creation of __activity itself twice (offsets 0 and 1, one id)."""
    fake = Replayed(
        [
            created(0, 5, "__activity"),
            created(1, 5, "__activity"),
            created(2, 7, "__cursors"),
            created(3, 10, "a"),
            created(4, 10, "a"),
            created(5, 12, "b"),
        ]
    )
    activity = ActivityStream(fake)
    got = [e async for e in activity]
    assert [(e.offset, e.stream) for e in got] == [
        (0, "__activity"),
        (2, "__cursors"),
        (3, "a"),
        (5, "b"),
    ]
    await activity.commit()
    await activity.commit(got[1])
    assert fake.committed == [5, 2]

    batched = ActivityStream(Replayed([created(0, 5, "x"), created(1, 5, "x")]))
    assert [e.offset for e in await batched.next_batch(10)] == [0]
    assert [e.offset for e in await batched.next_batch(10)] == []


def test_the_event_fields_are_what_the_proto_says() -> None:
    fields: Any = pb.ActivityStreamEvent.DESCRIPTOR.fields_by_name
    assert sorted(fields) == sorted(
        [
            "id",
            "op",
            "createStreamOp",
            "deleteStreamOp",
            "pauseStreamOp",
            "resumeStreamOp",
            "setStreamReadonlyOp",
            "joinConsumerGroupOp",
            "leaveConsumerGroupOp",
        ]
    )
    assert [v.number for v in pb.ActivityStreamOp.DESCRIPTOR.values] == [
        op.value for op in ActivityOp
    ]
