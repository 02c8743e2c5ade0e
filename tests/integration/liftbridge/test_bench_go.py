"""The benchmark's Go peer (``bench/go_liftbridge``, go-liftbridge v2.3.0): it builds from its
pinned go.mod/go.sum, publishes with acks and reads back what it published, and what it
publishes is what streamwire reads (and the other way round). Skipped, saying why, when Go is
not on PATH or the module cannot be fetched; a build that fails otherwise fails the test.
"""

from __future__ import annotations

import shutil

import pytest

import streamwire.liftbridge as lb
from bench import liftbridge_go
from bench.liftbridge import grpc_address
from tests.integration.liftbridge.conftest import NewStream

COUNT, SIZE = 500, 64


@pytest.fixture(scope="module")
def go_binary() -> str:
    if shutil.which("go") is None:
        pytest.skip("go is not on PATH")
    try:
        return str(liftbridge_go.binary())
    except liftbridge_go.GoUnavailable as exc:
        if "proxy" in str(exc) or "dial tcp" in str(exc) or "lookup" in str(exc):
            pytest.skip(f"the Go module proxy is not reachable: {exc}")
        raise


async def test_the_go_peer_round_trips(
    go_binary: str, url: str, client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream()
    address = grpc_address(url)
    published = await liftbridge_go.go_publish(address, stream, COUNT, SIZE, 100)
    assert published.messages == COUNT
    assert published.seconds > 0
    consumed = await liftbridge_go.go_consume(address, stream, COUNT)
    assert consumed.messages == COUNT
    async with client.consumer(stream, offset="first") as consumer:
        got: list[bytes] = []
        while len(got) < COUNT:
            batch = await consumer.next_batch(COUNT, timeout=10)
            assert batch, f"stalled after {len(got)} messages"
            got += [m.value for m in batch]
    assert got == [b"x" * SIZE] * COUNT


async def test_the_go_peer_reads_what_streamwire_publishes(
    go_binary: str, url: str, client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream()
    async with client.producer(stream) as producer:
        await producer.send_batch([b"v%d" % i for i in range(COUNT)])
        await producer.flush(timeout=30)
    consumed = await liftbridge_go.go_consume(grpc_address(url), stream, COUNT)
    assert consumed.messages == COUNT


async def test_a_failing_go_run_raises(go_binary: str, url: str) -> None:
    with pytest.raises(RuntimeError, match="go-liftbridge publish exited"):
        await liftbridge_go.go_publish(grpc_address(url), "no-such-stream-here", 1, 1, 1)
