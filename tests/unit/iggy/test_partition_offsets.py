"""``Client.partition_offsets``: where each partition's messages are, from GET_TOPIC.

The derivation is checked on partition records directly (empty, one message at offset 0,
several, after retention deleted the oldest, after everything was deleted), then end to end
against the conformance double on loopback."""

from __future__ import annotations

import pytest

import streamwire.iggy as iggy
from streamwire.iggy import PartitionOffsets
from streamwire.iggy.protocol.errors import TopicNameNotFound
from streamwire.iggy.protocol.streams import PartitionRecord
from tests.iggy_double import IggyDouble


def record(partition: int, current_offset: int, messages: int) -> PartitionRecord:
    return PartitionRecord(
        id=partition,
        created_at=1,
        segments_count=1,
        current_offset=current_offset,
        size_bytes=0,
        messages_count=messages,
    )


@pytest.mark.parametrize(
    ("current_offset", "messages", "first", "next_"),
    [
        (0, 0, 0, 0),  # never written: current_offset is 0 too
        (0, 1, 0, 1),  # one message, at offset 0
        (9, 10, 0, 10),
        (9, 4, 6, 10),  # retention deleted offsets 0..5
        (9, 0, 10, 10),  # everything deleted: the next message still gets offset 10
    ],
)
def test_offsets_from_a_partition_record(
    current_offset: int, messages: int, first: int, next_: int
) -> None:
    got = PartitionOffsets.of(record(3, current_offset, messages))
    assert got == PartitionOffsets(partition=3, first=first, next=next_, messages=messages)


async def test_partition_offsets_of_a_topic() -> None:
    async with IggyDouble() as double:
        client = await iggy.connect(double.url, timeout=5, request_timeout=5, reconnect=None)
        try:
            await client.create_stream("s/t", partitions=3)
            empty = await client.partition_offsets("s/t")
            assert empty == {p: PartitionOffsets(p, 0, 0, 0) for p in range(3)}
            await client.send("s/t", [b"a"], partition=0)
            await client.send("s/t", [b"b", b"c", b"d"], partition=2)
            offsets = await client.partition_offsets("s/t")
            assert list(offsets) == [0, 1, 2]
            assert offsets[0] == PartitionOffsets(0, 0, 1, 1)
            assert offsets[1] == PartitionOffsets(1, 0, 0, 0)
            assert offsets[2] == PartitionOffsets(2, 0, 3, 3)
            # the next message of partition 2 gets the offset reported as next
            (confirmation,) = await client.send("s/t", [b"e"], partition=2)
            assert confirmation.offset == offsets[2].next
            with pytest.raises(TopicNameNotFound):
                await client.partition_offsets("s/missing")
        finally:
            await client.close()
