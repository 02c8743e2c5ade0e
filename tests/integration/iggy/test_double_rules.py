"""The double enforces the server rules of docs/protocol/iggy.md §2.2, §2.4 and §2.7, checked with
raw frames over a plain socket: silent drops, checksum stamps, unauthenticated requests,
evictions, the metadata reply cache, unknown codes, malformed batches, oversized frames."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator

import pytest

from streamwire.codec import IGGY_HEADER, FrameAccumulator
from streamwire.iggy.protocol import streams as st
from streamwire.iggy.protocol import system as sy
from streamwire.iggy.protocol.batch import OutgoingMessage, encode_batch
from streamwire.iggy.protocol.constants import Command, Operation
from streamwire.iggy.protocol.errors import EvictionReason
from streamwire.iggy.protocol.framing import (
    Eviction,
    Reply,
    decode_server_frame,
    encode_request,
    split_result_section,
)
from streamwire.iggy.protocol.identifiers import Identifier, Partitioning
from streamwire.iggy.protocol.messaging import SendMessages
from tests.iggy_double import IggyDouble

CLIENT = 0xC0FFEE
NR = Operation.NON_REPLICATED


class Raw:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.frames = FrameAccumulator(IGGY_HEADER, max_frame_size=1 << 26)
        self.session = 0

    def send(self, body: bytes, **header: int) -> None:
        self.writer.write(encode_request(body, **header))  # type: ignore[arg-type]

    async def receive(self, timeout: float = 2.0) -> Reply | Eviction:
        async with asyncio.timeout(timeout):
            while (frame := self.frames.next_frame()) is None:
                data = await self.reader.read(65536)
                if not data:
                    raise EOFError
                self.frames.feed(data)
        return decode_server_frame(frame)

    async def silent(self) -> bool:
        """True if nothing arrives for a short while (a dropped request)."""
        try:
            await self.receive(timeout=0.2)
        except TimeoutError:
            return True
        return False

    async def login(
        self,
        password: str = "iggy",  # noqa: S107 - the double's root password
        version: int | None = None,
    ) -> Reply | Eviction:
        body = sy.LoginRegister(username="iggy", password=password).encode()
        if version is not None:
            body = struct.pack("<I", version) + body[4:]
        self.send(
            body,
            client=CLIENT,
            request=0,
            operation=Operation.REGISTER,
            session=0,
            stamp_checksum=True,
        )
        reply = await self.receive()
        if isinstance(reply, Reply):
            code, payload = split_result_section(reply.body)
            assert code is None
            self.session = sy.LoginReply.decode(payload).session
        return reply


@pytest.fixture
async def raw(double: IggyDouble) -> AsyncIterator[Raw]:
    reader, writer = await asyncio.open_connection(double.host, double.port)
    yield Raw(reader, writer)
    writer.close()


async def test_ping_before_login_and_unauthenticated_reads(raw: Raw) -> None:
    raw.send(b"", client=CLIENT, request=1, operation=NR, session=0, code=Command.PING)
    reply = await raw.receive()
    assert isinstance(reply, Reply)
    assert reply.status == 0
    raw.send(b"", client=CLIENT, request=1, operation=NR, session=0, code=Command.GET_STREAMS)
    reply = await raw.receive()
    assert isinstance(reply, Reply)
    assert reply.status == 40


async def test_replicated_request_before_login_is_evicted(raw: Raw) -> None:
    raw.send(st.CreateStream(name="s").encode(), client=CLIENT, request=1, operation=128, session=1)
    eviction = await raw.receive()
    assert isinstance(eviction, Eviction)
    assert eviction.reason == EvictionReason.NO_SESSION


def _h(client: int, request: int, operation: int, session: int, code: int = 0) -> dict[str, int]:
    return {
        "client": client, "request": request, "operation": operation, "session": session,
        "code": code,
    }  # fmt: skip


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(_h(0, 1, NR, 0, 1), id="client-0"),
        pytest.param(_h(1, 1, 0, 0), id="operation-0"),
        pytest.param(_h(1, 1, 99, 0), id="unknown-op"),
        pytest.param(_h(1, 1, 65, 1), id="internal-op"),
        pytest.param(_h(1, 3, 1, 0), id="register-request"),
        pytest.param(_h(1, 0, 128, 5), id="no-request"),
    ],
)
async def test_invalid_headers_are_dropped_silently(
    raw: Raw, double: IggyDouble, header: dict[str, int]
) -> None:
    raw.send(b"", **header)
    assert await raw.silent()
    assert len(double.dropped) == 1


async def test_checksum_mismatch_is_invalid_format(raw: Raw) -> None:
    await raw.login()
    frame = bytearray(
        encode_request(st.CreateStream(name="s").encode(), client=CLIENT, request=1,
                       operation=128, session=raw.session, stamp_checksum=True)
    )  # fmt: skip
    frame[144] ^= 1
    raw.writer.write(bytes(frame))
    reply = await raw.receive()
    assert isinstance(reply, Reply)
    assert (reply.status, reply.body) == (4, b"")


async def test_login_evictions(double: IggyDouble) -> None:
    for password, version, reason in (
        ("wrong", None, EvictionReason.INVALID_CREDENTIALS),
        ("iggy", 10 << 10, EvictionReason.INCOMPATIBLE_PROTOCOL),  # protocol 0.10.0
        ("iggy", 12 << 10, EvictionReason.INCOMPATIBLE_PROTOCOL),  # protocol 0.12.0
    ):
        reader, writer = await asyncio.open_connection(double.host, double.port)
        raw = Raw(reader, writer)
        eviction = await raw.login(password, version)
        assert isinstance(eviction, Eviction)
        assert eviction.reason == reason
        if reason == EvictionReason.INCOMPATIBLE_PROTOCOL:
            assert (eviction.server_version, eviction.server_version_min) == (11264, 11264)
        writer.close()


async def test_legacy_login_code_is_malformed_login(raw: Raw) -> None:
    raw.send(b"\x04iggy\x04iggy", client=CLIENT, request=1, operation=NR, session=0, code=38)
    eviction = await raw.receive()
    assert isinstance(eviction, Eviction)
    assert eviction.reason == EvictionReason.MALFORMED_LOGIN


async def test_retried_metadata_request_gets_the_cached_reply(raw: Raw, double: IggyDouble) -> None:
    await raw.login()
    body = st.CreateStream(name="once").encode()
    for _ in range(2):
        raw.send(body, client=CLIENT, request=1, operation=128, session=raw.session)
        reply = await raw.receive()
        assert isinstance(reply, Reply)
        code, _ = split_result_section(reply.body)
        assert code is None  # the retry is not applied a second time (no 1012)
    assert [s.name for s in double.state.streams] == ["once"]
    raw.send(body, client=CLIENT, request=2, operation=128, session=raw.session)
    reply = await raw.receive()
    assert isinstance(reply, Reply)
    assert split_result_section(reply.body)[0] == 1012  # a new request number: applied, refused


async def test_unknown_code_flush_and_wrong_session(raw: Raw) -> None:
    await raw.login()
    raw.send(b"", client=CLIENT, request=1, operation=NR, session=raw.session, code=9999)
    reply = await raw.receive()
    assert isinstance(reply, Reply)
    assert reply.status == 3
    raw.send(b"", client=CLIENT, request=1, operation=NR, session=raw.session, code=102)
    reply = await raw.receive()
    assert isinstance(reply, Reply)
    assert reply.status == 5
    raw.send(st.CreateStream(name="x").encode(), client=CLIENT, request=1, operation=128,
             session=raw.session - 1)  # fmt: skip
    eviction = await raw.receive()
    assert isinstance(eviction, Eviction)
    assert eviction.reason == EvictionReason.SESSION_TOO_LOW


async def test_malformed_batches_are_dropped(raw: Raw, double: IggyDouble) -> None:
    await raw.login()
    double.state.create_topic(Identifier(double.state.create_stream("s").id), "t", 1, {})
    batch = bytearray(encode_batch([OutgoingMessage(id=1, payload=b"p", origin_timestamp=1)]))

    def send(count: int, data: bytes) -> SendMessages:
        to = Partitioning.partition_id(0)
        return SendMessages(
            stream=Identifier("s"), topic=Identifier("t"), partitioning=to,
            messages_count=count, batch=data,
        )  # fmt: skip

    good = send(1, bytes(batch))
    batch[-1] ^= 0xFF  # the payload no longer matches its checksum
    bad = send(1, bytes(batch))
    miscounted = send(2, bytes(good.batch))
    for request, payload in ((1, bad), (2, miscounted)):
        raw.send(
            payload.encode(), client=CLIENT, request=request, operation=160, session=raw.session
        )
        assert await raw.silent()
    raw.send(good.encode(), client=CLIENT, request=3, operation=160, session=raw.session)
    reply = await raw.receive()
    assert isinstance(reply, Reply)
    assert reply.status == 0
    assert double.state.streams[0].topics[0].partitions[0].messages_count == 1


async def test_undersized_frame_closes_the_connection(raw: Raw) -> None:
    frame = bytearray(
        encode_request(b"", client=CLIENT, request=1, operation=NR, session=0, code=1)
    )
    frame[48:52] = (100).to_bytes(4, "little")
    raw.writer.write(bytes(frame))
    with pytest.raises(EOFError):
        await raw.receive()
