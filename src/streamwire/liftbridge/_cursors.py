"""Cursors: the offsets consumer names store on a Liftbridge cluster (``__cursors``, one
partition of it per cursor, at that partition's leader), read and written with or without a
consumer. :class:`Cursors` is the part of :class:`~streamwire.liftbridge.client.Client` that
does this; the client provides the metadata and gRPC calls it declares."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

from streamwire._default import DEFAULT, Default
from streamwire._stored import consumer_name, offset_to_store
from streamwire.errors import ConfigurationError, ConnectError
from streamwire.liftbridge._calls import UnaryCalls
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import FailedPrecondition
from streamwire.liftbridge.protocol.metadata import CURSORS_STREAM, Metadata, cursor_partition

__all__ = ("Cursors",)

_CURSORS_LOOKUPS: Final = 5
_CURSORS_LOOKUP_PAUSE: Final = 0.5


if TYPE_CHECKING:  # the client's unary calls, which these methods use
    _Calls = UnaryCalls
else:
    _Calls = object


class Cursors(_Calls):
    """SetCursor and FetchCursor at the right server, and the unified API's stored offsets."""

    _metadata: Metadata | None

    if TYPE_CHECKING:  # the client's, used here

        async def fetch_metadata(
            self, *streams: str, timeout: float | Default | None = DEFAULT
        ) -> Metadata: ...

        def _invalidate_metadata(self) -> None: ...

        async def partition_ids(self, stream: str) -> list[int]: ...

    async def _cursor_leader(self, cursor_id: str, stream: str, partition: int) -> tuple[int, str]:
        md = self._metadata
        info = md.streams.get(CURSORS_STREAM) if md is not None else None
        # A new cluster's metadata leader creates __cursors shortly after it is elected, and
        # the server answering metadata may not know it yet (seen on a fresh 3-node v1.9.0
        # cluster): ask again a few times before calling cursors disabled.
        for attempt in range(_CURSORS_LOOKUPS):
            if info is not None:
                break
            if attempt:
                await asyncio.sleep(_CURSORS_LOOKUP_PAUSE)
            md = await self.fetch_metadata(CURSORS_STREAM)
            info = md.streams.get(CURSORS_STREAM)
        if info is None:
            raise ConfigurationError("cursors are disabled on the server (no __cursors stream)")
        cp = cursor_partition(cursor_id, stream, partition, info.partition_count)
        p = info.partitions.get(cp)
        return cp, p.leader if p is not None else ""

    async def _cursor_call(
        self,
        method: str,
        request: Any,
        cursor_id: str,
        stream: str,
        partition: int,
        timeout: float | Default | None,
        what: str,
    ) -> Any:
        """At the ``__cursors`` partition's leader; once more with fresh metadata if that
        server says it no longer leads it or cannot be reached (it died: a new leader)."""
        for attempt in (1, 2):
            _, leader = await self._cursor_leader(cursor_id, stream, partition)
            try:
                return await self._call(
                    method, request, timeout=self._timeout(timeout), what=what, broker=leader
                )
            except (FailedPrecondition, ConnectError):
                if attempt == 2:
                    raise
                self._invalidate_metadata()
        raise AssertionError("unreachable")  # pragma: no cover

    async def set_cursor(
        self,
        stream: str,
        partition: int,
        cursor_id: str,
        offset: int,
        *,
        timeout: float | Default | None = DEFAULT,
    ) -> None:
        """Store ``offset`` as cursor ``cursor_id`` of ``stream``/``partition``.

        Cancellation: the cursor may or may not have been stored.
        """
        request = pb.SetCursorRequest(
            stream=stream, partition=partition, cursorId=cursor_id, offset=offset
        )
        what = f"SetCursor {cursor_id!r} on {stream}/{partition}"
        await self._cursor_call("SetCursor", request, cursor_id, stream, partition, timeout, what)

    async def fetch_cursor(
        self,
        stream: str,
        partition: int,
        cursor_id: str,
        *,
        timeout: float | Default | None = DEFAULT,
    ) -> int | None:
        """The offset stored as cursor ``cursor_id`` (``None`` if there is none)."""
        request = pb.FetchCursorRequest(stream=stream, partition=partition, cursorId=cursor_id)
        what = f"FetchCursor {cursor_id!r} on {stream}/{partition}"
        resp = await self._cursor_call(
            "FetchCursor", request, cursor_id, stream, partition, timeout, what
        )
        offset = int(resp.offset)
        return None if offset < 0 else offset

    async def committed_offset(
        self,
        stream: str,
        name: str,
        *,
        partition: int | None = None,
        timeout: float | Default | None = DEFAULT,
    ) -> int | None:
        """The offset consumer ``name`` stored (its cursor) on ``partition`` of ``stream``
        (``None``: none), without a consumer; ``partition`` may be left out when the stream
        has one."""
        name = consumer_name(name)
        pid = await self._the_partition(stream, partition)
        return await self.fetch_cursor(stream, pid, name, timeout=timeout)

    async def store_offset(
        self,
        stream: str,
        name: str,
        offset: int,
        *,
        partition: int | None = None,
        timeout: float | Default | None = DEFAULT,
    ) -> None:
        """Store ``offset`` as consumer ``name``'s cursor on ``partition`` of ``stream``,
        without a consumer; returns once the cursor leader stored it."""
        name = consumer_name(name)
        offset = offset_to_store(offset)
        pid = await self._the_partition(stream, partition)
        await self.set_cursor(stream, pid, name, offset, timeout=timeout)

    async def _the_partition(self, stream: str, partition: int | None) -> int:
        if partition is not None:
            return partition
        ids = await self.partition_ids(stream)
        if len(ids) != 1:
            raise ConfigurationError(
                f"stream {stream!r} has {len(ids)} partitions: pass partition="
            )
        return ids[0]
