"""Consumer groups (docs/protocol/iggy.md §5.10).

Group consumption in 0.9 is client-driven: join, then SYNC_CONSUMER_GROUP (606) for
``[generation u64][partitions]``, then poll an assigned partition with a group consumer; a
poll failing with 5009 or answering the ``u32::MAX`` sentinel means "sync again".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.iggy.protocol._wire import (
    NAME,
    U32,
    U64,
    Counted,
    Nested,
    Payload,
    RequestPayload,
    ToEnd,
    wire,
)
from streamwire.iggy.protocol.constants import Command
from streamwire.iggy.protocol.identifiers import IDENT, Identifier

__all__ = (
    "ConsumerGroupDetails",
    "ConsumerGroupRecord",
    "ConsumerGroupsList",
    "CreateConsumerGroup",
    "DeleteConsumerGroup",
    "GetConsumerGroup",
    "GetConsumerGroups",
    "GroupAssignment",
    "GroupMember",
    "JoinConsumerGroup",
    "LeaveConsumerGroup",
    "SyncConsumerGroup",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupRecord(Payload):
    id: int = field(metadata=wire(U32))
    partitions_count: int = field(metadata=wire(U32))
    members_count: int = field(metadata=wire(U32))
    name: str = field(metadata=wire(NAME))


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMember(Payload):
    id: int = field(metadata=wire(U32))
    partitions: tuple[int, ...] = field(default=(), metadata=wire(Counted(U32, 4)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDetails(Payload):
    """Group header followed by exactly ``members_count`` members."""

    group: ConsumerGroupRecord
    members: tuple[GroupMember, ...] = ()

    def write(self, w: Writer) -> None:
        self.group.write(w)
        for member in self.members:
            member.write(w)

    @classmethod
    def read(cls, r: Reader) -> ConsumerGroupDetails:
        group = ConsumerGroupRecord.read(r)
        if group.members_count * 8 > r.remaining:
            raise r.error(f"{group.members_count} group members")
        return cls(
            group=group, members=tuple(GroupMember.read(r) for _ in range(group.members_count))
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupsList(Payload):
    groups: tuple[ConsumerGroupRecord, ...] = field(
        default=(), metadata=wire(ToEnd(Nested(ConsumerGroupRecord)))
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupAssignment(Payload):
    """SYNC_CONSUMER_GROUP reply: the generation and the partitions assigned to us."""

    generation: int = field(metadata=wire(U64))
    partitions: tuple[int, ...] = field(default=(), metadata=wire(Counted(U32, 4)))


@dataclass(frozen=True, slots=True)
class GetConsumerGroup(RequestPayload["ConsumerGroupDetails | None"]):
    command: ClassVar = Command.GET_CONSUMER_GROUP
    reply: ClassVar = ConsumerGroupDetails
    empty_is_none: ClassVar = True

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    group: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True)
class GetConsumerGroups(RequestPayload[ConsumerGroupsList]):
    command: ClassVar = Command.GET_CONSUMER_GROUPS
    reply: ClassVar = ConsumerGroupsList

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True)
class CreateConsumerGroup(RequestPayload[ConsumerGroupDetails]):
    """No group id in the request: the server assigns it."""

    command: ClassVar = Command.CREATE_CONSUMER_GROUP
    reply: ClassVar = ConsumerGroupDetails

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    name: str = field(metadata=wire(NAME))


@dataclass(frozen=True, slots=True)
class DeleteConsumerGroup(RequestPayload[None]):
    command: ClassVar = Command.DELETE_CONSUMER_GROUP

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    group: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True)
class JoinConsumerGroup(RequestPayload[None]):
    command: ClassVar = Command.JOIN_CONSUMER_GROUP

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    group: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True)
class LeaveConsumerGroup(RequestPayload[None]):
    command: ClassVar = Command.LEAVE_CONSUMER_GROUP

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    group: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True)
class SyncConsumerGroup(RequestPayload["GroupAssignment | None"]):
    """Code 606 (non-replicated); an empty reply means the caller is not a member."""

    command: ClassVar = Command.SYNC_CONSUMER_GROUP
    reply: ClassVar = GroupAssignment
    empty_is_none: ClassVar = True

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    group: Identifier = field(metadata=wire(IDENT))
