"""A loopback asyncio server speaking the Iggy 0.9 binary protocol (0.11.0), for tests.

It reproduces what docs/protocol/iggy.md (§2, §3, §5, §7) say a 0.9 server does with each
frame: header validation (invalid headers are dropped without a reply), the login handshake
and its evictions, session and request-number rules with the metadata reply cache,
``request_checksum`` verification, result sections on metadata and offset writes, batch
checksum verification on SendMessages (a malformed batch is dropped without a reply), and
the poll semantics of ``server-0.9.0-edge.5``. Fidelity is checked by driving it with the
official ``apache-iggy`` 0.9.0 client (``tests/integration/iggy/test_double_fidelity.py``).

Two modes (``habits``): ``"notes"`` answers as docs/protocol/iggy.md describes; ``"server"``
adds what a real sharded server (apache/iggy ``server-0.9.0-edge.5``) was seen doing
(docs/iggy.md, "What the real server did"): CreateTopic and CreatePartitions are answered
with the internal operations 64 and 65, replies carry a server-chosen client id, and the
replies to pipelined requests that arrive together are sent in reverse order, as shards
that finish in another order would. ``STREAMWIRE_IGGY_DOUBLE_HABITS`` sets the default.

Faults for client tests: :meth:`IggyDouble.silence` (swallow the next requests),
:meth:`IggyDouble.corrupt_next_reply`, :meth:`IggyDouble.evict`, and a restart
(:meth:`IggyDouble.stop`, then :meth:`IggyDouble.start_again`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import struct
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, Literal, Self, get_args

from streamwire.codec.checksums import xxh3_64
from streamwire.codec.framing import IGGY_HEADER, FrameAccumulator
from streamwire.errors import StreamwireError
from streamwire.iggy.protocol._wire import REQUEST_TYPES
from streamwire.iggy.protocol.constants import (
    COMMANDS,
    PROTOCOL_VERSION,
    Command,
    Operation,
    command_for_operation,
)
from streamwire.iggy.protocol.errors import EvictionReason
from streamwire.iggy.protocol.framing import (
    Request,
    decode_request,
    encode_eviction,
    encode_reply,
    encode_result_section,
)
from streamwire.iggy.protocol.system import LoginRegister, LoginRegisterWithToken, LoginReply
from tests.iggy_double.handlers import Handlers
from tests.iggy_double.state import IggyError, SessionInfo, State

__all__ = ("IggyDouble",)

logger = logging.getLogger(__name__)

SERVER_VERSION = "0.9.0"
Habits = Literal["notes", "server"]
HABITS: Final[tuple[Habits, ...]] = get_args(Habits)
#: Internal operations a real server answers these with (CreateTopicWithAssignments,
#: CreatePartitionsWithAssignments).
_INTERNAL_REPLIES: Final = {Operation.CREATE_TOPIC: 64, Operation.CREATE_PARTITIONS: 65}
_SERVER_CLIENT_BASE: Final = 1 << 112


def default_habits() -> Habits:
    value = os.environ.get("STREAMWIRE_IGGY_DOUBLE_HABITS", "notes")
    for habits in HABITS:
        if value == habits:
            return habits
    raise ValueError(f"STREAMWIRE_IGGY_DOUBLE_HABITS={value!r}: use one of {HABITS}")


_LEGACY_LOGINS = (Command.LOGIN_USER, Command.LOGIN_WITH_PERSONAL_ACCESS_TOKEN)
_U32 = struct.Struct("<I")


class _Conn:
    def __init__(self, info: SessionInfo, writer: asyncio.StreamWriter) -> None:
        self.info = info
        self.writer = writer
        self.held: list[bytes] | None = None
        """Replies to pipelined requests held until the read that brought them is done
        (``habits="server"``), then sent in reverse order."""


class IggyDouble:
    """``async with IggyDouble() as server:`` then connect to ``server.host:server.port``."""

    def __init__(
        self,
        *,
        username: str = "iggy",
        password: str = "iggy",  # noqa: S107 - the default root of a test server
        ssl: Any = None,
        max_frame_size: int = 64 * 1024 * 1024,
        habits: Habits | None = None,
        protocol_version: int = PROTOCOL_VERSION,
    ) -> None:
        self.habits: Habits = default_habits() if habits is None else habits
        self.protocol_version = protocol_version
        """The binary protocol it speaks (packed): logins it does not accept are evicted."""
        self.state = State(username, password)
        self.host = "127.0.0.1"
        self.port = 0
        self._ssl = ssl
        self._max_frame = max_frame_size
        self._server: asyncio.Server | None = None
        self._conns: dict[int, _Conn] = {}
        self._numbers = itertools.count(1)
        self._sessions = itertools.count(7)
        self.handlers = Handlers(self.state, lambda: [c.info for c in self._conns.values()])
        self.requests: list[Request] = []
        """Every well-formed request frame received, in order (for assertions)."""
        self.frames: list[bytes] = []
        """Every complete frame received, raw, in order."""
        self.dropped: list[tuple[Request | None, str]] = []
        """Requests dropped without a reply, and why."""
        self._silence = 0
        self._corrupt: Callable[[bytes], bytes] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self, port: int = 0) -> Self:
        """Listen on ``port`` of loopback (0: an ephemeral one, see :attr:`port`)."""
        self._server = await asyncio.start_server(self._serve, self.host, port, ssl=self._ssl)
        self.port = self._server.sockets[0].getsockname()[1]
        self.handlers.node = (self.host, self.port)
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start_again(self) -> None:
        """After :meth:`stop`: listen again on the same port, with the same state (streams,
        messages, users, consumer offsets), as a server restarted on its data would. Sessions
        do not survive: clients log in again."""
        if self.port == 0:
            raise RuntimeError("start_again() needs a server that was started before")
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, ssl=self._ssl, reuse_address=True
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for conn in list(self._conns.values()):
                conn.writer.close()  # the handlers see the end of stream and return
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=2.0)
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"iggy://iggy:iggy@{self.host}:{self.port}"

    @property
    def connections(self) -> list[SessionInfo]:
        return [c.info for c in self._conns.values()]

    # --- faults --------------------------------------------------------------------------

    def silence(self, requests: int = 1) -> None:
        """Swallow the next ``requests`` requests without replying (a stalled server)."""
        self._silence += requests

    def corrupt_next_reply(self, mutate: Callable[[bytes], bytes]) -> None:
        """Pass the next reply frame through ``mutate`` before sending it."""
        self._corrupt = mutate

    def evict(self, reason: int = EvictionReason.STALE_CLIENT) -> None:
        """Evict every logged-in session with ``reason``."""
        for conn in list(self._conns.values()):
            if conn.info.client:
                self._send(conn, encode_eviction(client=conn.info.client, reason=reason))
                conn.info.user = None
                conn.info.client = 0
                self.handlers.drop_member(conn.info.number)

    # --- the connection loop -------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        peer = writer.get_extra_info("peername")
        info = SessionInfo(next(self._numbers), f"{peer[0]}:{peer[1]}")
        conn = _Conn(info, writer)
        self._conns[info.number] = conn
        frames = FrameAccumulator(IGGY_HEADER, max_frame_size=self._max_frame)
        try:
            reorder = self.habits == "server"
            while data := await reader.read(65536):
                frames.feed(data)
                conn.held = [] if reorder else None
                while (frame := frames.next_frame()) is not None:
                    self._handle_frame(conn, frame)
                held, conn.held = conn.held, None
                for reply in reversed(held or ()):
                    self._send(conn, reply)
                await writer.drain()
        except StreamwireError as exc:  # size < 256 or > max: the server drops the connection
            logger.debug("double: closing %s: %s", info.address, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:  # only stop() cancels; end quietly (3.11 logs it)
            return
        finally:
            del self._conns[info.number]
            self.handlers.drop_member(info.number)
            writer.close()

    def _send(self, conn: _Conn, frame: bytes) -> None:
        if not conn.writer.is_closing():
            conn.writer.write(frame)

    def _handle_frame(self, conn: _Conn, frame: bytes) -> None:
        self.frames.append(frame)
        try:
            request = decode_request(frame)
        except StreamwireError as exc:
            self.dropped.append((None, str(exc)))
            return
        problem = _validate(request)
        if problem:
            self.dropped.append((request, problem))
            return
        self.requests.append(request)
        if self._silence:
            self._silence -= 1
            self.dropped.append((request, "silenced by the test"))
            return
        reply = self._dispatch(conn, request)
        if reply is None:
            return
        if self._corrupt is not None:
            reply, self._corrupt = self._corrupt(reply), None
        if conn.held is not None and Operation(request.operation).pipelinable:
            conn.held.append(reply)  # answered when its "shard" is done: see _serve
        else:
            self._send(conn, reply)

    def _reply(self, req: Request, body: bytes = b"", status: int = 0) -> bytes:
        client, operation = req.client, req.operation
        if self.habits == "server":
            operation = _INTERNAL_REPLIES.get(Operation(operation), operation)
            if req.operation != Operation.REGISTER:
                client = _SERVER_CLIENT_BASE | (req.client & 0xFFFF)
        return encode_reply(
            body,
            client=client,
            request=req.request,
            operation=operation,
            status=status,
            timestamp=req.timestamp,  # echoed, as servers do
            request_checksum=req.request_checksum,
        )

    def _evict(self, conn: _Conn, req: Request, reason: EvictionReason, **window: int) -> None:
        self._send(conn, encode_eviction(client=req.client, reason=reason, **window))
        conn.info.user = None
        conn.info.client = 0

    def _dispatch(self, conn: _Conn, req: Request) -> bytes | None:
        info = conn.info
        if req.request_checksum and req.request_checksum != xxh3_64(req.body):
            return self._reply(req, status=4)
        if req.operation == Operation.REGISTER:
            return self._register(conn, req)
        if req.operation == Operation.NON_REPLICATED:
            code = req.code
            if code in _LEGACY_LOGINS:
                self._evict(conn, req, EvictionReason.MALFORMED_LOGIN)
                return None
            if info.user is None and code != Command.PING:
                return self._reply(req, status=40)
            if code == Command.FLUSH_UNSAVED_BUFFER:
                return self._reply(req, status=5)
            return self._execute(info, req, code, framed=False)
        if info.user is None:
            self._evict(conn, req, EvictionReason.NO_SESSION)
            return None
        if req.session != info.session:
            reason = EvictionReason.SESSION_TOO_LOW
            if req.session > info.session:
                reason = EvictionReason.SESSION_ERROR
            self._evict(conn, req, reason)
            return None
        command = Command.LOGOUT_USER if req.operation == Operation.LOGOUT else None
        command = command or command_for_operation(req.operation)
        if command is None:
            self._evict(conn, req, EvictionReason.INVALID_REQUEST_OPERATION)
            return None
        op = Operation(req.operation)
        if op.is_metadata:
            if req.request in info.replies:  # a retry: the cached reply, not a second apply
                return info.replies[req.request]
            if req.request <= info.last_request:
                return self._reply(req, status=59)
            info.last_request = req.request
        if command == Command.LOGOUT_USER:
            info.user = None
            return self._reply(req)
        reply = self._execute(info, req, command, framed=op.result_framed)
        if op.is_metadata and reply is not None:
            info.replies[req.request] = reply
        return reply

    def _execute(self, info: SessionInfo, req: Request, code: int, *, framed: bool) -> bytes | None:
        cls = REQUEST_TYPES.get(code)
        handler = self.handlers.table.get(code)
        if cls is None or handler is None:
            return self._reply(req, status=3)
        try:
            payload = cls.decode(req.body)
        except StreamwireError as exc:
            if code == Command.SEND_MESSAGES:
                self.dropped.append((req, f"malformed batch: {exc}"))
                return None  # the partition plane drops it without a reply
            return self._reply(req, status=4)
        if code == Command.SEND_MESSAGES and not _batch_ok(payload):
            self.dropped.append((req, "batch count or checksum mismatch"))
            return None
        try:
            body = handler(info, payload)
        except IggyError as exc:
            if framed:
                return self._reply(req, encode_result_section(exc.code))
            return self._reply(req, status=exc.code)
        except StreamwireError as exc:  # a batch that fails checksum verification
            self.dropped.append((req, f"rejected batch: {exc}"))
            return None
        if framed:
            body = encode_result_section() + body
        return self._reply(req, body)

    def _register(self, conn: _Conn, req: Request) -> bytes | None:
        body = req.body
        if len(body) < 4:
            self._evict(conn, req, EvictionReason.MALFORMED_LOGIN)
            return None
        (version,) = _U32.unpack_from(body)
        speaks = self.protocol_version
        low = speaks & ~0x3FF
        if version < low or (version >> 10) > (speaks >> 10):
            self._evict(
                conn, req, EvictionReason.INCOMPATIBLE_PROTOCOL,
                server_version=speaks, server_version_min=low,
            )  # fmt: skip
            return None
        user = None
        rejected = False
        with contextlib.suppress(StreamwireError):
            login = LoginRegister.decode(body)
            user = self.state.authenticate(login.username, login.password)
            rejected = user is None
        if user is None:
            with contextlib.suppress(StreamwireError):
                token = LoginRegisterWithToken.decode(body)
                user = self.state.authenticate_token(token.token)
                if user is None:
                    self._evict(conn, req, EvictionReason.INVALID_TOKEN)
                    return None
        if user is None:
            reason = (
                EvictionReason.INVALID_CREDENTIALS if rejected else EvictionReason.MALFORMED_LOGIN
            )
            self._evict(conn, req, reason)
            return None
        if user.status != 1:
            self._evict(conn, req, EvictionReason.USER_INACTIVE)
            return None
        info = conn.info
        info.user, info.client, info.session = user, req.client, next(self._sessions)
        info.last_request, info.replies = 0, {}
        reply = LoginReply(
            user_id=user.id,
            session=info.session,
            server_protocol_version=self.protocol_version,
            server_version=SERVER_VERSION,
        )
        return self._reply(req, encode_result_section() + reply.encode())


def _validate(req: Request) -> str | None:
    """The typed header checks of §2.2; a failing header is dropped without a reply."""
    if req.client == 0:
        return "client id 0"
    if req.release != 0:
        return f"release {req.release}"
    try:
        op = Operation(req.operation)
    except ValueError:
        return f"unknown operation {req.operation}"
    if op is Operation.RESERVED or 64 <= op <= 127:
        return f"operation {op} not allowed from clients"
    if op is Operation.REGISTER:
        if req.session or req.request:
            return "register with a session or request number"
    elif op is not Operation.NON_REPLICATED and (req.session == 0 or req.request == 0):
        return "replicated request without session or request number"
    if op is Operation.NON_REPLICATED and req.code not in COMMANDS and req.code == 0:
        return "non-replicated request without a command code"
    return None


def _batch_ok(payload: Any) -> bool:
    from streamwire.iggy.protocol.batch import decode_batch

    try:
        header, _ = decode_batch(payload.batch, verify=True)
    except StreamwireError:
        return False
    return bool(header.message_count) and header.message_count == payload.messages_count
