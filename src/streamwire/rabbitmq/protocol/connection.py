"""Connection lifecycle frames: peer properties, SASL, tune, open, close, heartbeat,
command-version exchange, and the code-only response shared by many commands."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Self

from streamwire.codec._structs import I16, I32
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.rabbitmq.protocol._frame import (
    Frame,
    Response,
    r_map,
    r_strs,
    register,
    w_map,
    w_str,
    w_strs,
)
from streamwire.rabbitmq.protocol.constants import RESPONSE_FLAG, CommandKey, ResponseCode

__all__ = (
    "CloseRequest",
    "CommandVersion",
    "ExchangeCommandVersionsRequest",
    "ExchangeCommandVersionsResponse",
    "Heartbeat",
    "OpenRequest",
    "OpenResponse",
    "PeerPropertiesRequest",
    "PeerPropertiesResponse",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "SimpleResponse",
    "Tune",
    "TuneResponse",
)

_K = CommandKey
_OK = ResponseCode.OK


@register()
@dataclass(frozen=True, slots=True)
class PeerPropertiesRequest(Frame):
    KEY: ClassVar[int] = _K.PEER_PROPERTIES
    correlation_id: int
    properties: dict[str, str] = field(default_factory=dict)

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)
        w_map(w, self.properties)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r_map(r))


@register(
    *(
        k | RESPONSE_FLAG
        for k in (
            _K.DECLARE_PUBLISHER,
            _K.DELETE_PUBLISHER,
            _K.SUBSCRIBE,
            _K.UNSUBSCRIBE,
            _K.CREATE,
            _K.DELETE,
            _K.CLOSE,
            _K.CREATE_SUPER_STREAM,
            _K.DELETE_SUPER_STREAM,
        )
    )
)
@dataclass(frozen=True, slots=True)
class SimpleResponse(Response):
    """A response that carries only a code (DeclarePublisher, Subscribe, Create, Close...)."""

    command: int = 0
    KEY: ClassVar[int] = 0

    @property
    def key(self) -> int:
        return self.command | RESPONSE_FLAG

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.u16(), key & ~RESPONSE_FLAG)


@register()
@dataclass(frozen=True, slots=True)
class PeerPropertiesResponse(Response):
    KEY: ClassVar[int] = _K.PEER_PROPERTIES | RESPONSE_FLAG
    properties: dict[str, str] = field(default_factory=dict)

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code)
        w_map(w, self.properties)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, code = r.u32(), r.u16()
        return cls(corr, code, r_map(r) if r.remaining else {})


@register()
@dataclass(frozen=True, slots=True)
class SaslHandshakeRequest(Frame):
    KEY: ClassVar[int] = _K.SASL_HANDSHAKE
    correlation_id: int

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32())


@register()
@dataclass(frozen=True, slots=True)
class SaslHandshakeResponse(Response):
    KEY: ClassVar[int] = _K.SASL_HANDSHAKE | RESPONSE_FLAG
    mechanisms: tuple[str, ...] = ()

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code)
        w_strs(w, self.mechanisms)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, code = r.u32(), r.u16()
        return cls(corr, code, r_strs(r) if r.remaining else ())


@register()
@dataclass(frozen=True, slots=True)
class SaslAuthenticateRequest(Frame):
    KEY: ClassVar[int] = _K.SASL_AUTHENTICATE
    correlation_id: int
    mechanism: str
    data: bytes | None = field(default=None, repr=False)  # credentials: never shown

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)
        w_str(w, self.mechanism)
        w.bytes32(self.data)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.string16(), r.bytes32())


@register()
@dataclass(frozen=True, slots=True)
class SaslAuthenticateResponse(Response):
    """The broker omits the challenge when there is none, and writes it with an **int16**
    length when there is (docs/protocol/rabbitmq-streams.md §1.7)."""

    KEY: ClassVar[int] = _K.SASL_AUTHENTICATE | RESPONSE_FLAG
    challenge: bytes | None = None

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code)
        if self.challenge is not None:
            w.prefixed(self.challenge, I16)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, code = r.u32(), r.u16()
        return cls(corr, code, r.prefixed(I16, "challenge") if r.remaining else None)


@register()
@dataclass(frozen=True, slots=True)
class Tune(Frame):
    """Sent by the broker after authentication (no correlation id)."""

    KEY: ClassVar[int] = _K.TUNE
    frame_max: int
    heartbeat: int

    def encode_body(self, w: Writer) -> None:
        w.u32(self.frame_max).u32(self.heartbeat)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.u32())


@register()
@dataclass(frozen=True, slots=True)
class TuneResponse(Tune):
    """The client's answer to Tune: the agreed values, key 0x8014."""

    KEY: ClassVar[int] = _K.TUNE | RESPONSE_FLAG


@register()
@dataclass(frozen=True, slots=True)
class OpenRequest(Frame):
    KEY: ClassVar[int] = _K.OPEN
    correlation_id: int
    vhost: str

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)
        w_str(w, self.vhost)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.string16())


@register()
@dataclass(frozen=True, slots=True)
class OpenResponse(PeerPropertiesResponse):
    """On failure the broker sends no properties array at all (a 10-byte frame)."""

    KEY: ClassVar[int] = _K.OPEN | RESPONSE_FLAG

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code)
        if self.properties or self.code == _OK:
            w_map(w, self.properties)


@register()
@dataclass(frozen=True, slots=True)
class CloseRequest(Frame):
    """Close, in either direction. The broker always uses correlation id 1."""

    KEY: ClassVar[int] = _K.CLOSE
    correlation_id: int
    code: int
    reason: str

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code)
        w_str(w, self.reason)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.u16(), r.string16("reason"))


@register()
@dataclass(frozen=True, slots=True)
class Heartbeat(Frame):
    KEY: ClassVar[int] = _K.HEARTBEAT


@dataclass(frozen=True, slots=True)
class CommandVersion:
    key: int
    min_version: int
    max_version: int


@register()
@dataclass(frozen=True, slots=True)
class ExchangeCommandVersionsRequest(Frame):
    KEY: ClassVar[int] = _K.EXCHANGE_COMMAND_VERSIONS
    correlation_id: int
    versions: tuple[CommandVersion, ...]

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)
        _w_versions(w, self.versions)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), _r_versions(r))


def _w_versions(w: Writer, versions: tuple[CommandVersion, ...]) -> None:
    w.i32(len(versions))
    for v in versions:
        w.u16(v.key).u16(v.min_version).u16(v.max_version)


def _r_versions(r: Reader) -> tuple[CommandVersion, ...]:
    n = r.count(I32, 6, "command versions")
    return tuple(CommandVersion(r.u16(), r.u16(), r.u16()) for _ in range(n))


@register()
@dataclass(frozen=True, slots=True)
class ExchangeCommandVersionsResponse(Response):
    KEY: ClassVar[int] = _K.EXCHANGE_COMMAND_VERSIONS | RESPONSE_FLAG
    versions: tuple[CommandVersion, ...] = ()

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code)
        _w_versions(w, self.versions)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, code = r.u32(), r.u16()
        return cls(corr, code, _r_versions(r) if r.remaining else ())
