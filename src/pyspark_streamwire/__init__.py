"""Lets PySpark (>= 4.0) register the ``streamwire`` data source by itself.

On its first data source lookup PySpark imports every top-level ``pyspark_*`` module and
registers its ``DefaultSource``. This module stays tiny: the data source (and pyspark) is
imported only when ``DefaultSource`` is looked up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamwire.spark.datasource import StreamwireDataSource as DefaultSource

__all__ = ("DefaultSource",)


def __getattr__(name: str) -> Any:
    if name == "DefaultSource":
        from streamwire.spark.datasource import StreamwireDataSource

        return StreamwireDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
