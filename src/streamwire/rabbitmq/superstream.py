"""Super streams: a producer that routes each message to a partition stream, and a consumer
over every partition.

Routing is by message key, exactly as the Java reference client does it:

* ``"hash"`` (default): MurmurHash3 x86 32-bit, seed 104729, over the key bytes (for a
  string key, its UTF-8 bytes), partition = unsigned hash mod the number of partitions. (The
  rstream client hashes differently, so a Python and a Java producer using it would
  disagree.)
* ``"key"``: the broker's Route query — the partitions whose binding key equals the routing
  key (direct-exchange semantics), cached per key.
* a :data:`Router` of your own: a function of the message and the partition streams that
  returns the partition stream(s) to publish to (the Java client's custom routing strategy);
  messages then need no key.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Final, Literal, Protocol, Self, Unpack

import mmh3

from streamwire.codec.headers import HeaderInput
from streamwire.codec.message import Confirmation, Message
from streamwire.codec.offset import OffsetLike
from streamwire.errors import ConfigurationError, StreamwireError
from streamwire.metrics import (
    ConsumerStats,
    ProducerStats,
    combine_consumer_stats,
    combine_producer_stats,
)
from streamwire.rabbitmq._kwargs import ConsumerKwargs, ProducerKwargs
from streamwire.rabbitmq.consumer import Consumer
from streamwire.rabbitmq.producer import Producer
from streamwire.transport.resources import AsyncStartable

__all__ = (
    "JAVA_HASH_SEED",
    "NoRouteError",
    "Router",
    "SuperStreamConsumer",
    "SuperStreamLink",
    "SuperStreamProducer",
    "hash_partition",
)

JAVA_HASH_SEED: Final = 104729

Router = Callable[[Message, Sequence[str]], str | Sequence[str]]
"""A custom routing strategy: ``router(message, partitions)`` returns the partition stream (or
streams) ``message`` goes to; each must be one of ``partitions``."""

Routing = Literal["hash", "key"] | Router


class SuperStreamLink(Protocol):
    """The part of :class:`streamwire.rabbitmq.Client` a super stream's producer and consumer
    use (a narrow interface, so that this module does not import the client, which imports
    it)."""

    async def partitions(self, super_stream: str) -> list[str]:
        """The partition streams of ``super_stream``, in partition order."""
        ...

    async def route(self, routing_key: str, super_stream: str) -> list[str]:
        """The partitions bound to ``routing_key``."""
        ...

    def producer(
        self, stream: str, *, name: str | None = None, **options: Unpack[ProducerKwargs]
    ) -> Producer:
        """A producer of one partition."""
        ...

    def consumer(
        self,
        stream: str,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        **options: Unpack[ConsumerKwargs],
    ) -> Consumer:
        """A consumer of one partition."""
        ...

    def _forget_child(self, child: object) -> None:
        """A closed super stream producer or consumer leaves the client's children."""
        ...


class NoRouteError(ConfigurationError):
    """No partition is bound to the message's routing key."""


def hash_partition(key: bytes | str, partitions: int) -> int:
    """The partition index the Java client's hash routing picks for ``key``."""
    data = key.encode("utf-8") if isinstance(key, str) else key
    return int(mmh3.hash(data, JAVA_HASH_SEED, signed=False)) % partitions


class SuperStreamProducer(AsyncStartable):
    """Publishes to the partitions of a super stream, routed by message key."""

    def __init__(
        self,
        client: SuperStreamLink,
        super_stream: str,
        *,
        routing: Routing = "hash",
        name: str | None = None,
        options: ProducerKwargs,
    ) -> None:
        if not callable(routing) and routing not in ("hash", "key"):
            raise ConfigurationError(
                f"routing must be 'hash', 'key' or a function, not {routing!r}"
            )
        self._client = client
        self.super_stream = super_stream
        self.routing = routing
        self.name = name
        self._options = options
        self.partitions: list[str] = []
        self._producers: dict[str, Producer] = {}
        self._every: list[Producer] = []  # for stats: also the ones closed
        self._routes: dict[bytes, list[str]] = {}
        self._lock = asyncio.Lock()

    async def start(self, timeout: float | None = 30.0) -> Self:
        """Read the partitions. Producers for them start on first use."""
        async with asyncio.timeout(timeout):
            self.partitions = await self._client.partitions(self.super_stream)
        if not self.partitions:
            raise ConfigurationError(f"super stream {self.super_stream!r} has no partitions")
        return self

    def _is_started(self) -> bool:
        return bool(self.partitions)

    async def _close_on_exit(self, clean: bool) -> None:
        await self.close(flush=clean)

    async def route(self, key: bytes) -> list[str]:
        """The partition streams a message with ``key`` goes to (with a custom router: the
        router's choice for a message of that key)."""
        if callable(self.routing):
            return self._custom_route(Message(b"", key=key))
        if self.routing == "hash":
            return [self.partitions[hash_partition(key, len(self.partitions))]]
        streams = self._routes.get(key)
        if streams is None:
            streams = await self._client.route(key.decode("utf-8"), self.super_stream)
            self._routes[key] = streams
        if not streams:
            raise NoRouteError(f"no partition of {self.super_stream!r} is bound to key {key!r}")
        return streams

    async def _producer(self, stream: str) -> Producer:
        producer = self._producers.get(stream)
        if producer is None:
            async with self._lock:
                producer = self._producers.get(stream)
                if producer is None:
                    producer = self._client.producer(stream, name=self.name, **self._options)
                    await producer.start()
                    self._producers[stream] = producer
                    self._every.append(producer)
        return producer

    @property
    def stats(self) -> ProducerStats:
        """The partitions' producer counters added up (``stream`` is the super stream)."""
        return combine_producer_stats(self.super_stream, [p.stats for p in self._every])

    async def send(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
        timeout: float | None = None,
    ) -> asyncio.Future[Confirmation]:
        """Route by ``key`` (or the Message's key) and accept the message; returns the future
        of its confirmation (for ``"key"`` routing to several partitions: the first one's).

        Cancellation: as :meth:`Producer.send`.
        """
        message = value if isinstance(value, Message) else Message(value, key=key, headers=headers)
        if callable(self.routing):
            streams = self._custom_route(message)
        elif message.key is None:
            raise ConfigurationError("super-stream routing needs a message key")
        else:
            streams = await self.route(message.key)
        futures = [
            await (await self._producer(stream)).send(message, timeout=timeout)
            for stream in streams
        ]
        return futures[0]

    def _custom_route(self, message: Message) -> list[str]:
        assert callable(self.routing)
        chosen = self.routing(message, tuple(self.partitions))
        streams = [chosen] if isinstance(chosen, str) else list(chosen)
        unknown = [s for s in streams if s not in self.partitions]
        if not streams or unknown:
            raise NoRouteError(
                f"the router of {self.super_stream!r} chose {streams!r}; the partitions are "
                f"{self.partitions!r}"
            )
        return streams

    async def send_and_wait(
        self, value: bytes | Message, *, key: bytes | None = None, timeout: float | None = None
    ) -> Confirmation:
        future = await self.send(value, key=key)
        async with asyncio.timeout(timeout or 30.0):
            return await future

    async def flush(self, timeout: float | None = None) -> None:
        for producer in list(self._producers.values()):
            await producer.flush(timeout)

    async def close(self, *, flush: bool = True) -> None:
        """Close every partition's producer (flushing unless ``flush=False``). Idempotent.

        Cancellation: the producers not closed yet are aborted.
        """
        try:
            for producer in list(self._producers.values()):
                await producer.close(flush=flush)
        finally:
            self.abort()

    def abort(self) -> None:
        """Abort every partition's producer (:meth:`Producer.abort`). Idempotent."""
        for producer in self._producers.values():
            producer.abort()
        self._producers.clear()
        self._client._forget_child(self)


class SuperStreamConsumer(AsyncStartable):
    """Consumes every partition of a super stream; messages carry ``stream`` (the partition
    stream) and ``partition`` (its index). With ``single_active=True`` and a name, the
    broker spreads the partitions over the consumers of the group."""

    def __init__(
        self,
        client: SuperStreamLink,
        super_stream: str,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        options: ConsumerKwargs,
    ) -> None:
        self._client = client
        self.super_stream = super_stream
        self._offset = offset
        self.name = name
        self._options = options
        self.consumers: list[Consumer] = []
        self._every: list[Consumer] = []  # for stats: also after closing
        self._next = 0
        self._carry: list[list[Message]] = []

    async def start(self, timeout: float | None = 30.0) -> Self:
        async with asyncio.timeout(timeout):
            partitions = await self._client.partitions(self.super_stream)
            options = self._options.copy()
            if options.get("single_active"):
                options["super_stream"] = self.super_stream
            for stream in partitions:
                consumer = self._client.consumer(
                    stream, offset=self._offset, name=self.name, **options
                )
                await consumer.start()
                self.consumers.append(consumer)
                self._every.append(consumer)
        return self

    @property
    def stats(self) -> ConsumerStats:
        """The partitions' consumer counters added up (``stream`` is the super stream;
        offsets are per partition, so none here)."""
        return combine_consumer_stats(self.super_stream, [c.stats for c in self._every])

    def _is_started(self) -> bool:
        return bool(self.consumers)

    def _tag(self, messages: Iterable[Message], index: int) -> list[Message]:
        out = list(messages)
        for m in out:
            m.partition = index
        return out

    async def next_batch(
        self, max_messages: int = 500, timeout: float | None = 1.0
    ) -> list[Message]:
        """Up to ``max_messages`` messages from the partitions, taken in turn; waits up to
        ``timeout`` for the first if none is ready.

        Cancellation: nothing is lost.
        """
        if self._carry:  # batches that arrived together with the one returned last time
            return self._carry.pop(0)
        n = len(self.consumers)
        for step in range(n):  # whatever is ready, fairly
            i = (self._next + step) % n
            batch = await self.consumers[i].next_batch(max_messages, timeout=0)
            if batch:
                self._next = (i + 1) % n
                return self._tag(batch, i)
        waits = {
            asyncio.ensure_future(c.next_batch(max_messages, timeout=timeout)): i
            for i, c in enumerate(self.consumers)
        }
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            for task in waits:
                with contextlib.suppress(asyncio.CancelledError, StreamwireError):
                    await task
        ready = [
            self._tag(task.result(), waits[task])
            for task in waits
            if task.done() and not task.cancelled() and task.exception() is None and task.result()
        ]
        if ready:
            self._carry.extend(ready[1:])  # never drop what another partition handed out
            return ready[0]
        for task in done:
            if not task.cancelled() and (error := task.exception()) is not None:
                raise error
        return []

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Message]:
        while self.consumers:
            for message in await self.next_batch(500, timeout=None):
                yield message

    async def close(self) -> None:
        """Close every partition's consumer. Idempotent.

        Cancellation: the consumers not closed yet are aborted.
        """
        try:
            for consumer in self.consumers:
                await consumer.close()
        finally:
            self.abort()

    def abort(self) -> None:
        """Abort every partition's consumer (:meth:`Consumer.abort`). Idempotent."""
        for consumer in self.consumers:
            consumer.abort()
        self.consumers.clear()
        self._client._forget_child(self)
