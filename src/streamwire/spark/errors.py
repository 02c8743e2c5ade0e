"""Errors raised by the Spark integration (all :class:`streamwire.ConfigurationError`)."""

from __future__ import annotations

from streamwire import ConfigurationError

__all__ = ("SinkSchemaError", "SourceSchemaError", "SparkConfigurationError")


class SparkConfigurationError(ConfigurationError):
    """A Spark option, offset or argument of the streamwire integration is wrong."""


class SinkSchemaError(SparkConfigurationError):
    """The DataFrame handed to a streamwire sink has the wrong columns or types (checked on
    the driver before any Spark job runs), or a row breaks the schema contract (a null
    ``value``, found by the task that publishes it)."""


class SourceSchemaError(SparkConfigurationError):
    """A schema given to the ``streamwire`` source (``spark.read.schema(...)``) is not a
    choice of its columns: a name it does not have, another type, a column twice, or
    ``NOT NULL`` on a column that can be null. Raised on the driver when the query is
    planned."""
