"""Users, permissions and personal access tokens (docs/protocol/iggy.md §3, §4.11, §5.5, §5.11)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Final, TypeVar

from streamwire.codec.headers import HeaderValue
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.iggy.protocol._wire import (
    NAME,
    STR8,
    U8,
    U32,
    U64,
    Codec,
    Nested,
    Payload,
    RequestPayload,
    ToEnd,
    wire,
)
from streamwire.iggy.protocol.constants import Command
from streamwire.iggy.protocol.identifiers import IDENT, Identifier
from streamwire.iggy.protocol.tlv import OPTIONS32, OPTIONS_REST

__all__ = (
    "ChangePassword",
    "CreatePersonalAccessToken",
    "CreateUser",
    "DeletePersonalAccessToken",
    "DeleteUser",
    "GetPersonalAccessTokens",
    "GetUser",
    "GetUsers",
    "GlobalPermissions",
    "Permissions",
    "RawToken",
    "StreamPermissions",
    "TokenInfo",
    "TokensList",
    "TopicPermissions",
    "UpdatePermissions",
    "UpdateUser",
    "UserDetails",
    "UserRecord",
    "UserStatus",
    "UsersList",
)

T = TypeVar("T")


class UserStatus:
    ACTIVE: Final = 1
    INACTIVE: Final = 2


def _flags(r: Reader, n: int) -> tuple[bool, ...]:
    out: list[bool] = []
    for _ in range(n):
        pos = r.pos
        value = r.u8()
        if value > 1:
            raise r.error(f"permission flag {value}", pos)
        out.append(value == 1)
    return tuple(out)


def _has_next(r: Reader) -> bool:
    return _flags(r, 1)[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class GlobalPermissions:
    """Ten flags, in wire order."""

    manage_servers: bool = False
    read_servers: bool = False
    manage_users: bool = False
    read_users: bool = False
    manage_streams: bool = False
    read_streams: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPermissions:
    topic_id: int
    manage_topic: bool = False
    read_topic: bool = False
    poll_messages: bool = False
    send_messages: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamPermissions:
    stream_id: int
    manage_stream: bool = False
    read_stream: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False
    topics: tuple[TopicPermissions, ...] = ()


_GLOBAL_FIELDS: Final = tuple(GlobalPermissions.__dataclass_fields__)
_STREAM_FLAGS: Final = tuple(StreamPermissions.__dataclass_fields__)[1:7]
_TOPIC_FLAGS: Final = tuple(TopicPermissions.__dataclass_fields__)[1:5]


@dataclass(frozen=True, slots=True, kw_only=True)
class Permissions(Payload):
    """The permissions blob: global flags, then linked lists of streams and topics."""

    global_permissions: GlobalPermissions = field(default_factory=GlobalPermissions)
    streams: tuple[StreamPermissions, ...] = ()

    def write(self, w: Writer) -> None:
        for name in _GLOBAL_FIELDS:
            w.u8(int(getattr(self.global_permissions, name)))
        w.u8(1 if self.streams else 0)
        for i, stream in enumerate(self.streams):
            w.u32le(stream.stream_id)
            for name in _STREAM_FLAGS:
                w.u8(int(getattr(stream, name)))
            w.u8(1 if stream.topics else 0)
            for j, topic in enumerate(stream.topics):
                w.u32le(topic.topic_id)
                for name in _TOPIC_FLAGS:
                    w.u8(int(getattr(topic, name)))
                w.u8(1 if j < len(stream.topics) - 1 else 0)
            w.u8(1 if i < len(self.streams) - 1 else 0)

    @classmethod
    def read(cls, r: Reader) -> Permissions:
        glob = GlobalPermissions(**dict(zip(_GLOBAL_FIELDS, _flags(r, 10), strict=True)))
        streams: list[StreamPermissions] = []
        more = _has_next(r)
        while more:
            stream_id = r.u32le()
            flags = dict(zip(_STREAM_FLAGS, _flags(r, 6), strict=True))
            topics: list[TopicPermissions] = []
            more_topics = _has_next(r)
            while more_topics:
                topic_id = r.u32le()
                tflags = dict(zip(_TOPIC_FLAGS, _flags(r, 4), strict=True))
                topics.append(TopicPermissions(topic_id=topic_id, **tflags))
                more_topics = _has_next(r)
            streams.append(StreamPermissions(stream_id=stream_id, topics=tuple(topics), **flags))
            more = _has_next(r)
        return cls(global_permissions=glob, streams=tuple(streams))


class _RequestPermissions(Codec["Permissions | None"]):
    """Request form: ``[has u8]`` then, if 1, ``[len u32][blob]``."""

    __slots__ = ()

    def write(self, w: Writer, value: Permissions | None) -> None:
        if value is None:
            w.u8(0)
            return
        blob = value.encode()
        w.u8(1).u32le(len(blob)).raw(blob)

    def read(self, r: Reader) -> Permissions | None:
        if not _has_next(r):
            return None
        return Permissions.decode(r.bytes(r.u32le()))


class _ReplyPermissions(Codec["Permissions | None"]):
    """GetUser reply form: ``[0u32]`` when none, else ``[1 u8][len u32][blob]``."""

    __slots__ = ()

    def write(self, w: Writer, value: Permissions | None) -> None:
        if value is None:
            w.u32le(0)
            return
        blob = value.encode()
        w.u8(1).u32le(len(blob)).raw(blob)

    def read(self, r: Reader) -> Permissions | None:
        pos = r.pos
        flag = r.u8()
        if flag == 0:
            if any(r.view(3)):
                raise r.error("no-permissions marker is not four zero bytes", pos)
            return None
        if flag != 1:
            raise r.error(f"permissions flag {flag}", pos)
        return Permissions.decode(r.bytes(r.u32le()))


class _Maybe(Codec["T | None"]):
    """``[has u8]`` then the value if 1."""

    __slots__ = ("_codec",)

    def __init__(self, codec: Codec[T]) -> None:
        self._codec = codec

    def write(self, w: Writer, value: T | None) -> None:
        if value is None:
            w.u8(0)
        else:
            w.u8(1)
            self._codec.write(w, value)

    def read(self, r: Reader) -> T | None:
        return self._codec.read(r) if _has_next(r) else None


Options = dict[str, HeaderValue]


def _options() -> Options:
    return {}


@dataclass(frozen=True, slots=True, kw_only=True)
class UserRecord(Payload):
    id: int = field(metadata=wire(U32))
    created_at: int = field(metadata=wire(U64))
    status: int = field(metadata=wire(U8))
    username: str = field(metadata=wire(NAME))
    options: Options = field(default_factory=_options, metadata=wire(OPTIONS32))


@dataclass(frozen=True, slots=True, kw_only=True)
class UserDetails(Payload):
    user: UserRecord = field(metadata=wire(Nested(UserRecord)))
    permissions: Permissions | None = field(default=None, metadata=wire(_ReplyPermissions()))


@dataclass(frozen=True, slots=True, kw_only=True)
class UsersList(Payload):
    users: tuple[UserRecord, ...] = field(default=(), metadata=wire(ToEnd(Nested(UserRecord))))


@dataclass(frozen=True, slots=True)
class GetUser(RequestPayload["UserDetails | None"]):
    command: ClassVar = Command.GET_USER
    reply: ClassVar = UserDetails
    empty_is_none: ClassVar = True

    user: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True)
class GetUsers(RequestPayload[UsersList]):
    command: ClassVar = Command.GET_USERS
    reply: ClassVar = UsersList


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateUser(RequestPayload[UserDetails]):
    command: ClassVar = Command.CREATE_USER
    reply: ClassVar = UserDetails

    username: str = field(metadata=wire(NAME))
    password: str = field(repr=False, metadata=wire(STR8))
    status: int = field(default=UserStatus.ACTIVE, metadata=wire(U8))
    permissions: Permissions | None = field(default=None, metadata=wire(_RequestPermissions()))
    options: Options = field(default_factory=_options, metadata=wire(OPTIONS_REST))


@dataclass(frozen=True, slots=True)
class DeleteUser(RequestPayload[None]):
    command: ClassVar = Command.DELETE_USER

    user: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateUser(RequestPayload[None]):
    command: ClassVar = Command.UPDATE_USER

    user: Identifier = field(metadata=wire(IDENT))
    username: str | None = field(default=None, metadata=wire(_Maybe(NAME)))
    status: int | None = field(default=None, metadata=wire(_Maybe(U8)))
    options: Options = field(default_factory=_options, metadata=wire(OPTIONS_REST))


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdatePermissions(RequestPayload[None]):
    command: ClassVar = Command.UPDATE_PERMISSIONS

    user: Identifier = field(metadata=wire(IDENT))
    permissions: Permissions | None = field(default=None, metadata=wire(_RequestPermissions()))


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangePassword(RequestPayload[None]):
    command: ClassVar = Command.CHANGE_PASSWORD

    user: Identifier = field(metadata=wire(IDENT))
    current_password: str = field(repr=False, metadata=wire(STR8))
    new_password: str = field(repr=False, metadata=wire(STR8))


@dataclass(frozen=True, slots=True, kw_only=True)
class RawToken(Payload):
    token: str = field(repr=False, metadata=wire(NAME))


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenInfo(Payload):
    name: str = field(metadata=wire(NAME))
    expiry_at: int = field(metadata=wire(U64))


@dataclass(frozen=True, slots=True, kw_only=True)
class TokensList(Payload):
    tokens: tuple[TokenInfo, ...] = field(default=(), metadata=wire(ToEnd(Nested(TokenInfo))))


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePersonalAccessToken(RequestPayload[RawToken]):
    """``expiry``: µs; 0 = server default (none), ``u64::MAX`` = never."""

    command: ClassVar = Command.CREATE_PERSONAL_ACCESS_TOKEN
    reply: ClassVar = RawToken

    name: str = field(metadata=wire(NAME))
    expiry: int = field(default=0, metadata=wire(U64))


@dataclass(frozen=True, slots=True)
class DeletePersonalAccessToken(RequestPayload[None]):
    command: ClassVar = Command.DELETE_PERSONAL_ACCESS_TOKEN

    name: str = field(metadata=wire(NAME))


@dataclass(frozen=True, slots=True)
class GetPersonalAccessTokens(RequestPayload[TokensList]):
    command: ClassVar = Command.GET_PERSONAL_ACCESS_TOKENS
    reply: ClassVar = TokensList
