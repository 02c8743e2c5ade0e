"""RabbitMQ Streams over TLS (the harness's stream TLS listener, 5551) and SASL EXTERNAL.

``integration/brokers.sh up rabbitmq`` generates a throwaway CA, a server certificate for
``localhost``/``127.0.0.1`` and a client certificate with CN ``streamwire-client`` (the user
SASL EXTERNAL logs in as), and records them in ``.brokers/rabbitmq.env`` (``TLS_*``,
``EXTERNAL_USER``). Without those facts (docker backend, TLS listener down) every test here skips.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import struct
import subprocess
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

import streamwire
import streamwire.rabbitmq as rmq
from streamwire.errors import AuthenticationError, ConnectError, ServerError, StreamwireError
from streamwire.rabbitmq import ConnectionSettings, StreamInfo, TLSOptions
from streamwire.rabbitmq.protocol import Frame, ResponseCode, decode_frame, encode_frame
from streamwire.rabbitmq.protocol.connection import (
    PeerPropertiesRequest,
    PeerPropertiesResponse,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from streamwire.rabbitmq.protocol.errors import AuthenticationFailure
from streamwire.rabbitmq.protocol.events import HandshakeFailed
from streamwire.rabbitmq.protocol.machine import StreamsConnection
from streamwire.transport.tcp import TcpStream, open_tcp
from tests.brokers import BrokerInfo, require, skip_missing

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]

_TLS_KEYS = ("TLS_PORT", "TLS_URL", "TLS_CA", "TLS_CLIENT_CERT", "TLS_CLIENT_KEY")
_TIMEOUT = 10.0
#: X509_V_ERR_HOSTNAME_MISMATCH
_HOSTNAME_MISMATCH = 62


@dataclass(frozen=True)
class TLSFacts:
    """The harness's TLS facts for the ``rabbitmq`` broker."""

    broker: BrokerInfo
    #: The name the server certificate is for (and the broker advertises).
    host: str
    port: int
    url: str
    ca: str
    client_cert: str
    client_key: str
    external_user: str | None
    user: str
    password: str

    @property
    def plain_port(self) -> int:
        return self.broker.ports["stream"]

    def ca_only(self, server_hostname: str | None = None) -> TLSOptions:
        return TLSOptions(ca_file=self.ca, server_hostname=server_hostname)

    def with_client_cert(self) -> TLSOptions:
        return TLSOptions(ca_file=self.ca, cert_file=self.client_cert, key_file=self.client_key)


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def tls() -> TLSFacts:
    info = require("rabbitmq")
    missing = [key for key in _TLS_KEYS if not info.extra.get(key)]
    if missing:
        skip_missing(
            f"broker rabbitmq records no TLS facts ({', '.join(missing)} missing from "
            ".brokers/rabbitmq.env): the docker backend has no TLS listener, or the native "
            "broker's TLS listener did not start (see .brokers/rabbitmq/harness.log); "
            "run integration/brokers.sh up rabbitmq"
        )
    extra = info.extra
    for key in ("TLS_CA", "TLS_CLIENT_CERT", "TLS_CLIENT_KEY"):
        if not Path(extra[key]).is_file():
            skip_missing(f"{key}={extra[key]} recorded by the harness does not exist")
    port = int(extra["TLS_PORT"])
    if not _answers(info.host, port):
        skip_missing(f"nothing answers on the recorded TLS port {info.host}:{port}")
    return TLSFacts(
        broker=info,
        host=extra.get("ADVERTISED_TLS_HOST", "localhost"),
        port=port,
        url=extra["TLS_URL"],
        ca=extra["TLS_CA"],
        client_cert=extra["TLS_CLIENT_CERT"],
        client_key=extra["TLS_CLIENT_KEY"],
        external_user=extra.get("EXTERNAL_USER") or None,
        user=extra.get("USER", "guest"),
        password=extra.get("PASSWORD", "guest"),
    )


@pytest.fixture(scope="module")
def external_user(tls: TLSFacts) -> str:
    if tls.external_user is None:
        skip_missing("the harness recorded no EXTERNAL_USER (creating it failed, see harness.log)")
    return tls.external_user


EXTERNAL = ConnectionSettings(mechanism="EXTERNAL", username=None, password=None)


async def _round_trip(client: rmq.Client, values: list[bytes]) -> tuple[list[bytes], StreamInfo]:
    """Create a stream, publish ``values`` (producer on the leader), read them back, delete it."""
    stream = f"sw-tls-{uuid.uuid4().hex[:12]}"
    await client.create_stream(stream)
    try:
        info = await client.stream_info(stream)
        async with client.producer(stream) as producer:
            await producer.send_batch(values)
            await producer.flush()
        got: list[bytes] = []
        async with client.consumer(stream, offset="first") as consumer:
            while len(got) < len(values):
                batch = await consumer.next_batch(len(values) - len(got), timeout=_TIMEOUT)
                assert batch, f"only {len(got)} of {len(values)} messages arrived"
                got += [m.value for m in batch]
        return got, info
    finally:
        await client.delete_stream(stream, missing_ok=True)


# --- raw protocol helpers ---------------------------------------------------------------


async def _read_frame(stream: TcpStream) -> Frame:
    (size,) = struct.unpack(">I", await stream.read_exactly(4, timeout=_TIMEOUT))
    return decode_frame(await stream.read_exactly(size, timeout=_TIMEOUT))


async def _offered_mechanisms(port: int, tls: TLSOptions | None) -> tuple[str, ...]:
    """What the broker answers to SaslHandshake on ``localhost:port``."""
    stream = await open_tcp("localhost", port, tls=tls, timeout=_TIMEOUT)
    try:
        await stream.send(encode_frame(PeerPropertiesRequest(1, {"product": "sw-test"})))
        peer = await _read_frame(stream)
        assert isinstance(peer, PeerPropertiesResponse)
        assert peer.code == ResponseCode.OK
        await stream.send(encode_frame(SaslHandshakeRequest(2)))
        handshake = await _read_frame(stream)
        assert isinstance(handshake, SaslHandshakeResponse)
        assert handshake.code == ResponseCode.OK
        return handshake.mechanisms
    finally:
        stream.abort()


def _split_frames(data: bytes) -> list[Frame]:
    frames: list[Frame] = []
    while data:
        (size,) = struct.unpack_from(">I", data)
        frames.append(decode_frame(data[4 : 4 + size]))
        data = data[4 + size :]
    return frames


# --- TLS with PLAIN ---------------------------------------------------------------------


async def test_plain_login_over_tls_round_trip(tls: TLSFacts) -> None:
    client = await rmq.connect(
        host=tls.host,
        port=tls.port,
        username=tls.user,
        password=tls.password,
        tls=tls.ca_only(),
        timeout=_TIMEOUT,
    )
    async with client:
        assert client.server_properties["product"] == "RabbitMQ"
        values = [b"tls-one", b"tls-two", "tls-drei-ü".encode()]
        got, info = await _round_trip(client, values)
    assert got == values
    # On a TLS connection the broker advertises its TLS listener (stream.advertised_tls_*), so
    # the producer's leader connection is a TLS connection to the certificate's host name.
    assert info.leader == (tls.host, tls.port)


async def test_tls_url_scheme(tls: TLSFacts) -> None:
    assert tls.url.startswith("rabbitmq-stream+tls://")
    async with await rmq.connect(tls.url, tls=tls.ca_only(), timeout=_TIMEOUT) as client:
        got, info = await _round_trip(client, [b"via the +tls scheme"])
    assert got == [b"via the +tls scheme"]
    assert info.leader == (tls.host, tls.port)


async def test_unified_entry_point_with_tls(tls: TLSFacts) -> None:
    async with streamwire.connect(tls.url, tls=tls.ca_only(), timeout=_TIMEOUT) as client:
        assert isinstance(client, rmq.Client)
        assert client.server_properties["product"] == "RabbitMQ"


async def test_ip_address_matches_the_ip_san(tls: TLSFacts) -> None:
    # The server certificate carries IP:127.0.0.1, and the hostname check uses the address.
    async with await rmq.connect(
        host="127.0.0.1", port=tls.port, tls=tls.ca_only(), timeout=_TIMEOUT
    ) as client:
        got, info = await _round_trip(client, [b"by address"])
    assert got == [b"by address"]
    assert info.leader == (tls.host, tls.port)


@pytest.mark.parametrize("how", ["url-only", "tls=True", "TLSOptions()"])
async def test_verification_is_on_by_default(tls: TLSFacts, how: str) -> None:
    """Without the harness CA the throwaway certificate does not verify."""
    option: TLSOptions | bool | None = {
        "url-only": None,
        "tls=True": True,
        "TLSOptions()": TLSOptions(),
    }[how]
    with pytest.raises(streamwire.ConnectError) as info:
        await rmq.connect(tls.url, tls=option, timeout=_TIMEOUT)
    cause = info.value.__cause__
    assert isinstance(cause, ssl.SSLCertVerificationError), repr(cause)
    assert "certificate verify failed" in str(cause)
    assert f":{tls.port}" in str(info.value)


async def test_hostname_mismatch_is_refused(tls: TLSFacts) -> None:
    with pytest.raises(streamwire.ConnectError) as info:
        await rmq.connect(
            host="127.0.0.1",
            port=tls.port,
            tls=tls.ca_only(server_hostname="wrong.example"),
            timeout=_TIMEOUT,
        )
    cause = info.value.__cause__
    assert isinstance(cause, ssl.SSLCertVerificationError), repr(cause)
    assert cause.verify_code == _HOSTNAME_MISMATCH
    assert "wrong.example" in cause.verify_message


async def test_server_hostname_overrides_the_dialled_address(tls: TLSFacts) -> None:
    async with await rmq.connect(
        host="127.0.0.1",
        port=tls.port,
        tls=tls.ca_only(server_hostname=tls.host),
        timeout=_TIMEOUT,
    ) as client:
        got, _ = await _round_trip(client, [b"sni"])
    assert got == [b"sni"]


# --- SASL mechanisms per listener -------------------------------------------------------


async def test_mechanisms_offered_per_listener(tls: TLSFacts) -> None:
    """EXTERNAL is offered on TLS connections only, even without a client certificate
    (rabbit_auth_mechanism_ssl offers it whenever the socket is TLS)."""
    plain = await _offered_mechanisms(tls.plain_port, None)
    no_cert = await _offered_mechanisms(tls.port, tls.ca_only())
    with_cert = await _offered_mechanisms(tls.port, tls.with_client_cert())
    assert "EXTERNAL" not in plain
    assert {"PLAIN", "AMQPLAIN"} <= set(plain)
    assert "EXTERNAL" in no_cert
    assert "EXTERNAL" in with_cert
    # Besides EXTERNAL, the TLS listener offers what the plain one does.
    assert set(no_cert) - {"EXTERNAL"} == set(plain)
    assert set(with_cert) == set(no_cert)


async def test_external_over_plain_tcp_is_refused_before_sending_credentials(
    tls: TLSFacts,
) -> None:
    offered = await _offered_mechanisms(tls.plain_port, None)
    # The public API: a local AuthenticationError, not a broker answer (no ServerError code).
    with pytest.raises(AuthenticationError) as info:
        await rmq.connect(
            host=tls.broker.host, port=tls.plain_port, settings=EXTERNAL, timeout=_TIMEOUT
        )
    assert not isinstance(info.value, ServerError)
    assert "EXTERNAL" in str(info.value)
    assert f"offered: {', '.join(offered)}" in str(info.value)

    # The machine over a real socket: nothing after SaslHandshake goes out.
    stream = await open_tcp(tls.broker.host, tls.plain_port, tls=None, timeout=_TIMEOUT)
    machine = StreamsConnection(EXTERNAL)
    sent: list[Frame] = []
    failure: StreamwireError | None = None
    try:
        machine.start(0.0)
        while failure is None:
            out = machine.data_to_send()
            sent += _split_frames(out)
            if out:
                await stream.send(out, timeout=_TIMEOUT)
            data = await stream.read(timeout=_TIMEOUT)
            assert data, "the broker closed the connection"
            for event in machine.receive_data(data, 0.0):
                if isinstance(event, HandshakeFailed):
                    failure = event.error
    finally:
        stream.abort()
    assert isinstance(failure, AuthenticationError)
    assert machine.data_to_send() == b""
    assert [type(f) for f in sent] == [PeerPropertiesRequest, SaslHandshakeRequest]
    assert not any(isinstance(f, SaslAuthenticateRequest) for f in sent)


# --- SASL EXTERNAL ----------------------------------------------------------------------


async def test_external_login_with_the_client_certificate(
    tls: TLSFacts, external_user: str
) -> None:
    async with await rmq.connect(
        host=tls.host,
        port=tls.port,
        tls=tls.with_client_cert(),
        settings=EXTERNAL,
        timeout=_TIMEOUT,
    ) as client:
        assert client.settings.mechanism == "EXTERNAL"
        assert client.settings.username is None
        values = [b"external-1", b"external-2"]
        got, info = await _round_trip(client, values)
    assert got == values
    assert info.leader == (tls.host, tls.port)


async def test_external_from_the_url_query(tls: TLSFacts, external_user: str) -> None:
    """``?mechanism=EXTERNAL`` without user info; the +tls scheme defaults to port 5551."""
    url = f"rabbitmq-stream+tls://{tls.host}:{tls.port}/?mechanism=EXTERNAL"
    async with await rmq.connect(url, tls=tls.with_client_cert(), timeout=_TIMEOUT) as client:
        assert client.settings.mechanism == "EXTERNAL"
        got, _ = await _round_trip(client, [b"external via url"])
    assert got == [b"external via url"]


async def _ctl(tls: TLSFacts, *args: str) -> str | None:
    """Runs the harness's rabbitmqctl wrapper (native backend, as root), or returns None."""
    ctl = tls.broker.extra.get("CTL")
    if not ctl or not os.access(ctl, os.X_OK) or os.geteuid() != 0:
        return None
    proc = await asyncio.create_subprocess_exec(
        ctl, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode(errors="replace")
    return out.decode()


async def test_broker_sees_the_certificate_identity(tls: TLSFacts, external_user: str) -> None:
    """The broker logs the connection in as the client certificate's CN, over EXTERNAL."""
    name = f"sw-tls-external-{uuid.uuid4().hex[:8]}"
    settings = ConnectionSettings(
        mechanism="EXTERNAL", username=None, password=None, connection_name=name
    )
    async with await rmq.connect(
        host=tls.host,
        port=tls.port,
        tls=tls.with_client_cert(),
        settings=settings,
        timeout=_TIMEOUT,
    ):
        columns = ("user", "auth_mechanism", "ssl", "peer_cert_subject", "client_properties")
        listing = await _ctl(tls, "-q", "--formatter", "json", "list_stream_connections", *columns)
    if listing is None:
        skip_missing("the harness's rabbitmqctl wrapper (CTL) is not usable here (needs root)")
    rows = [
        row
        for row in json.loads(listing)
        if ["connection_name", "longstr", name] in row["client_properties"]
    ]
    assert len(rows) == 1, listing
    row = rows[0]
    assert row["user"] == external_user
    assert row["auth_mechanism"] == "EXTERNAL"
    assert row["ssl"] is True
    assert row["peer_cert_subject"] == f"CN={external_user}"


async def test_external_without_a_client_certificate_fails(tls: TLSFacts) -> None:
    """EXTERNAL is offered on TLS even without a certificate; the login then fails (0x08)."""
    with pytest.raises(AuthenticationFailure) as info:
        await rmq.connect(
            host=tls.host, port=tls.port, tls=tls.ca_only(), settings=EXTERNAL, timeout=_TIMEOUT
        )
    assert isinstance(info.value, AuthenticationError)
    assert info.value.code == 0x08


async def test_the_external_user_has_no_password(tls: TLSFacts, external_user: str) -> None:
    with pytest.raises(AuthenticationFailure):
        await rmq.connect(
            host=tls.host,
            port=tls.port,
            tls=tls.ca_only(),
            username=external_user,
            password="",
            timeout=_TIMEOUT,
        )


# --- secrets stay secret ----------------------------------------------------------------


@pytest.fixture
def encrypted_client_key(tls: TLSFacts, tmp_path: Path) -> tuple[str, str]:
    """The client key re-encrypted with a one-off password: (path, password)."""
    secret = f"key-secret-{uuid.uuid4().hex}"
    out = tmp_path / "client-encrypted.key"
    subprocess.run(
        [
            "openssl",
            "pkey",
            "-in",
            tls.client_key,
            "-aes256",
            "-passout",
            "env:SW_KEY_PASS",
            "-out",
            str(out),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "SW_KEY_PASS": secret},
        timeout=30,
    )
    return str(out), secret


def _everything_shown(exc: BaseException) -> str:
    """Every text an error can end up as: str, repr, args and the whole chain, traceback."""
    parts: list[str] = []
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        parts += [str(e), repr(e), *map(repr, e.args)]
        todo += [e.__cause__, e.__context__]
    parts += traceback.format_exception(exc)
    return "\n".join(parts)


async def test_credentials_never_appear(
    tls: TLSFacts, external_user: str, encrypted_client_key: tuple[str, str]
) -> None:
    secret = f"pw-{uuid.uuid4().hex}"
    settings = ConnectionSettings(username=tls.user, password=secret)
    assert secret not in repr(settings)
    assert secret not in str(settings)

    # A refused password, over TLS: not in the error, its chain or its traceback.
    url = tls.url.replace(f":{tls.password}@", f":{secret}@", 1)
    assert secret in url
    with pytest.raises(AuthenticationFailure) as refused:
        await rmq.connect(url, tls=tls.ca_only(), timeout=_TIMEOUT)
    assert secret not in _everything_shown(refused.value)

    # A TLS failure while connecting with that URL: same.
    with pytest.raises(streamwire.ConnectError) as unverified:
        await rmq.connect(url, timeout=_TIMEOUT)
    assert secret not in _everything_shown(unverified.value)

    # A working client whose key is encrypted (EXTERNAL login): the key password is hidden.
    key_file, key_password = encrypted_client_key
    options = TLSOptions(
        ca_file=tls.ca, cert_file=tls.client_cert, key_file=key_file, key_password=key_password
    )
    assert key_password not in repr(options)
    async with await rmq.connect(
        host=tls.host, port=tls.port, tls=options, settings=EXTERNAL, timeout=_TIMEOUT
    ) as client:
        shown = "\n".join([repr(client), str(client), repr(client.settings), repr(client.tls)])
        assert key_password not in shown
        assert "password" not in repr(client.settings)

    # PLAIN over TLS: the settings show the user, never the password field.
    async with await rmq.connect(tls.url, tls=tls.ca_only(), timeout=_TIMEOUT) as client:
        assert client.settings.password == tls.password
        assert "password" not in repr(client.settings)
        assert "password" not in repr(client)


async def test_a_plain_client_on_the_tls_port_gets_a_clear_error() -> None:
    broker = require("rabbitmq")
    port = broker.extra.get("TLS_PORT")
    if not port:
        skip_missing("the harness recorded no TLS listener")
    with pytest.raises(ConnectError, match=r"answered with TLS: use rabbitmq-stream\+tls://"):
        await rmq.connect(f"rabbitmq-stream://guest:guest@localhost:{port}/", timeout=5)
