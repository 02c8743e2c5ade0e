"""TLSOptions, create_ssl_context, and TLS connections against a throwaway trustme CA."""

from __future__ import annotations

import asyncio
import ssl
import struct
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from streamwire.codec.framing import LENGTH_PREFIX_U32
from streamwire.errors import ConfigurationError, ConnectError, TransportError
from streamwire.transport import TLSOptions, create_ssl_context, open_tcp

from .helpers import LocalServer, ServerFactory, echo

# --- options and context ---------------------------------------------------------------


def test_defaults_verify_everything() -> None:
    opts = TLSOptions()
    assert opts.verify
    assert opts.check_hostname
    ctx = create_ssl_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.check_hostname
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert create_ssl_context(opts).verify_mode == ssl.CERT_REQUIRED


def test_verify_false_disables_checks() -> None:
    ctx = create_ssl_context(TLSOptions(verify=False))
    assert ctx.verify_mode == ssl.CERT_NONE
    assert not ctx.check_hostname


def test_check_hostname_false_keeps_chain_verification(ca: trustme.CA) -> None:
    ctx = create_ssl_context(TLSOptions(ca_data=ca.cert_pem.bytes(), check_hostname=False))
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert not ctx.check_hostname


def test_minimum_version(ca: trustme.CA) -> None:
    ctx = create_ssl_context(TLSOptions(minimum_version=ssl.TLSVersion.TLSv1_3))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3


@pytest.mark.parametrize(
    "kwargs",
    [
        {"key_file": "client.key"},
        {"key_password": "secret"},
        {"verify": False, "ca_file": "ca.pem"},
        {"verify": False, "ca_data": "-----BEGIN CERTIFICATE-----"},
        {"server_hostname": " "},
        {"ca_data": b""},
        {"minimum_version": "TLSv1_2"},
    ],
)
def test_invalid_combinations(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError) as info:
        TLSOptions(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)


def test_unloadable_material_is_configuration_error(tmp_path: Path, ca: trustme.CA) -> None:
    missing = tmp_path / "missing.pem"
    for opts in (
        TLSOptions(ca_file=missing),
        TLSOptions(ca_data="not a certificate"),
        TLSOptions(cert_file=missing),
    ):
        with pytest.raises(ConfigurationError) as info:
            create_ssl_context(opts)
        assert info.value.__cause__ is not None


def test_ca_data_forms(ca: trustme.CA, tmp_path: Path) -> None:
    pem = ca.cert_pem.bytes()
    der = ssl.PEM_cert_to_DER_cert(pem.decode())
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(pem)
    for opts in (
        TLSOptions(ca_data=pem),
        TLSOptions(ca_data=pem.decode()),
        TLSOptions(ca_data=der),
        TLSOptions(ca_file=ca_file),
        TLSOptions(ca_file=str(ca_file)),
    ):
        ctx = create_ssl_context(opts)
        assert ctx.cert_store_stats()["x509_ca"] == 1


def test_encrypted_client_key(ca: trustme.CA, tmp_path: Path) -> None:
    leaf = ca.issue_cert("client.example")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    key_file = tmp_path / "client.key"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"right"),
        )
    )
    cert_file = tmp_path / "client.pem"
    cert_file.write_bytes(leaf.cert_chain_pems[0].bytes())
    create_ssl_context(TLSOptions(cert_file=cert_file, key_file=key_file, key_password=b"right"))
    with pytest.raises(ConfigurationError):
        create_ssl_context(TLSOptions(cert_file=cert_file, key_file=key_file, key_password="wrong"))


def test_repr_hides_the_key_password() -> None:
    text = repr(TLSOptions(cert_file="c.pem", key_password="hunter2"))
    assert "hunter2" not in text
    assert "c.pem" in text


# --- connections -----------------------------------------------------------------------


@pytest.fixture
async def tls_echo(start_server: ServerFactory, server_ssl_context: ssl.SSLContext) -> LocalServer:
    return await start_server(echo, ssl_context=server_ssl_context)


async def test_verified_connection_with_ca_data(tls_echo: LocalServer, ca: trustme.CA) -> None:
    opts = TLSOptions(ca_data=ca.cert_pem.bytes())
    async with await open_tcp(tls_echo.host, tls_echo.port, tls=opts, timeout=5.0) as stream:
        await stream.send(b"secret")
        assert await stream.read_exactly(6, timeout=5.0) == b"secret"
        tls = stream.ssl_object
        assert tls is not None
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
        assert tls.getpeercert() is not None


async def test_receive_into_over_tls(tls_echo: LocalServer, ca: trustme.CA) -> None:
    opts = TLSOptions(ca_data=ca.cert_pem.bytes())
    payload = bytes(range(256)) * 2000  # 512 000 bytes: many TLS records and receives
    async with await open_tcp(
        tls_echo.host, tls_echo.port, tls=opts, timeout=5.0, receive_into=True
    ) as stream:
        assert isinstance(stream._writer.transport.get_protocol(), asyncio.BufferedProtocol)
        await stream.send(payload, timeout=10.0)
        assert await stream.read_exactly(len(payload), timeout=10.0) == payload
        assert stream.ssl_object is not None


async def test_frames_over_tls(tls_echo: LocalServer, ca: trustme.CA) -> None:
    """Large frames received whole into buffers of their size, through TLS records."""
    opts = TLSOptions(ca_data=ca.cert_pem.bytes())
    frames = [struct.pack(">I", n) + bytes([n % 251]) * n for n in (300_000, 10, 90_000)]
    async with await open_tcp(
        tls_echo.host,
        tls_echo.port,
        tls=opts,
        timeout=5.0,
        frames=LENGTH_PREFIX_U32,
        max_frame_size=1 << 20,
    ) as stream:
        await stream.send(frames, timeout=10.0)
        reads: list[bytes] = []
        while sum(map(len, reads)) < sum(map(len, frames)):
            reads.append(await stream.read(timeout=10.0))
        assert b"".join(reads) == b"".join(frames)
        assert frames[0] in reads  # whole, as one read


async def test_prebuilt_context_is_used_as_is(tls_echo: LocalServer, ca: trustme.CA) -> None:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    async with await open_tcp(tls_echo.host, tls_echo.port, tls=ctx, timeout=5.0) as stream:
        await stream.send(b"x")
        assert await stream.read_exactly(1, timeout=5.0) == b"x"


async def test_untrusted_certificate_fails_by_default(tls_echo: LocalServer) -> None:
    with pytest.raises(ConnectError) as info:
        await open_tcp(tls_echo.host, tls_echo.port, tls=TLSOptions(), timeout=5.0)
    assert isinstance(info.value.__cause__, ssl.SSLCertVerificationError)
    assert f"{tls_echo.host}:{tls_echo.port}" in str(info.value)


async def test_verify_false_accepts_untrusted_certificate(tls_echo: LocalServer) -> None:
    opts = TLSOptions(verify=False)
    async with await open_tcp(tls_echo.host, tls_echo.port, tls=opts, timeout=5.0) as stream:
        await stream.send(b"y")
        assert await stream.read_exactly(1, timeout=5.0) == b"y"


async def test_hostname_mismatch_fails(tls_echo: LocalServer, ca: trustme.CA) -> None:
    opts = TLSOptions(ca_data=ca.cert_pem.bytes(), server_hostname="other.example")
    with pytest.raises(ConnectError) as info:
        await open_tcp(tls_echo.host, tls_echo.port, tls=opts, timeout=5.0)
    assert isinstance(info.value.__cause__, ssl.SSLCertVerificationError)
    assert "other.example" in str(info.value.__cause__)


async def test_hostname_mismatch_allowed_without_check_hostname(
    tls_echo: LocalServer, ca: trustme.CA
) -> None:
    opts = TLSOptions(
        ca_data=ca.cert_pem.bytes(), server_hostname="other.example", check_hostname=False
    )
    async with await open_tcp(tls_echo.host, tls_echo.port, tls=opts, timeout=5.0) as stream:
        assert stream.ssl_object is not None


async def test_server_hostname_override_matches(tls_echo: LocalServer, ca: trustme.CA) -> None:
    opts = TLSOptions(ca_data=ca.cert_pem.bytes(), server_hostname="localhost")
    async with await open_tcp(tls_echo.host, tls_echo.port, tls=opts, timeout=5.0) as stream:
        assert stream.ssl_object is not None
        assert stream.ssl_object.server_hostname == "localhost"


async def test_plain_server_fails_the_handshake(echo_server: LocalServer) -> None:
    # The echo server sends our ClientHello back: not a ServerHello.
    with pytest.raises(ConnectError) as info:
        await open_tcp(echo_server.host, echo_server.port, tls=TLSOptions(), timeout=5.0)
    assert isinstance(info.value.__cause__, ssl.SSLError)


@pytest.fixture
async def mtls_server(start_server: ServerFactory, ca: trustme.CA) -> LocalServer:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    ca.configure_trust(ctx)
    ctx.verify_mode = ssl.CERT_REQUIRED

    async def whoami(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peercert")
        subject = dict(item[0] for item in peer["subject"]) if peer else {}
        writer.write(str(subject.get("organizationalUnitName", "anonymous")).encode() + b"\n")
        await writer.drain()
        await reader.read()

    return await start_server(whoami, ssl_context=ctx)


async def test_mutual_tls(mtls_server: LocalServer, ca: trustme.CA, tmp_path: Path) -> None:
    leaf = ca.issue_cert("client@example", organization_unit_name="client-42")
    combined = tmp_path / "client-combined.pem"
    combined.write_bytes(leaf.private_key_and_cert_chain_pem.bytes())
    cert_file, key_file = tmp_path / "client.pem", tmp_path / "client.key"
    cert_file.write_bytes(leaf.cert_chain_pems[0].bytes())
    key_file.write_bytes(leaf.private_key_pem.bytes())
    for opts in (
        TLSOptions(ca_data=ca.cert_pem.bytes(), cert_file=combined),
        TLSOptions(ca_data=ca.cert_pem.bytes(), cert_file=cert_file, key_file=key_file),
    ):
        server = mtls_server
        async with await open_tcp(server.host, server.port, tls=opts, timeout=5.0) as stream:
            assert await stream.read_exactly(10, timeout=5.0) == b"client-42\n"


async def test_mutual_tls_without_client_certificate_fails(
    mtls_server: LocalServer, ca: trustme.CA
) -> None:
    opts = TLSOptions(ca_data=ca.cert_pem.bytes())
    server = mtls_server
    try:
        async with await open_tcp(server.host, server.port, tls=opts, timeout=5.0) as stream:
            data = await stream.read(timeout=5.0)
    except TransportError:
        return  # refused during the handshake (TLS 1.2)
    # TLS 1.3: the client's side of the handshake is done before the server checks the
    # client certificate; the refusal ends the stream before any application data.
    assert data == b""
