"""The double's in-memory model: users, tokens, streams, topics, partitions, messages,
consumer offsets and consumer groups. Pure data and rules, no I/O.

Rules follow docs/protocol/iggy.md (§3–§6) and, where it is silent, the
``server-0.9.0-edge.5`` poll semantics they describe: First = offset 0, Last = the last
``count`` messages, Next = stored offset + 1 (0 if none), nothing past the partition's
highest offset; ids are server-assigned and 0-based.
"""

from __future__ import annotations

import itertools
import secrets
import time
from dataclasses import dataclass, field

from streamwire.codec.headers import HeaderValue
from streamwire.iggy.protocol.batch import (
    BatchHeader,
    StoredMessage,
    decode_batch,
    encode_record,
)
from streamwire.iggy.protocol.identifiers import Identifier
from streamwire.iggy.protocol.users import Permissions

__all__ = (
    "DEFAULT_TOPIC_OPTIONS",
    "Group",
    "IggyError",
    "Partition",
    "SessionInfo",
    "State",
    "Stream",
    "Topic",
    "User",
    "encode_stored",
)

U64_MAX = (1 << 64) - 1

DEFAULT_TOPIC_OPTIONS: dict[str, HeaderValue] = {
    "compression_algorithm": HeaderValue.string("none"),
    "consumer_offset_durability": HeaderValue.string("replicated"),
    "durability": HeaderValue.string("replicated"),
    "max_topic_size": HeaderValue.uint64(U64_MAX),
    "message_expiry": HeaderValue.uint64(U64_MAX),
    "messages_required_to_save": HeaderValue.uint32(1024),
    "preallocate_segments": HeaderValue.boolean(False),
    "segment_size": HeaderValue.uint64(1 << 30),
    "size_of_messages_required_to_save": HeaderValue.uint64(1 << 20),
}


#: Keys real servers took where the notes say they are refused (0.9.0-edge.5 has
#: ``enforce_fsync``): the double takes them too, as any 0.9 server takes one or the other.
NEWER_TOPIC_OPTIONS = frozenset({"enforce_fsync"})


class IggyError(Exception):
    """A business error: the server answers with ``code``."""

    def __init__(self, code: int, text: str = "") -> None:
        super().__init__(f"{code}: {text}")
        self.code = code


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass
class Record:
    """One appended batch as stored: header fields stamped, frames as sent."""

    header: BatchHeader
    messages: list[StoredMessage]


@dataclass
class Partition:
    id: int
    created_at: int = field(default_factory=now_us)
    records: list[Record] = field(default_factory=list)
    next_offset: int = 0
    size_bytes: int = 0
    offsets: dict[tuple[int, int | str], int] = field(default_factory=dict)
    """(consumer kind, consumer id) → stored offset."""

    @property
    def current_offset(self) -> int:
        return max(self.next_offset - 1, 0)

    @property
    def messages_count(self) -> int:
        return self.next_offset

    def append(self, batch: bytes) -> int:
        header, messages = decode_batch(batch, verify=True)
        base = self.next_offset
        stamped = BatchHeader(
            partition_id=self.id,
            base_offset=base,
            base_timestamp=now_us(),
            origin_timestamp=header.origin_timestamp,
            batch_length=header.batch_length,
            batch_checksum=0,
            message_count=header.message_count,
        )
        self.records.append(Record(stamped, messages))
        self.next_offset += header.message_count
        self.size_bytes += header.batch_length
        return base

    def select(self, start: int, count: int) -> list[tuple[Record, list[StoredMessage]]]:
        """Up to ``count`` messages from offset ``start``, grouped by stored record."""
        out: list[tuple[Record, list[StoredMessage]]] = []
        left = count
        for record in self.records:
            picked = [
                m for m in record.messages if record.header.base_offset + m.offset_delta >= start
            ][:left]
            if picked:
                out.append((record, picked))
                left -= len(picked)
            if not left:
                break
        return out

    def first_at_or_after(self, timestamp: int) -> int | None:
        for record in self.records:
            if record.header.base_timestamp >= timestamp:
                return record.header.base_offset + record.messages[0].offset_delta
        return None


def encode_stored(record: Record, messages: list[StoredMessage]) -> bytes:
    """A (possibly sliced) stored record as served in a poll reply."""
    return encode_record(
        messages,
        partition_id=record.header.partition_id,
        base_offset=record.header.base_offset,
        base_timestamp=record.header.base_timestamp,
        origin_timestamp=record.header.origin_timestamp,
    )


@dataclass
class Group:
    id: int
    name: str
    members: list[int] = field(default_factory=list)
    """Member client ids, in join order."""
    generation: int = 0
    assignment: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class Topic:
    id: int
    name: str
    options: dict[str, HeaderValue]
    partitions: list[Partition] = field(default_factory=list)
    created_at: int = field(default_factory=now_us)
    groups: list[Group] = field(default_factory=list)

    def derived(self) -> dict[str, HeaderValue]:
        return {**DEFAULT_TOPIC_OPTIONS, **self.options}

    def rebalance(self, group: Group) -> None:
        group.generation += 1
        group.assignment = {member: [] for member in group.members}
        for i, partition in enumerate(self.partitions):
            if group.members:
                group.assignment[group.members[i % len(group.members)]].append(partition.id)


@dataclass
class Stream:
    id: int
    name: str
    topics: list[Topic] = field(default_factory=list)
    created_at: int = field(default_factory=now_us)


@dataclass
class User:
    id: int
    username: str
    password: str
    status: int = 1
    permissions: Permissions | None = None
    created_at: int = field(default_factory=now_us)
    tokens: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Token name → (secret, expiry µs; 0 = never)."""


@dataclass
class SessionInfo:
    """What the server knows about one connection."""

    number: int
    """The u32 client id reported by GET_ME / GET_CLIENTS."""
    address: str
    user: User | None = None
    client: int = 0
    """The u128 client id of the current login."""
    session: int = 0
    last_request: int = 0
    replies: dict[int, bytes] = field(default_factory=dict)
    balanced: dict[tuple[int, int], int] = field(default_factory=dict)


class State:
    """Everything the double stores."""

    def __init__(self, username: str = "iggy", password: str = "iggy") -> None:  # noqa: S107
        self.users: list[User] = [User(0, username, password, permissions=Permissions())]
        self.streams: list[Stream] = []
        self._stream_ids = itertools.count()
        self._user_ids = itertools.count(1)

    # --- lookups -------------------------------------------------------------------------

    def stream(self, ident: Identifier) -> Stream:
        for s in self.streams:
            if s.id == ident.value or s.name == ident.value:
                return s
        raise IggyError(1009 if ident.is_numeric else 1010, str(ident))

    def topic(self, stream: Identifier, topic: Identifier) -> tuple[Stream, Topic]:
        s = self.stream(stream)
        for t in s.topics:
            if t.id == topic.value or t.name == topic.value:
                return s, t
        raise IggyError(2010 if topic.is_numeric else 2011, str(topic))

    def partition(self, topic: Topic, partition_id: int) -> Partition:
        for p in topic.partitions:
            if p.id == partition_id:
                return p
        raise IggyError(3007, f"partition {partition_id}")

    def group(self, topic: Topic, ident: Identifier) -> Group:
        for g in topic.groups:
            if g.id == ident.value or g.name == ident.value:
                return g
        raise IggyError(5000 if ident.is_numeric else 5003, str(ident))

    def user(self, ident: Identifier) -> User:
        for u in self.users:
            if u.id == ident.value or u.username == ident.value:
                return u
        raise IggyError(20, f"user {ident}")

    # --- streams and topics --------------------------------------------------------------

    def create_stream(self, name: str) -> Stream:
        if any(s.name == name for s in self.streams):
            raise IggyError(1012, name)
        stream = Stream(next(self._stream_ids), name)
        self.streams.append(stream)
        return stream

    def create_topic(
        self, stream: Identifier, name: str, partitions: int, options: dict[str, HeaderValue]
    ) -> Topic:
        s = self.stream(stream)
        if any(t.name == name for t in s.topics):
            raise IggyError(2013, name)
        if partitions > 1000:
            raise IggyError(2015, str(partitions))
        for key in options:
            if key not in DEFAULT_TOPIC_OPTIONS and key not in NEWER_TOPIC_OPTIONS:
                raise IggyError(4041, key)
        topic_id = max((t.id for t in s.topics), default=-1) + 1
        topic = Topic(topic_id, name, dict(options))
        topic.partitions = [Partition(i) for i in range(partitions)]
        s.topics.append(topic)
        return topic

    def add_partitions(self, topic: Topic, count: int) -> None:
        if not 1 <= count <= 1000:
            raise IggyError(2019, str(count))
        start = max((p.id for p in topic.partitions), default=-1) + 1
        topic.partitions.extend(Partition(start + i) for i in range(count))
        for group in topic.groups:
            topic.rebalance(group)

    def remove_partitions(self, topic: Topic, count: int) -> None:
        if not 1 <= count <= min(1000, len(topic.partitions)):
            raise IggyError(2019, str(count))
        del topic.partitions[-count:]
        for group in topic.groups:
            topic.rebalance(group)

    # --- users and tokens ----------------------------------------------------------------

    def authenticate(self, username: str, password: str) -> User | None:
        for user in self.users:
            if user.username == username and user.password == password:
                return user
        return None

    def authenticate_token(self, token: str) -> User | None:
        for user in self.users:
            for secret, expiry in user.tokens.values():
                if secrets.compare_digest(secret, token) and (not expiry or expiry > now_us()):
                    return user
        return None

    def create_user(
        self, username: str, password: str, status: int, permissions: Permissions | None
    ) -> User:
        if any(u.username == username for u in self.users):
            raise IggyError(46, username)
        user = User(next(self._user_ids), username, password, status, permissions)
        self.users.append(user)
        return user

    def create_token(self, user: User, name: str, expiry: int) -> str:
        if name in user.tokens:
            raise IggyError(51, name)
        secret = secrets.token_urlsafe(32)
        at = 0 if expiry in (0, U64_MAX) else now_us() + expiry
        user.tokens[name] = (secret, at)
        return secret
