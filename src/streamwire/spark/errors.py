"""Errors raised by the Spark integration (all :class:`streamwire.ConfigurationError`)."""

from __future__ import annotations

from streamwire import ConfigurationError

__all__ = ("SinkSchemaError", "SparkConfigurationError")


class SparkConfigurationError(ConfigurationError):
    """A Spark option, offset or argument of the streamwire integration is wrong."""


class SinkSchemaError(SparkConfigurationError):
    """The DataFrame handed to a streamwire sink has the wrong columns or types (checked on
    the driver before any Spark job runs), or a row breaks the schema contract (a null
    ``value``, found by the task that publishes it)."""
