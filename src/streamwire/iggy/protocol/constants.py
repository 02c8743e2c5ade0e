"""Iggy 0.9 wire constants and the command table (binary protocol 0.11.0).

One table, :data:`COMMANDS`, describes every command code: its name, the header
``operation`` byte it travels with, and whether its reply body starts with a result section.
Encoders and decoders (client, test double) read it; nothing else hard-codes the mapping.

Facts from docs/protocol/iggy.md §2.3 and §3.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from streamwire.errors import LocalProtocolError

__all__ = (
    "COMMANDS",
    "HEADER_SIZE",
    "MAX_FRAME_SIZE",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSION_TEXT",
    "U32_MAX",
    "U64_MAX",
    "AckLevel",
    "Command",
    "CommandSpec",
    "FrameKind",
    "Operation",
    "command_for_operation",
    "pack_version",
    "unpack_version",
)

HEADER_SIZE: Final = 256
"""Every frame, in both directions, starts with a 256-byte header."""

MAX_FRAME_SIZE: Final = 64 * 1024 * 1024
"""The server's default ``[message_bus] max_message_size`` (frames above it are dropped)."""

U32_MAX: Final = 0xFFFFFFFF
U64_MAX: Final = 0xFFFFFFFFFFFFFFFF


def pack_version(major: int, minor: int, patch: int) -> int:
    """Semver packed as the protocol does: 10 bits each, ``major << 20 | minor << 10 | patch``."""
    for part in (major, minor, patch):
        if not 0 <= part < 1024:
            raise LocalProtocolError(f"version part {part} does not fit in 10 bits")
    return (major << 20) | (minor << 10) | patch


def unpack_version(packed: int) -> tuple[int, int, int]:
    return ((packed >> 20) & 0x3FF, (packed >> 10) & 0x3FF, packed & 0x3FF)


PROTOCOL_VERSION_TEXT: Final = "0.11.0"
PROTOCOL_VERSION: Final = pack_version(0, 11, 0)
"""Binary protocol 0.11.0 (server 0.9.x) = 11264."""


class FrameKind(IntEnum):
    """The header ``command`` byte at offset 60."""

    REQUEST = 5
    REPLY = 8
    EVICTION = 13


class Operation(IntEnum):
    """The header ``operation`` byte (request offset 176, reply offset 208)."""

    RESERVED = 0
    REGISTER = 1
    NON_REPLICATED = 2
    LOGOUT = 3
    CREATE_STREAM = 128
    UPDATE_STREAM = 129
    DELETE_STREAM = 130
    PURGE_STREAM = 131
    CREATE_TOPIC = 132
    UPDATE_TOPIC = 133
    DELETE_TOPIC = 134
    PURGE_TOPIC = 135
    CREATE_PARTITIONS = 136
    DELETE_PARTITIONS = 137
    DELETE_SEGMENTS = 138
    CREATE_CONSUMER_GROUP = 139
    DELETE_CONSUMER_GROUP = 140
    CREATE_USER = 141
    UPDATE_USER = 142
    DELETE_USER = 143
    CHANGE_PASSWORD = 144
    UPDATE_PERMISSIONS = 145
    CREATE_PERSONAL_ACCESS_TOKEN = 146
    DELETE_PERSONAL_ACCESS_TOKEN = 147
    JOIN_CONSUMER_GROUP = 148
    LEAVE_CONSUMER_GROUP = 149
    SEND_MESSAGES = 160
    STORE_CONSUMER_OFFSET = 161
    DELETE_CONSUMER_OFFSET = 162

    @property
    def is_metadata(self) -> bool:
        return 128 <= self <= 149

    @property
    def is_replicated(self) -> bool:
        """Replicated requests take the next request number (§2.4)."""
        return self is Operation.LOGOUT or self >= 128

    @property
    def result_framed(self) -> bool:
        """Whether a (non-empty) reply body starts with a result section (§2.5 step 4).
        Register is result-framed only when its body is non-empty."""
        return self.is_metadata or self in (
            Operation.REGISTER,
            Operation.STORE_CONSUMER_OFFSET,
            Operation.DELETE_CONSUMER_OFFSET,
        )

    @property
    def pipelinable(self) -> bool:
        """Whether a request may share the connection with others in flight: reads, Ping
        and SendMessages. The rest (login, logout, metadata and consumer-offset writes) go
        alone, so that a transient rejection can be retried with its number (§2.5, §2.8)."""
        return self in (Operation.NON_REPLICATED, Operation.SEND_MESSAGES)

    @property
    def stamps_checksum(self) -> bool:
        """The released SDK stamps ``request_checksum`` for Register, Logout and metadata ops."""
        return self.is_metadata or self in (Operation.REGISTER, Operation.LOGOUT)


class AckLevel(IntEnum):
    """Trailing byte of Store/DeleteConsumerOffset (§4.7)."""

    NO_ACK = 0
    QUORUM = 1


class Command(IntEnum):
    """Command codes (§3). Replicated ones travel as their operation byte only."""

    PING = 1
    GET_STATS = 10
    GET_SNAPSHOT = 11
    GET_CLUSTER_METADATA = 12
    DESCRIBE_OPTIONS = 13
    ATTACH_CONSUMER_SESSION = 14
    GET_ME = 20
    GET_CLIENT = 21
    GET_CLIENTS = 22
    GET_USER = 31
    GET_USERS = 32
    CREATE_USER = 33
    DELETE_USER = 34
    UPDATE_USER = 35
    UPDATE_PERMISSIONS = 36
    CHANGE_PASSWORD = 37
    LOGIN_USER = 38
    LOGOUT_USER = 39
    LOGIN_REGISTER = 40
    GET_PERSONAL_ACCESS_TOKENS = 41
    CREATE_PERSONAL_ACCESS_TOKEN = 42
    DELETE_PERSONAL_ACCESS_TOKEN = 43
    LOGIN_WITH_PERSONAL_ACCESS_TOKEN = 44
    LOGIN_REGISTER_WITH_PAT = 45
    POLL_MESSAGES = 100
    SEND_MESSAGES = 101
    FLUSH_UNSAVED_BUFFER = 102
    GET_CONSUMER_OFFSET = 120
    STORE_CONSUMER_OFFSET = 121
    DELETE_CONSUMER_OFFSET = 122
    GET_STREAM = 200
    GET_STREAMS = 201
    CREATE_STREAM = 202
    DELETE_STREAM = 203
    UPDATE_STREAM = 204
    PURGE_STREAM = 205
    GET_TOPIC = 300
    GET_TOPICS = 301
    CREATE_TOPIC = 302
    DELETE_TOPIC = 303
    UPDATE_TOPIC = 304
    PURGE_TOPIC = 305
    CREATE_PARTITIONS = 402
    DELETE_PARTITIONS = 403
    DELETE_SEGMENTS = 503
    GET_CONSUMER_GROUP = 600
    GET_CONSUMER_GROUPS = 601
    CREATE_CONSUMER_GROUP = 602
    DELETE_CONSUMER_GROUP = 603
    JOIN_CONSUMER_GROUP = 604
    LEAVE_CONSUMER_GROUP = 605
    SYNC_CONSUMER_GROUP = 606


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """How one command travels: ``operation`` byte; ``None`` for refused legacy codes."""

    code: Command
    operation: Operation | None

    @property
    def name(self) -> str:
        return self.code.name

    @property
    def replicated(self) -> bool:
        return self.operation is not None and self.operation.is_replicated


_C, _O = Command, Operation
_NR = _O.NON_REPLICATED

COMMANDS: Final[dict[int, CommandSpec]] = {
    spec.code: spec
    for spec in (
        CommandSpec(_C.PING, _NR),
        CommandSpec(_C.GET_STATS, _NR),
        CommandSpec(_C.GET_SNAPSHOT, _NR),
        CommandSpec(_C.GET_CLUSTER_METADATA, _NR),
        CommandSpec(_C.DESCRIBE_OPTIONS, _NR),
        CommandSpec(_C.ATTACH_CONSUMER_SESSION, _NR),
        CommandSpec(_C.GET_ME, _NR),
        CommandSpec(_C.GET_CLIENT, _NR),
        CommandSpec(_C.GET_CLIENTS, _NR),
        CommandSpec(_C.GET_USER, _NR),
        CommandSpec(_C.GET_USERS, _NR),
        CommandSpec(_C.CREATE_USER, _O.CREATE_USER),
        CommandSpec(_C.DELETE_USER, _O.DELETE_USER),
        CommandSpec(_C.UPDATE_USER, _O.UPDATE_USER),
        CommandSpec(_C.UPDATE_PERMISSIONS, _O.UPDATE_PERMISSIONS),
        CommandSpec(_C.CHANGE_PASSWORD, _O.CHANGE_PASSWORD),
        CommandSpec(_C.LOGIN_USER, None),
        CommandSpec(_C.LOGOUT_USER, _O.LOGOUT),
        CommandSpec(_C.LOGIN_REGISTER, _O.REGISTER),
        CommandSpec(_C.GET_PERSONAL_ACCESS_TOKENS, _NR),
        CommandSpec(_C.CREATE_PERSONAL_ACCESS_TOKEN, _O.CREATE_PERSONAL_ACCESS_TOKEN),
        CommandSpec(_C.DELETE_PERSONAL_ACCESS_TOKEN, _O.DELETE_PERSONAL_ACCESS_TOKEN),
        CommandSpec(_C.LOGIN_WITH_PERSONAL_ACCESS_TOKEN, None),
        CommandSpec(_C.LOGIN_REGISTER_WITH_PAT, _O.REGISTER),
        CommandSpec(_C.POLL_MESSAGES, _NR),
        CommandSpec(_C.SEND_MESSAGES, _O.SEND_MESSAGES),
        CommandSpec(_C.FLUSH_UNSAVED_BUFFER, _NR),
        CommandSpec(_C.GET_CONSUMER_OFFSET, _NR),
        CommandSpec(_C.STORE_CONSUMER_OFFSET, _O.STORE_CONSUMER_OFFSET),
        CommandSpec(_C.DELETE_CONSUMER_OFFSET, _O.DELETE_CONSUMER_OFFSET),
        CommandSpec(_C.GET_STREAM, _NR),
        CommandSpec(_C.GET_STREAMS, _NR),
        CommandSpec(_C.CREATE_STREAM, _O.CREATE_STREAM),
        CommandSpec(_C.DELETE_STREAM, _O.DELETE_STREAM),
        CommandSpec(_C.UPDATE_STREAM, _O.UPDATE_STREAM),
        CommandSpec(_C.PURGE_STREAM, _O.PURGE_STREAM),
        CommandSpec(_C.GET_TOPIC, _NR),
        CommandSpec(_C.GET_TOPICS, _NR),
        CommandSpec(_C.CREATE_TOPIC, _O.CREATE_TOPIC),
        CommandSpec(_C.DELETE_TOPIC, _O.DELETE_TOPIC),
        CommandSpec(_C.UPDATE_TOPIC, _O.UPDATE_TOPIC),
        CommandSpec(_C.PURGE_TOPIC, _O.PURGE_TOPIC),
        CommandSpec(_C.CREATE_PARTITIONS, _O.CREATE_PARTITIONS),
        CommandSpec(_C.DELETE_PARTITIONS, _O.DELETE_PARTITIONS),
        CommandSpec(_C.DELETE_SEGMENTS, _O.DELETE_SEGMENTS),
        CommandSpec(_C.GET_CONSUMER_GROUP, _NR),
        CommandSpec(_C.GET_CONSUMER_GROUPS, _NR),
        CommandSpec(_C.CREATE_CONSUMER_GROUP, _O.CREATE_CONSUMER_GROUP),
        CommandSpec(_C.DELETE_CONSUMER_GROUP, _O.DELETE_CONSUMER_GROUP),
        CommandSpec(_C.JOIN_CONSUMER_GROUP, _O.JOIN_CONSUMER_GROUP),
        CommandSpec(_C.LEAVE_CONSUMER_GROUP, _O.LEAVE_CONSUMER_GROUP),
        CommandSpec(_C.SYNC_CONSUMER_GROUP, _NR),
    )
}
"""Command code → how it travels. Register's two codes share operation 1; every other
replicated operation belongs to exactly one code (see :func:`command_for_operation`)."""

_BY_OPERATION: Final[dict[Operation, Command]] = {
    spec.operation: spec.code
    for spec in COMMANDS.values()
    if spec.operation is not None
    and spec.operation not in (Operation.NON_REPLICATED, Operation.REGISTER)
}


def command_for_operation(operation: int) -> Command | None:
    """The command a replicated operation byte stands for (``None``: Register, reads or an
    unknown byte). Register is told apart by its body (password vs token login)."""
    try:
        return _BY_OPERATION.get(Operation(operation))
    except ValueError:
        return None
