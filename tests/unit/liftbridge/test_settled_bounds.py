"""``Client.settled_bounds`` (``streamwire.Settling``) against an in-process server whose
partition metadata each test scripts: it waits while messages are appended but not
committed (high watermark below the newest offset), follows a new leader's log, fails
with a streamwire ``TimeoutError`` when nothing commits in time, and names a tail that only
the next write commits (``UncommittedTailError``)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import grpc.aio
import pytest

import streamwire
import streamwire.liftbridge as lb
import streamwire.liftbridge.client as lb_client
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from tests.unit.liftbridge.fake_api import dead_port, start_api

#: (leader, high watermark, newest offset) per FetchPartitionMetadata call, the last repeated;
#: the ISR is both brokers unless ``isr`` says otherwise
Script = list[tuple[str, int, int]]


class Server:
    def __init__(self, script: Script, isr: tuple[str, ...] = ("b1", "b2")) -> None:
        self.script = script
        self.isr = isr
        self.calls = 0
        self.server = grpc.aio.server()
        self.port = 0

    def _now(self) -> tuple[str, int, int]:
        return self.script[min(self.calls, len(self.script) - 1)]

    def metadata(self, request: pb.FetchMetadataRequest, context: Any) -> Any:
        leader = self._now()[0]
        response = pb.FetchMetadataResponse(
            brokers=[pb.Broker(id=b, host="127.0.0.1", port=self.port) for b in ("b1", "b2")]
        )
        meta = response.streamMetadata.add(name="orders", subject="orders")
        meta.partitions[0].CopyFrom(pb.PartitionMetadata(id=0, leader=leader))
        return response

    def partition(self, request: pb.FetchPartitionMetadataRequest, context: Any) -> Any:
        leader, hw, newest = self._now()
        self.calls += 1
        return pb.FetchPartitionMetadataResponse(
            metadata=pb.PartitionMetadata(
                id=0, leader=leader, isr=list(self.isr), highWatermark=hw, newestOffset=newest
            )
        )


async def settled(
    script: Script, timeout: float, isr: tuple[str, ...] = ("b1", "b2")
) -> tuple[Callable[[], int], Any]:
    server = Server(script, isr)
    server.port = await start_api(
        server.server,
        {"FetchMetadata": server.metadata, "FetchPartitionMetadata": server.partition},
    )
    url = f"liftbridge://127.0.0.1:{server.port}?nats=nats://127.0.0.1:{dead_port()}"
    client = await lb.connect(url, timeout=5, require_nats=False)
    try:
        assert isinstance(client, streamwire.Settling)
        try:
            result: Any = await client.settled_bounds("orders", timeout=timeout)
        except streamwire.StreamwireError as exc:
            result = exc
    finally:
        await client.close()
        await server.server.stop(None)
    return (lambda: server.calls), result


async def test_it_waits_until_what_was_appended_is_committed() -> None:
    # 5 messages appended past the watermark; later ones keep coming (newest grows), but
    # only those appended when it was asked are waited for
    calls, bounds = await settled([("b1", 9, 14), ("b1", 11, 16), ("b1", 14, 18)], timeout=10)
    assert bounds == {0: streamwire.OffsetBounds(0, 15)}
    assert calls() == 3


async def test_a_settled_partition_answers_at_once() -> None:
    calls, bounds = await settled([("b1", 9, 9)], timeout=10)
    assert bounds == {0: streamwire.OffsetBounds(0, 10)}
    assert calls() == 1


async def test_a_new_leaders_log_replaces_the_old_ones() -> None:
    # the old leader had 20 appended; the new one has 12, 11 committed, then all
    calls, bounds = await settled([("b1", 9, 20), ("b2", 11, 12), ("b2", 12, 13)], timeout=10)
    assert bounds == {0: streamwire.OffsetBounds(0, 13)}
    assert calls() == 3


async def test_nothing_committing_in_time_is_a_streamwire_timeout_saying_why() -> None:
    _, error = await settled([("b1", 9, 14)], timeout=0.5)
    assert isinstance(error, streamwire.TimeoutError)
    assert "not committed within 0.5 s" in str(error)


async def test_a_leader_alone_whose_watermark_is_stuck_is_an_uncommitted_tail_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # what a Liftbridge v1.9.0 server reports after a crash and a restart: nothing
    # committed until the next write, and no replica that could commit it
    monkeypatch.setattr(lb_client, "STUCK_AFTER", 0.3)
    calls, error = await settled([("b1", -1, 1999)], timeout=10, isr=("b1",))
    assert isinstance(error, streamwire.UncommittedTailError)
    assert (error.stream, error.tails) == ("orders", {0: (0, 1999)})
    assert "partition 0: offsets 0..1999" in str(error)
    assert "commit_tail" in str(error)
    assert calls() >= 3  # it watched the watermark not move before it said so
    assert pickle.loads(pickle.dumps(error)).tails == error.tails  # noqa: S301  (Spark ships it)


async def test_a_leader_alone_whose_watermark_moves_is_waited_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # another writer's messages: each commits what was appended before it
    monkeypatch.setattr(lb_client, "STUCK_AFTER", 0.25)
    script = [("b1", 5, 9), ("b1", 5, 9), ("b1", 7, 10), ("b1", 7, 11), ("b1", 9, 12)]
    calls, bounds = await settled(script, timeout=10, isr=("b1",))
    assert bounds == {0: streamwire.OffsetBounds(0, 10)}
    assert calls() == 5


@pytest.mark.parametrize("client", ["rabbitmq", "iggy"])
def test_only_liftbridge_holds_uncommitted_messages(client: str) -> None:
    import streamwire.iggy as iggy
    import streamwire.rabbitmq as rmq

    cls = {"rabbitmq": rmq.Client, "iggy": iggy.Client}[client]
    assert not hasattr(cls, "settled_bounds")
    assert hasattr(lb.Client, "settled_bounds")
