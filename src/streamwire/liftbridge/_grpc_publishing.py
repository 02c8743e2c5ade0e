"""Publishing one message through Liftbridge's gRPC API (the Publish and PublishToSubject
RPCs) rather than onto NATS: :class:`GrpcPublishing` is the part of
:class:`~streamwire.liftbridge.client.Client` that does this (a producer's ``transport="grpc"``
publisher uses its unary Publish too); the client provides the gRPC calls it declares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streamwire._default import DEFAULT, Default
from streamwire.codec.headers import HeaderInput, normalize_headers
from streamwire.errors import ConfigurationError
from streamwire.liftbridge._calls import UnaryCalls
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import ACK_ERRORS, AckErrorCode, UnknownLiftbridgeError
from streamwire.liftbridge.protocol.messages import (
    NO_EXPECTED_OFFSET,
    Ack,
    AckPolicy,
    ack_from_pb,
    headers_to_wire,
    is_literal_subject,
)

__all__ = ("GrpcPublishing",)


if TYPE_CHECKING:  # the client's unary calls, which these methods use
    _Calls = UnaryCalls
else:
    _Calls = object


class GrpcPublishing(_Calls):
    """Publish and PublishToSubject, one message and its ack per call."""

    async def publish(
        self,
        stream: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
        partition: int = 0,
        ack_policy: AckPolicy = AckPolicy.LEADER,
        expected_offset: int = NO_EXPECTED_OFFSET,
        timeout: float | Default | None = DEFAULT,
    ) -> Ack | None:
        """Publish one message through the gRPC API (the Publish RPC) rather than straight
        onto NATS, and return its ack (``None`` with :attr:`AckPolicy.NONE`).

        Slower than a :meth:`producer` (one round trip per message, through a server), but
        it needs no NATS connection of the client's own: the way to publish when NATS is not
        reachable from here, as go-liftbridge publishes. Error acks raise their typed error
        (``IncorrectOffset``, ``TooLarge``, ...); a missing stream raises ``StreamNotFound``.

        Cancellation: the message may or may not have been stored.
        """
        request = pb.PublishRequest(
            key=key or b"",
            value=value,
            stream=stream,
            partition=partition,
            headers=headers_to_wire(normalize_headers(headers)),
            ackPolicy=pb.AckPolicy.ValueType(ack_policy),
            expectedOffset=expected_offset,
        )
        what = f"Publish to {stream}/{partition}"
        response = await self._publish_request(request, timeout=self._timeout(timeout), what=what)
        return self._ack_of(response, what)

    async def _publish_request(
        self, request: pb.PublishRequest, *, timeout: float | None, what: str
    ) -> Any:
        """One unary Publish; a wrong expected offset raises IncorrectOffset."""
        try:
            return await self._call("Publish", request, timeout=timeout, what=what)
        except UnknownLiftbridgeError as exc:
            # v1.9.0 answers a wrong expected offset with status UNKNOWN, not an error ack
            if "incorrect expected offset" in str(exc):
                raise ACK_ERRORS.from_code(AckErrorCode.INCORRECT_OFFSET, what) from exc
            raise

    async def publish_to_subject(
        self,
        subject: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
        ack_policy: AckPolicy = AckPolicy.LEADER,
        timeout: float | Default | None = DEFAULT,
    ) -> Ack | None:
        """Publish one message to a NATS ``subject`` through the gRPC API (PublishToSubject):
        every stream attached to that subject stores it; returns the ack of one of them
        (``None`` with :attr:`AckPolicy.NONE`, or when no stream listens)."""
        if not is_literal_subject(subject):
            raise ConfigurationError(f"not a subject one can publish to: {subject!r}")
        request = pb.PublishToSubjectRequest(
            key=key or b"",
            value=value,
            subject=subject,
            headers=headers_to_wire(normalize_headers(headers)),
            ackPolicy=pb.AckPolicy.ValueType(ack_policy),
        )
        what = f"PublishToSubject {subject!r}"
        response = await self._call(
            "PublishToSubject", request, timeout=self._timeout(timeout), what=what
        )
        return self._ack_of(response, what)

    @staticmethod
    def _ack_of(response: Any, what: str) -> Ack | None:
        if not response.HasField("ack"):
            return None
        ack = ack_from_pb(response.ack)
        if ack.ack_error:
            raise ACK_ERRORS.from_code(ack.ack_error, what)
        return ack
