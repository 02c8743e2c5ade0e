"""Checks that the brokers started by ``integration/brokers.sh`` really answer.

These talk to the brokers with hand-built bytes or peer libraries only, so they stay valid while
the SDK itself is being written. Each test skips (with the harness's recorded reason) when its
broker is not running.
"""

from __future__ import annotations

import socket
import struct
import uuid
from pathlib import Path

import nats
import pytest

from tests.brokers import BrokerInfo, require

pytestmark = pytest.mark.integration

_TIMEOUT = 10.0

# RabbitMQ Streams command keys (docs/protocol/rabbitmq-streams.md §1.4)
_PEER_PROPERTIES = 0x0011
_SASL_HANDSHAKE = 0x0012
_SASL_AUTHENTICATE = 0x0013
_TUNE = 0x0014
_OPEN = 0x0015
_CLOSE = 0x0016
_RESPONSE = 0x8000
_OK = 0x0001


# ---------------------------------------------------------------------------------------------
# RabbitMQ Streams, by hand (big-endian frames: size u32, key u16, version u16, ...)


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _request(key: int, correlation_id: int, payload: bytes = b"") -> bytes:
    body = struct.pack(">HHI", key, 1, correlation_id) + payload
    return struct.pack(">I", len(body)) + body


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError(f"broker closed the socket after {len(chunks)}/{size} bytes")
        chunks += chunk
    return bytes(chunks)


def _recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">I", _recv_exact(sock, 4))
    return _recv_exact(sock, size)


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str:
        size = self.take(">h")
        if size < 0:
            return ""
        raw = self.data[self.pos : self.pos + size]
        self.pos += size
        return raw.decode()

    def properties(self) -> dict[str, str]:
        count = self.take(">i")
        return {self.string(): self.string() for _ in range(count)}


def _response(frame: bytes, key: int, correlation_id: int) -> _Cursor:
    """Checks key, correlation id and OK code of a response; returns a cursor after the code."""
    cursor = _Cursor(frame)
    got_key = cursor.take(">H")
    cursor.take(">H")  # version
    got_correlation = cursor.take(">I")
    code = cursor.take(">H")
    assert got_key == key | _RESPONSE, (
        f"response key {got_key:#06x}, expected {key | _RESPONSE:#06x}"
    )
    assert got_correlation == correlation_id
    assert code == _OK, f"response code {code:#06x} for key {key:#06x}"
    return cursor


def _peer_properties(sock: socket.socket) -> dict[str, str]:
    frame = _request(_PEER_PROPERTIES, 1, struct.pack(">i", 0))
    assert frame.hex() == "0000000c0011000100000001" + "00000000"
    sock.sendall(frame)
    return _response(_recv_frame(sock), _PEER_PROPERTIES, 1).properties()


@pytest.mark.rabbitmq
@pytest.mark.parametrize(
    ("name", "version_prefix"),
    [("rabbitmq", "4.3."), ("rabbitmq40", "4.0."), ("rabbitmq310", "3.10.")],
)
def test_rabbitmq_peer_properties(name: str, version_prefix: str) -> None:
    broker = require(name)
    if broker.extra.get("BACKEND") == "docker" and name == "rabbitmq":
        version_prefix = "4."  # docker-compose.yml still pins 4.0.5 (docs/brokers.md)
    with socket.create_connection((broker.host, broker.ports["stream"]), timeout=_TIMEOUT) as sock:
        props = _peer_properties(sock)
    assert props.get("product") == "RabbitMQ", props
    assert props.get("version", "").startswith(version_prefix), props
    assert broker.version.startswith(version_prefix), broker


@pytest.mark.rabbitmq
@pytest.mark.parametrize("name", ["rabbitmq", "rabbitmq40", "rabbitmq310"])
def test_rabbitmq_open_advertises_localhost(name: str) -> None:
    """Authenticates as guest and opens vhost "/": the harness sets stream.advertised_host."""
    broker = require(name)
    stream_port = broker.ports["stream"]
    with socket.create_connection((broker.host, stream_port), timeout=_TIMEOUT) as sock:
        _peer_properties(sock)

        sock.sendall(_request(_SASL_HANDSHAKE, 2))
        cursor = _response(_recv_frame(sock), _SASL_HANDSHAKE, 2)
        mechanisms = [cursor.string() for _ in range(cursor.take(">i"))]
        assert "PLAIN" in mechanisms

        credentials = b"\0guest\0guest"
        payload = _string("PLAIN") + struct.pack(">i", len(credentials)) + credentials
        sock.sendall(_request(_SASL_AUTHENTICATE, 3, payload))
        _response(_recv_frame(sock), _SASL_AUTHENTICATE, 3)

        tune = _Cursor(_recv_frame(sock))
        assert tune.take(">H") == _TUNE
        tune.take(">H")
        frame_max, heartbeat = tune.take(">I"), tune.take(">I")
        body = struct.pack(">HHII", _TUNE | _RESPONSE, 1, frame_max, heartbeat)
        sock.sendall(struct.pack(">I", len(body)) + body)

        sock.sendall(_request(_OPEN, 4, _string("/")))
        connection_properties = _response(_recv_frame(sock), _OPEN, 4).properties()
        assert connection_properties.get("advertised_host") == "localhost"
        assert connection_properties.get("advertised_port") == str(stream_port)

        sock.sendall(_request(_CLOSE, 5, struct.pack(">H", _OK) + _string("test done")))
        _response(_recv_frame(sock), _CLOSE, 5)


# ---------------------------------------------------------------------------------------------
# NATS


@pytest.mark.nats
async def test_nats_publish_subscribe_round_trip() -> None:
    broker = require("nats")
    client = await nats.connect(broker.url, connect_timeout=_TIMEOUT, allow_reconnect=False)
    try:
        subject = f"streamwire.harness.{uuid.uuid4().hex}"
        subscription = await client.subscribe(subject)
        await client.flush(timeout=int(_TIMEOUT))
        await client.publish(subject, b"ping", headers={"X-Streamwire": "harness"})
        message = await subscription.next_msg(timeout=_TIMEOUT)
        assert message.subject == subject
        assert message.data == b"ping"
        assert message.headers == {"X-Streamwire": "harness"}
        await subscription.unsubscribe()
    finally:
        await client.close()


# ---------------------------------------------------------------------------------------------
# Liftbridge


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """Top-level protobuf fields as (number, varint value or length-delimited bytes)."""
    fields: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, pos = _varint(data, pos)
            fields.append((number, value))
        elif wire_type == 2:
            size, pos = _varint(data, pos)
            fields.append((number, data[pos : pos + size]))
            pos += size
        else:
            raise AssertionError(f"unexpected protobuf wire type {wire_type}")
    return fields


def _liftbridge_log(broker: BrokerInfo) -> str:
    log = broker.extra.get("LOG")
    if not log:
        pytest.skip("the liftbridge env file records no LOG (docker backend): log check skipped")
    return Path(log).read_text(encoding="utf-8", errors="replace")


@pytest.mark.liftbridge
def test_liftbridge_grpc_port_and_metadata_leader() -> None:
    broker = require("liftbridge")
    with socket.create_connection((broker.host, broker.ports["grpc"]), timeout=_TIMEOUT):
        pass
    assert "Server became metadata leader" in _liftbridge_log(broker)


@pytest.mark.liftbridge
def test_liftbridge_fetch_metadata_lists_this_server() -> None:
    """A raw gRPC FetchMetadata (empty request) answers with this server as the only broker."""
    import grpc

    broker = require("liftbridge")
    target = f"{broker.host}:{broker.ports['grpc']}"
    with grpc.insecure_channel(target) as channel:
        fetch_metadata = channel.unary_unary("/proto.API/FetchMetadata")
        response: bytes = fetch_metadata(b"", timeout=_TIMEOUT)
    brokers = [value for number, value in _fields(response) if number == 1]
    assert len(brokers) == 1, response.hex()
    assert isinstance(brokers[0], bytes)
    info = dict(_fields(brokers[0]))
    assert info.get(3) == broker.ports["grpc"], info
    if "SERVER_ID" in broker.extra:
        assert info.get(1) == broker.extra["SERVER_ID"].encode(), info


# ---------------------------------------------------------------------------------------------
# Iggy: the harness only uses a server binary it is given (IGGY_SERVER_BIN)


def _iggy_up(tmp_path: Path, server_bin: str | None) -> tuple[int, str]:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "IGGY_SERVER_BIN"}
    env.update(STREAMWIRE_BROKERS_DIR=str(tmp_path), STREAMWIRE_BROKERS_BACKEND="native")
    if server_bin is not None:
        env["IGGY_SERVER_BIN"] = server_bin
    harness = Path(__file__).resolve().parents[2] / "integration" / "brokers.sh"
    done = subprocess.run(
        [str(harness), "up", "iggy"], env=env, capture_output=True, text=True, timeout=60
    )
    reason = (tmp_path / "iggy.unavailable").read_text(encoding="utf-8").splitlines()[0]
    return done.returncode, reason


def test_iggy_without_a_server_binary_is_unavailable_with_the_way_to_get_one(
    tmp_path: Path,
) -> None:
    rc, reason = _iggy_up(tmp_path, None)
    assert rc == 1
    assert "IGGY_SERVER_BIN" in reason
    assert not (tmp_path / "iggy.env").exists()


def test_iggy_server_bin_must_be_an_executable(tmp_path: Path) -> None:
    not_a_program = tmp_path / "iggy-server"
    not_a_program.write_text("just text\n", encoding="utf-8")
    rc, reason = _iggy_up(tmp_path, str(not_a_program))
    assert rc == 1
    assert reason == f"IGGY_SERVER_BIN={not_a_program} is not an executable file"


def test_a_real_iggy_server_from_the_harness_answers_a_ping() -> None:
    info = require("iggy")  # skips with the harness's reason when there is none
    # a bare Ping (code 1, operation 2) before login, built by hand: 256-byte header
    header = bytearray(256)
    struct.pack_into("<I", header, 48, 256)
    header[60] = 5  # request
    struct.pack_into("<QQ", header, 128, 1, 0)  # client id 1
    struct.pack_into("<QB", header, 168, 1, 2)  # request 1, operation NonReplicated
    struct.pack_into("<I", header, 196, 1)  # code PING
    with socket.create_connection((info.host, info.port), timeout=_TIMEOUT) as sock:
        sock.sendall(bytes(header))
        reply = b""
        while len(reply) < 256:
            chunk = sock.recv(256 - len(reply))
            assert chunk, "the server closed the connection"
            reply += chunk
    assert reply[60] == 8  # a reply
    assert struct.unpack_from("<I", reply, 216)[0] == 0  # status ok
