"""URL parsing and ``streamwire.connect`` dispatch."""

from __future__ import annotations

import importlib

import pytest

import streamwire
from streamwire import ConfigurationError, parse_url


def test_rabbitmq_url_defaults_and_vhost() -> None:
    u = parse_url("rabbitmq-stream://guest:s%40cret@localhost/%2F")
    assert (u.protocol, u.tls, u.host, u.port) == ("rabbitmq", False, "localhost", 5552)
    assert (u.username, u.password, u.vhost) == ("guest", "s@cret", "/")
    assert parse_url("rabbitmq-stream://h").vhost == "/"
    assert parse_url("rabbitmq-stream://h/prod").vhost == "prod"
    tls = parse_url("rabbitmq-stream+tls://h:5551")
    assert tls.tls
    assert tls.port == 5551


def test_password_never_shown() -> None:
    u = parse_url("iggy://iggy:topsecret@127.0.0.1:8090")
    assert "topsecret" not in repr(u)
    assert "topsecret" not in str(u)
    assert str(u) == "iggy://iggy:***@127.0.0.1:8090"
    assert parse_url("iggy://[::1]").redacted() == "iggy://[::1]:8090"


def test_liftbridge_url_with_nats_query() -> None:
    u = parse_url("liftbridge://127.0.0.1:9292?nats=nats://127.0.0.1:4222")
    assert (u.protocol, u.port) == ("liftbridge", 9292)
    assert u.param("nats") == "nats://127.0.0.1:4222"
    assert u.param("missing", "d") == "d"


def test_query_values_keep_plus_signs() -> None:
    # a real Iggy server minted this token: base64 with '+' and '/'; a '+' read as a space
    # made the login fail with "invalid token"
    token = "mpw/gJ/bSYt8vYPGUhG+CwwRh4aez/ck9vmG1v6QTkAdnycgIB2Jy+JbIZU3Y8xR4aQ="
    u = parse_url(f"iggy://127.0.0.1:8090?token={token}&x=a%2Bb%20c&flag")
    assert u.param("token") == token
    assert u.param("x") == "a+b c"
    assert u.param("flag") == ""


@pytest.mark.parametrize(
    "url", ["http://x", "rabbitmq-stream://", "iggy://h:notaport", "kafka://h:9092", ""]
)
def test_bad_urls(url: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_url(url)


def test_non_string_url() -> None:
    with pytest.raises(ConfigurationError):
        parse_url(b"iggy://h")  # type: ignore[arg-type]


def test_connect_validates_before_awaiting() -> None:
    with pytest.raises(ConfigurationError, match="unknown URL scheme"):
        streamwire.connect("amqp://localhost")


async def test_dispatch_reports_a_protocol_package_without_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib
    import types

    real = importlib.import_module

    def fake(name: str, package: str | None = None) -> types.ModuleType:
        if name == "streamwire.iggy":
            return types.ModuleType(name)  # a package that offers no connect()
        if name == "streamwire.liftbridge":
            raise ModuleNotFoundError(name, name=name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", fake)
    with pytest.raises(ConfigurationError, match="iggy:// is not supported"):
        await streamwire.connect("iggy://localhost")
    with pytest.raises(ConfigurationError, match="liftbridge:// is not supported"):
        async with streamwire.connect("liftbridge://localhost"):
            pass


async def test_dispatch_reaches_each_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    import streamwire.iggy
    import streamwire.liftbridge
    import streamwire.rabbitmq

    seen: list[str] = []

    async def fake_connect(url: str, **options: object) -> object:
        seen.append(url.split(":", 1)[0])
        raise ConfigurationError("stop here")

    for module in (streamwire.rabbitmq, streamwire.liftbridge, streamwire.iggy):
        monkeypatch.setattr(module, "connect", fake_connect)
    for url in ("rabbitmq-stream+tls://h", "liftbridge://h", "iggy://h"):
        with pytest.raises(ConfigurationError, match="stop here"):
            await streamwire.connect(url)
    assert seen == ["rabbitmq-stream+tls", "liftbridge", "iggy"]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("liftbridge://h:9292?nat=nats://h:4222", "'nat' (did you mean 'nats'?); they take: nats"),
        ("rabbitmq-stream://u:p@h/?mechanisms=PLAIN", "'mechanisms' (did you mean 'mechanism'?)"),
        ("iggy://h:8090?tokn=x&flag", "'tokn' (did you mean 'token'?), 'flag'"),
        ("rabbitmq-stream://u:p@h/?nats=x", "they take: mechanism"),
    ],
)
def test_connect_refuses_query_parameters_the_protocol_does_not_read(url: str, says: str) -> None:
    """A misspelt parameter used to be ignored: the client connected without what the URL
    said (a Liftbridge client without its NATS URL, a token login as the default user)."""
    with pytest.raises(ConfigurationError) as caught:
        streamwire.connect(url)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("module", "url"),
    [
        ("rabbitmq", "rabbitmq-stream://u:p@127.0.0.1:1/?mechanizm=PLAIN"),
        ("iggy", "iggy://127.0.0.1:1?tokens=x"),
        ("liftbridge", "liftbridge://127.0.0.1:1?nat=nats://127.0.0.1:1"),
    ],
)
async def test_each_protocols_connect_refuses_them_too(module: str, url: str) -> None:
    connect = importlib.import_module(f"streamwire.{module}").connect
    with pytest.raises(ConfigurationError, match="take no query parameter"):
        await connect(url, timeout=1)
