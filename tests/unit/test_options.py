"""Typed options: a misspelled or unknown option is a ConfigurationError naming the close
matches, on every broker and for ``streamwire.connect``; each protocol's option TypedDicts
name exactly the fields of its option dataclasses."""

from __future__ import annotations

import dataclasses
from typing import get_type_hints

import pytest

import streamwire
import streamwire.iggy as iggy
import streamwire.liftbridge as liftbridge
import streamwire.rabbitmq as rabbitmq
from streamwire import ConfigurationError
from streamwire.iggy._kwargs import StreamKwargs as IggyStreamKwargs
from streamwire.iggy._options import TOPIC_OPTIONS
from streamwire.liftbridge._kwargs import StreamKwargs as LiftbridgeStreamKwargs
from streamwire.rabbitmq._kwargs import StreamKwargs as RabbitStreamKwargs
from streamwire.rabbitmq.client import _STREAM_ARGUMENTS
from streamwire.transport import TcpKeepalive


@pytest.mark.parametrize(
    "url",
    [
        "rabbitmq-stream://guest:guest@127.0.0.1:1/",
        "liftbridge://127.0.0.1:1?nats=nats://127.0.0.1:1",
        "iggy://iggy:iggy@127.0.0.1:1",
    ],
)
def test_a_misspelled_connect_option_names_the_close_match(url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"'tiemout' \(did you mean 'timeout'"):
        streamwire.connect(url, tiemout=3)  # type: ignore[call-arg]


URLS = (
    "rabbitmq-stream://guest:guest@127.0.0.1:1/",
    "liftbridge://127.0.0.1:1?nats=nats://127.0.0.1:1",
    "iggy://iggy:iggy@127.0.0.1:1",
)


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("timeout", "1", "timeout must be a positive number of seconds, or None"),
        ("timeout", True, "got True (bool)"),
        ("timeout", 0, "got 0 (int)"),
        ("timeout", float("nan"), "got nan (float)"),
        ("tls", "yes", "tls must be True (the defaults), False or None (off)"),
        ("tls", {"ca_file": "x"}, "got {'ca_file': 'x'} (dict)"),
        ("reconnect", True, "reconnect must be a ReconnectPolicy (reconnecting is on by"),
        ("reconnect", 3, "got 3 (int)"),
        ("tcp_keepalive", True, "tcp_keepalive must be a streamwire.transport.TcpKeepalive"),
        ("tcp_keepalive", 30, "got 30 (int)"),
    ],
)
def test_a_connect_option_of_the_wrong_kind_says_what_is_expected(
    url: str, option: str, value: object, says: str
) -> None:
    """Refused before anything connects (a str timeout used to fail deep in asyncio as a
    TypeError, tls="yes" as an AttributeError, and reconnect=True was taken silently)."""
    with pytest.raises(ConfigurationError) as caught:
        streamwire.connect(url, **{option: value})  # type: ignore[arg-type]
    assert says in str(caught.value)


@pytest.mark.parametrize("url", URLS)
def test_connect_options_of_the_right_kind_pass(url: str) -> None:
    streamwire.connect(url, timeout=2, tls=False, reconnect=None, tcp_keepalive=None)
    streamwire.connect(
        url,
        timeout=None,
        tls=None,
        reconnect=streamwire.ReconnectPolicy(),
        tcp_keepalive=TcpKeepalive(idle=5),
    )


def _clients() -> tuple[rabbitmq.Client, liftbridge.Client, iggy.Client]:
    """Clients that have not connected: options are checked before anything is sent."""
    return (
        rabbitmq.Client("127.0.0.1", 1, rabbitmq.ConnectionSettings()),
        liftbridge.Client("127.0.0.1", 1, nats_servers=["nats://127.0.0.1:1"]),
        iggy.Client("127.0.0.1", 1, iggy.Credentials(username="u", password="p")),
    )


async def test_unknown_producer_and_consumer_options_are_configuration_errors() -> None:
    clients: tuple[streamwire.Client, ...] = _clients()
    for client in clients:
        with pytest.raises(ConfigurationError, match=r"'confirm_timout' \(did you mean"):
            client.producer("s", confirm_timout=1.0)  # type: ignore[call-arg]
        with pytest.raises(ConfigurationError, match=r"unknown .*consumer option 'nonsense'"):
            client.consumer("s", nonsense=1)  # type: ignore[call-arg]
        with pytest.raises(ConfigurationError, match="max_block"):
            client.producer("s", max_blok=1.0)  # type: ignore[call-arg]


async def test_unknown_stream_options_name_the_close_matches() -> None:
    rmq, lb, ig = _clients()
    with pytest.raises(ConfigurationError, match="did you mean 'max_age'"):
        await rmq.create_stream("s", max_ag="7D")  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="did you mean 'retention_max_age'"):
        await lb.create_stream("s", retention_max_ag=1.0)  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="did you mean 'message_expiry'"):
        await ig.create_stream("s", message_expiri=1)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("typed", "names"),
    [
        (rabbitmq.ProducerKwargs, rabbitmq.ProducerOptions),
        (rabbitmq.ConsumerKwargs, rabbitmq.ConsumerOptions),
        (liftbridge.ProducerKwargs, liftbridge.ProducerOptions),
        (liftbridge.ConsumerKwargs, liftbridge.ConsumerOptions),
        (LiftbridgeStreamKwargs, liftbridge.StreamOptions),
        (iggy.ProducerKwargs, iggy.ProducerOptions),
        (iggy.ConsumerKwargs, iggy.ConsumerOptions),
    ],
)
def test_option_dicts_name_the_dataclass_fields(typed: type, names: type) -> None:
    assert set(get_type_hints(typed)) == {f.name for f in dataclasses.fields(names)}


def test_stream_option_dicts_name_the_catalogues() -> None:
    assert set(get_type_hints(RabbitStreamKwargs)) == set(_STREAM_ARGUMENTS)
    assert set(get_type_hints(IggyStreamKwargs)) == set(TOPIC_OPTIONS)


def test_every_broker_extends_the_unified_options() -> None:
    for package in (rabbitmq, liftbridge, iggy):
        for unified in (streamwire.ProducerKwargs, streamwire.ConsumerKwargs):
            mine = getattr(package, unified.__name__)
            assert set(get_type_hints(unified)) <= set(get_type_hints(mine))


@pytest.mark.parametrize(
    ("client", "options"),
    [
        (rabbitmq.Client, rabbitmq.ProducerOptions),
        (liftbridge.Client, liftbridge.ProducerOptions),
        (iggy.Client, iggy.ProducerOptions),
    ],
)
def test_each_client_says_which_producer_options_it_takes(client: type, options: type) -> None:
    """A typed fact Spark asks instead of trying an option and catching the refusal."""
    taken: frozenset[str] = object.__new__(client).producer_options
    assert taken == frozenset(f.name for f in dataclasses.fields(options))
    assert "max_in_flight" in taken  # every broker: a unified option (docs/api.md)
