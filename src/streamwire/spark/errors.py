"""Errors raised by the Spark integration: :class:`streamwire.ConfigurationError`s, and
:class:`DataLossError` (a :class:`streamwire.StreamwireError`)."""

from __future__ import annotations

from streamwire import ConfigurationError, StreamwireError, TransportError

__all__ = (
    "BrokerUnavailableError",
    "DataLossError",
    "SinkIdentityError",
    "SinkSchemaError",
    "SourceSchemaError",
    "SparkConfigurationError",
)


class SparkConfigurationError(ConfigurationError):
    """A Spark option, offset or argument of the streamwire integration is wrong."""


class SinkSchemaError(SparkConfigurationError):
    """The DataFrame handed to a streamwire sink has the wrong columns or types (checked on
    the driver before any Spark job runs), or a row breaks the schema contract (a null
    ``value``, found by the task that publishes it)."""


class SinkIdentityError(SparkConfigurationError):
    """A sink's write identity (the streaming query id or ``query_id``, a batch write's
    ``writeId``) was used before for other rows: the broker holds a later micro-batch of it
    than the one being written. Writing on would drop this batch's rows as already stored
    (RabbitMQ's deduplication) or interleave two writers; the task fails instead. Raised on
    an executor, so it fails the micro-batch; the message names what to change."""


class SourceSchemaError(SparkConfigurationError):
    """A schema given to the ``streamwire`` source (``spark.read.schema(...)``) is not a
    choice of its columns: a name it does not have, another type, a column twice, or
    ``NOT NULL`` on a column that can be null. Raised on the driver when the query is
    planned."""


class DataLossError(StreamwireError):
    """Offsets a read should include are no longer in the broker (retention deleted them, or
    the stream was recreated): raised when the read is planned, with ``failOnDataLoss`` on
    (the default). ``lost`` maps each partition to its ``(first, end)`` missing offsets."""

    def __init__(self, message: str, lost: dict[int, tuple[int, int]]) -> None:
        super().__init__(message)
        self.lost = lost


class BrokerUnavailableError(TransportError):
    """The broker refused, reset or did not answer the source for longer than its
    ``timeout`` (retried every ``fetchOffset.retryIntervalMs`` meanwhile): down, paused or
    unreachable. Raised on the driver (planning a micro-batch: the query stops) or in a task
    (opening a read: Spark retries the task). The message says for how long, and the last
    error."""
