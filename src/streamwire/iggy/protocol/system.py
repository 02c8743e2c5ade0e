"""Session and system payloads: login (Register), logout, ping, stats, clients, cluster
metadata (docs/protocol/iggy.md §5.1, §5.2, §5.12, §3 code 12)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Final

from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.iggy.protocol._wire import (
    BYTES32,
    F32,
    NAME,
    STR8,
    STR32,
    U8,
    U16,
    U32,
    U64,
    Counted,
    Nested,
    Payload,
    RequestPayload,
    ToEnd,
    wire,
)
from streamwire.iggy.protocol.constants import PROTOCOL_VERSION, Command

__all__ = (
    "SDK_NAME",
    "SDK_VERSION",
    "CacheMetric",
    "ClientDetails",
    "ClientInfo",
    "ClientsList",
    "ClusterMetadata",
    "ClusterNode",
    "GetClient",
    "GetClients",
    "GetClusterMetadata",
    "GetMe",
    "GetStats",
    "GroupMembership",
    "LoginRegister",
    "LoginRegisterWithToken",
    "LoginReply",
    "LogoutUser",
    "Ping",
    "Stats",
)

SDK_NAME: Final = "streamwire"
SDK_VERSION: Final = "0.1.0"


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginReply(Payload):
    """Register reply payload (after the result section): who we are and the session."""

    user_id: int = field(metadata=wire(U32))
    session: int = field(metadata=wire(U64))
    server_protocol_version: int = field(metadata=wire(U32))
    server_version: str = field(metadata=wire(NAME))


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginRegister(RequestPayload[LoginReply]):
    """Code 40 (operation 1): version prefix, SDK identity, credentials, context."""

    command: ClassVar = Command.LOGIN_REGISTER
    reply: ClassVar = LoginReply

    username: str = field(metadata=wire(NAME))
    password: str = field(repr=False, metadata=wire(STR8))
    protocol_version: int = field(default=PROTOCOL_VERSION, metadata=wire(U32))
    sdk_name: str = field(default=SDK_NAME, metadata=wire(NAME))
    sdk_version: str = field(default=SDK_VERSION, metadata=wire(NAME))
    context: bytes = field(default=b"", metadata=wire(BYTES32))

    def write(self, w: Writer) -> None:
        w.u32le(self.protocol_version)
        NAME.write(w, self.sdk_name)
        NAME.write(w, self.sdk_version)
        NAME.write(w, self.username)
        STR8.write(w, self.password)
        BYTES32.write(w, self.context)

    @classmethod
    def read(cls, r: Reader) -> LoginRegister:
        version = r.u32le()
        sdk_name, sdk_version = NAME.read(r), NAME.read(r)
        username, password = NAME.read(r), STR8.read(r)
        return cls(
            username=username,
            password=password,
            protocol_version=version,
            sdk_name=sdk_name,
            sdk_version=sdk_version,
            context=BYTES32.read(r),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginRegisterWithToken(RequestPayload[LoginReply]):
    """Code 45 (operation 1): version prefix, SDK identity, a personal access token."""

    command: ClassVar = Command.LOGIN_REGISTER_WITH_PAT
    reply: ClassVar = LoginReply

    protocol_version: int = field(default=PROTOCOL_VERSION, metadata=wire(U32))
    sdk_name: str = field(default=SDK_NAME, metadata=wire(NAME))
    sdk_version: str = field(default=SDK_VERSION, metadata=wire(NAME))
    token: str = field(repr=False, metadata=wire(NAME))
    context: bytes = field(default=b"", metadata=wire(BYTES32))


@dataclass(frozen=True, slots=True)
class Ping(RequestPayload[None]):
    """Code 1: empty both ways; the only command allowed before login."""

    command: ClassVar = Command.PING


@dataclass(frozen=True, slots=True)
class LogoutUser(RequestPayload[None]):
    """Code 39 (operation 3): empty both ways."""

    command: ClassVar = Command.LOGOUT_USER


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheMetric(Payload):
    stream_id: int = field(metadata=wire(U32))
    topic_id: int = field(metadata=wire(U32))
    partition_id: int = field(metadata=wire(U32))
    hits: int = field(metadata=wire(U64))
    misses: int = field(metadata=wire(U64))
    hit_ratio: float = field(metadata=wire(F32))


@dataclass(frozen=True, slots=True, kw_only=True)
class Stats(Payload):
    """GET_STATS reply (§5.12)."""

    process_id: int = field(metadata=wire(U32))
    cpu_usage: float = field(metadata=wire(F32))
    total_cpu_usage: float = field(metadata=wire(F32))
    memory_usage: int = field(metadata=wire(U64))
    total_memory: int = field(metadata=wire(U64))
    available_memory: int = field(metadata=wire(U64))
    run_time: int = field(metadata=wire(U64))
    start_time: int = field(metadata=wire(U64))
    read_bytes: int = field(metadata=wire(U64))
    written_bytes: int = field(metadata=wire(U64))
    messages_size_bytes: int = field(metadata=wire(U64))
    streams_count: int = field(metadata=wire(U32))
    topics_count: int = field(metadata=wire(U32))
    partitions_count: int = field(metadata=wire(U32))
    segments_count: int = field(metadata=wire(U32))
    messages_count: int = field(metadata=wire(U64))
    clients_count: int = field(metadata=wire(U32))
    consumer_groups_count: int = field(metadata=wire(U32))
    hostname: str = field(metadata=wire(STR32))
    os_name: str = field(metadata=wire(STR32))
    os_version: str = field(metadata=wire(STR32))
    kernel_version: str = field(metadata=wire(STR32))
    iggy_server_version: str = field(metadata=wire(STR32))
    iggy_server_semver: int = field(metadata=wire(U32))
    cache_metrics: tuple[CacheMetric, ...] = field(
        default=(), metadata=wire(Counted(Nested(CacheMetric), 32))
    )
    threads_count: int = field(default=0, metadata=wire(U32))
    free_disk_space: int = field(default=0, metadata=wire(U64))
    total_disk_space: int = field(default=0, metadata=wire(U64))


@dataclass(frozen=True, slots=True)
class GetStats(RequestPayload[Stats]):
    command: ClassVar = Command.GET_STATS
    reply: ClassVar = Stats


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientInfo(Payload):
    """Client header (GET_CLIENTS elements). ``transport``: 1 tcp, 2 quic, 4 ws."""

    client_id: int = field(metadata=wire(U32))
    user_id: int = field(metadata=wire(U32))
    transport: int = field(metadata=wire(U8))
    address: str = field(metadata=wire(STR32))
    consumer_groups_count: int = field(metadata=wire(U32))


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMembership(Payload):
    stream_id: int = field(metadata=wire(U32))
    topic_id: int = field(metadata=wire(U32))
    group_id: int = field(metadata=wire(U32))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientDetails(Payload):
    """GET_ME / GET_CLIENT reply: the client header, then one entry per group."""

    client: ClientInfo = field(metadata=wire(Nested(ClientInfo)))
    consumer_groups: tuple[GroupMembership, ...] = field(
        metadata=wire(ToEnd(Nested(GroupMembership)))
    )

    def write(self, w: Writer) -> None:
        ClientInfo(
            client_id=self.client.client_id,
            user_id=self.client.user_id,
            transport=self.client.transport,
            address=self.client.address,
            consumer_groups_count=len(self.consumer_groups),
        ).write(w)
        for group in self.consumer_groups:
            group.write(w)

    @classmethod
    def read(cls, r: Reader) -> ClientDetails:
        client = ClientInfo.read(r)
        if client.consumer_groups_count * 12 > r.remaining:
            raise r.error(f"{client.consumer_groups_count} consumer groups")
        groups = tuple(GroupMembership.read(r) for _ in range(client.consumer_groups_count))
        return cls(client=client, consumer_groups=groups)


@dataclass(frozen=True, slots=True)
class GetMe(RequestPayload["ClientDetails | None"]):
    command: ClassVar = Command.GET_ME
    reply: ClassVar = ClientDetails
    empty_is_none: ClassVar = True


@dataclass(frozen=True, slots=True)
class GetClient(RequestPayload["ClientDetails | None"]):
    command: ClassVar = Command.GET_CLIENT
    reply: ClassVar = ClientDetails
    empty_is_none: ClassVar = True

    client_id: int = field(metadata=wire(U32))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientsList(Payload):
    clients: tuple[ClientInfo, ...] = field(default=(), metadata=wire(ToEnd(Nested(ClientInfo))))


@dataclass(frozen=True, slots=True)
class GetClients(RequestPayload[ClientsList]):
    command: ClassVar = Command.GET_CLIENTS
    reply: ClassVar = ClientsList


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterNode(Payload):
    name: str = field(metadata=wire(STR32))
    ip: str = field(metadata=wire(STR32))
    tcp_port: int = field(metadata=wire(U16))
    quic_port: int = field(metadata=wire(U16))
    http_port: int = field(metadata=wire(U16))
    websocket_port: int = field(metadata=wire(U16))
    role: int = field(metadata=wire(U8))
    status: int = field(metadata=wire(U8))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterMetadata(Payload):
    """GET_CLUSTER_METADATA reply (the released SDKs probe it after login)."""

    name: str = field(metadata=wire(STR32))
    nodes: tuple[ClusterNode, ...] = field(
        default=(), metadata=wire(Counted(Nested(ClusterNode), 18))
    )


@dataclass(frozen=True, slots=True)
class GetClusterMetadata(RequestPayload["ClusterMetadata | None"]):
    command: ClassVar = Command.GET_CLUSTER_METADATA
    reply: ClassVar = ClusterMetadata
    empty_is_none: ClassVar = True
