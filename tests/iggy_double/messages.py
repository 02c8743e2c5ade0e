"""Message and consumer-offset handlers of the double: SendMessages (routing like the
server: PartitionId as given, MessagesKey by XXH32, Balanced round robin per session), polls
with every strategy and auto-commit, and stored offsets per consumer or group."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamwire.iggy.protocol import messaging as ms
from streamwire.iggy.protocol.constants import Command
from streamwire.iggy.protocol.identifiers import ConsumerKind, PartitioningKind, PollingKind
from streamwire.iggy.protocol.mapping import key_partition
from streamwire.iggy.protocol.messaging import RESYNC_PARTITION
from tests.iggy_double.state import IggyError, Partition, SessionInfo, State, Topic, encode_stored

__all__ = ("message_handlers",)


def message_handlers(state: State) -> dict[int, Callable[[SessionInfo, Any], bytes]]:

    def send_messages(s: SessionInfo, p: ms.SendMessages) -> bytes:
        stream, topic = state.topic(p.stream, p.topic)
        if not topic.partitions:
            raise IggyError(3008, topic.name)
        count = len(topic.partitions)
        if p.partitioning.kind is PartitioningKind.PARTITION_ID:
            partition = state.partition(topic, p.partitioning.partition or 0)
        elif p.partitioning.kind is PartitioningKind.MESSAGES_KEY:
            partition = topic.partitions[key_partition(p.partitioning.value, count)]
        else:
            cursor = s.balanced.get((stream.id, topic.id), 0)
            s.balanced[(stream.id, topic.id)] = cursor + 1
            partition = topic.partitions[cursor % count]
        base = partition.append(bytes(p.batch[p.room :]))  # as read: the batch alone
        confirmation = ms.SendConfirmation(
            stream_id=stream.id, topic_id=topic.id, partition_id=partition.id, base_offset=base
        )
        return ms.SendConfirmations(confirmations=(confirmation,)).encode()

    def _consumer_key(
        state: State, s: SessionInfo, topic: Topic, consumer: Any
    ) -> tuple[int, int | str]:
        if consumer.kind is ConsumerKind.GROUP:
            return (2, state.group(topic, consumer.id).id)
        return (1, consumer.id.value)

    def poll_messages(s: SessionInfo, p: ms.PollMessages) -> bytes:
        _, topic = state.topic(p.stream, p.topic)
        if p.count < 1:
            raise IggyError(4009, "count")
        if p.consumer.kind is ConsumerKind.GROUP:
            group = state.group(topic, p.consumer.id)
            if s.number not in group.members:
                raise IggyError(5006, group.name)
            if p.partition is None:
                return ms.PolledMessages(
                    partition_id=RESYNC_PARTITION, current_offset=0, messages_count=0
                ).encode()
            if p.partition not in group.assignment.get(s.number, []):
                raise IggyError(5009, str(p.partition))
        partition = state.partition(topic, 0 if p.partition is None else p.partition)
        key = _consumer_key(state, s, topic, p.consumer)
        start = _start_offset(partition, p, key)
        records = [] if start is None else partition.select(start, p.count)
        if p.auto_commit and records:
            last = records[-1]
            partition.offsets[key] = last[0].header.base_offset + last[1][-1].offset_delta
        reply = ms.PolledMessages.build(
            partition.id, partition.current_offset, [encode_stored(r, m) for r, m in records]
        )
        return reply.encode()

    def get_offset(s: SessionInfo, p: ms.GetConsumerOffset) -> bytes:
        _, topic = state.topic(p.stream, p.topic)
        partition = state.partition(topic, p.partition or 0)
        stored = partition.offsets.get(_consumer_key(state, s, topic, p.consumer))
        if stored is None:
            return b""
        return ms.ConsumerOffsetInfo(
            partition_id=partition.id,
            current_offset=partition.current_offset,
            stored_offset=stored,
        ).encode()

    def store_offset(s: SessionInfo, p: ms.StoreConsumerOffset) -> bytes:
        _, topic = state.topic(p.stream, p.topic)
        partition = state.partition(topic, p.partition or 0)
        if partition.next_offset == 0 or p.offset > partition.current_offset:
            # nothing past the last message; on an empty partition not even 0 (0.9.0-edge.5)
            raise IggyError(4100, str(p.offset))
        partition.offsets[_consumer_key(state, s, topic, p.consumer)] = p.offset
        return b""

    def delete_offset(s: SessionInfo, p: ms.DeleteConsumerOffset) -> bytes:
        _, topic = state.topic(p.stream, p.topic)
        partition = state.partition(topic, p.partition or 0)
        if partition.offsets.pop(_consumer_key(state, s, topic, p.consumer), None) is None:
            raise IggyError(3021, "consumer offset")
        return b""

    c = Command
    return {
        c.SEND_MESSAGES: send_messages,
        c.POLL_MESSAGES: poll_messages,
        c.GET_CONSUMER_OFFSET: get_offset,
        c.STORE_CONSUMER_OFFSET: store_offset,
        c.DELETE_CONSUMER_OFFSET: delete_offset,
    }


def _start_offset(
    partition: Partition, p: ms.PollMessages, key: tuple[int, int | str]
) -> int | None:
    """Where a poll starts (None: nothing to serve), as the 0.9 partition plans it."""
    if not partition.messages_count:
        return None
    high = partition.current_offset
    kind = p.strategy.kind
    if kind is PollingKind.TIMESTAMP:
        return partition.first_at_or_after(p.strategy.value)
    if kind is PollingKind.OFFSET:
        start = p.strategy.value
    elif kind is PollingKind.FIRST:
        start = 0
    elif kind is PollingKind.LAST:
        start = max(0, high - (p.count - 1))
    else:
        stored = partition.offsets.get(key)
        start = 0 if stored is None else stored + 1
    return None if start > high else start
