"""Each protocol client conforms to the unified API of docs/api.md (checked by mypy --strict on
this file, and at run time by the names it must have)."""

from __future__ import annotations

import inspect

import pytest

import streamwire
import streamwire.iggy as iggy
import streamwire.liftbridge as lb
import streamwire.rabbitmq as rmq


def rabbitmq_client(c: rmq.Client) -> streamwire.Client:
    return c  # mypy: structural conformance of the whole client


def rabbitmq_producer(p: rmq.Producer) -> streamwire.Producer:
    return p


def rabbitmq_consumer(c: rmq.Consumer) -> streamwire.Consumer:
    return c


def liftbridge_client(c: lb.Client) -> streamwire.Client:
    return c


def liftbridge_producer(p: lb.Producer) -> streamwire.Producer:
    return p


def liftbridge_consumer(c: lb.Consumer) -> streamwire.Consumer:
    return c


def iggy_client(c: iggy.Client) -> streamwire.Client:
    return c


def iggy_producer(p: iggy.Producer) -> streamwire.Producer:
    return p


def iggy_consumer(c: iggy.Consumer) -> streamwire.Consumer:
    return c


async def the_snippet_of_issue_39(url: str) -> None:
    """Ordinary code from the docs, as a user writes it: it type-checks as it stands."""
    async with streamwire.connect(url) as client:
        async with client.producer("s", max_in_flight=100) as producer:
            fut = await producer.send_many([b"a", b"b"])
            done = await fut
            assert done.messages == 2
        consumer = await client.consumer("s")
        await consumer.close()


@pytest.mark.parametrize(
    ("impl", "api"),
    [
        (rmq.Client, streamwire.Client),
        (rmq.Producer, streamwire.Producer),
        (rmq.Consumer, streamwire.Consumer),
        (lb.Client, streamwire.Client),
        (lb.Producer, streamwire.Producer),
        (lb.Consumer, streamwire.Consumer),
        (iggy.Client, streamwire.Client),
        (iggy.Producer, streamwire.Producer),
        (iggy.Consumer, streamwire.Consumer),
    ],
)
def test_every_api_method_exists_and_accepts_its_keywords(impl: type, api: type) -> None:
    for name, member in inspect.getmembers(api, inspect.isfunction):
        if name.startswith("_") and name not in ("__aenter__", "__aexit__", "__aiter__"):
            continue
        assert hasattr(impl, name), f"{impl.__name__} lacks {name}"
        wanted = inspect.signature(member).parameters
        got = inspect.signature(getattr(impl, name)).parameters
        for param in wanted.values():
            if param.kind is param.KEYWORD_ONLY:
                assert param.name in got or any(p.kind is p.VAR_KEYWORD for p in got.values()), (
                    f"{impl.__name__}.{name} lacks keyword {param.name}"
                )


def liftbridge_replicated_acks(c: lb.Client) -> streamwire.ReplicatedAcks:
    return c  # mypy: Liftbridge has the capability


@pytest.mark.parametrize(
    ("client", "has"), [(rmq.Client, False), (lb.Client, True), (iggy.Client, False)]
)
def test_only_liftbridge_confirms_before_replication_and_says_how_not_to(
    client: type, has: bool
) -> None:
    """RabbitMQ confirms after a majority has a message, and Iggy's acknowledgement is its
    topic's durability: neither has an option to ask for it. Liftbridge's is ``ALL``, an
    option its producers accept."""
    assert isinstance(getattr(client, "replicated_ack_options", None), property) is has, client
    if has:
        options = client.replicated_ack_options.fget(None)  # type: ignore[attr-defined]
        assert options == {"ack_policy": lb.AckPolicy.ALL}
        lb.ProducerOptions(**options)  # options a producer takes
