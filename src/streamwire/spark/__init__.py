"""Apache Spark integration: a ``foreachBatch`` sink and the ``streamwire`` data source.

* :func:`foreach_batch_sink` publishes every micro-batch of a streaming query from the
  executors, exactly-once on RabbitMQ Streams, Liftbridge and Iggy.
* :class:`StreamwireDataSource` (format ``"streamwire"``, PySpark >= 4.0 Python Data
  Source API) reads streams in batch and streaming queries and writes them; register it
  with :func:`register`, or let PySpark find the ``pyspark_streamwire`` module.

Needs the ``spark`` extra (``pip install 'streamwire[spark]'``: pyspark and pyarrow) and
Java 17+. This package uses the unified streamwire API only; see ``docs/spark.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamwire._extras import require

require("streamwire.spark", "spark", "pyspark", "pyarrow")

from streamwire.spark.errors import (
    BrokerUnavailableError,
    DataLossError,
    SinkIdentityError,
    SinkSchemaError,
    SourceSchemaError,
    SparkConfigurationError,
)
from streamwire.spark.sink import (
    BatchMetrics,
    ForeachBatchSink,
    Guarantee,
    SinkMetrics,
    foreach_batch_sink,
)

if TYPE_CHECKING:
    from streamwire.spark.datasource import StreamwireDataSource

__all__ = (
    "BatchMetrics",
    "BrokerUnavailableError",
    "DataLossError",
    "ForeachBatchSink",
    "Guarantee",
    "SinkIdentityError",
    "SinkMetrics",
    "SinkSchemaError",
    "SourceSchemaError",
    "SparkConfigurationError",
    "StreamwireDataSource",
    "foreach_batch_sink",
    "register",
)


def register(spark: Any) -> None:
    """Register the ``streamwire`` data source with a SparkSession (not needed when the
    ``pyspark_streamwire`` module is importable: PySpark then registers it by itself)."""
    from streamwire.spark.datasource import StreamwireDataSource

    try:
        spark.dataSource.register(StreamwireDataSource)
    except Exception as exc:
        # pyspark 4.0 refuses a name its lookup of pyspark_* modules registered already
        condition = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
        if condition is None or condition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise


def __getattr__(name: str) -> Any:
    # the data source subclasses pyspark classes: import it (and pyspark) only on demand
    if name == "StreamwireDataSource":
        from streamwire.spark.datasource import StreamwireDataSource

        return StreamwireDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
