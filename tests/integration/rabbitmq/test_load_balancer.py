"""Load-balancer mode: every connection goes through one address, re-dialled until the node
behind it advertises the node wanted. A round-robin proxy in front of the 4.x and the 3.10
brokers (which advertise localhost:5552 and localhost:5553) plays the balancer."""

from __future__ import annotations

import uuid

import pytest

import streamwire.rabbitmq as rmq
from streamwire.errors import ConfigurationError, ConnectError
from tests.brokers import require
from tests.proxy import FaultProxy

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]


async def test_redials_until_the_wanted_node_answers() -> None:
    new, old = require("rabbitmq"), require("rabbitmq310")
    upstreams = ((old.host, old.port), (new.host, new.port))
    async with FaultProxy(old.host, old.port, *upstreams) as balancer:
        lb = await rmq.connect(
            f"rabbitmq-stream://guest:guest@127.0.0.1:{balancer.port}/",
            load_balancer=True,
            timeout=10,
        )  # the locator lands on the 3.10 broker (the proxy's first upstream)
        try:
            assert lb.server_version[:2] == (3, 10)
            conn = await lb._connection_to("localhost", new.port, role="producer")
            assert conn.machine.server_version() >= (4, 0)
            # the locator on 3.10, one dial refused (3.10 again), then the 4.x node
            assert balancer.connections_made == 3
            again = await lb._connection_to("localhost", new.port, role="producer")
            assert again is conn  # shared afterwards
        finally:
            await lb.close()


async def test_producer_and_consumer_through_the_balancer() -> None:
    new = require("rabbitmq")
    name = f"sw-lb-{uuid.uuid4().hex[:8]}"
    async with FaultProxy(new.host, new.port) as balancer:
        lb = await rmq.connect(
            f"rabbitmq-stream://guest:guest@127.0.0.1:{balancer.port}/",
            load_balancer=True,
            timeout=10,
        )
        try:
            await lb.create_stream(name)
            async with lb.producer(name) as producer:
                await producer.send_and_wait(b"through the balancer")
            async with lb.consumer(name) as consumer:
                (message,) = await consumer.next_batch(1, timeout=10)
            assert message.value == b"through the balancer"
            assert balancer.open_connections >= 1
        finally:
            await lb.delete_stream(name, missing_ok=True)
            await lb.close()


async def test_a_balancer_that_never_reaches_the_node_fails_clearly() -> None:
    old = require("rabbitmq310")
    async with FaultProxy(old.host, old.port) as balancer:
        lb = await rmq.connect(
            f"rabbitmq-stream://guest:guest@127.0.0.1:{balancer.port}/",
            load_balancer=True,
            timeout=10,
        )
        lb.load_balancer_attempts, lb.load_balancer_delay = 3, 0.01
        try:
            with pytest.raises(ConnectError, match=r"never led to localhost:5552 in 3 attempts"):
                await lb._connection_to("localhost", 5552, role="producer")
        finally:
            await lb.close()


async def test_balancer_and_resolver_exclude_each_other() -> None:
    broker = require("rabbitmq")
    with pytest.raises(ConfigurationError, match="not both"):
        await rmq.connect(broker.url, load_balancer=True, address_resolver=lambda h, p: (h, p))
