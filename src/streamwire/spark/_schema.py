"""The column contract of the sinks, and the source schema.

Sink input (names as in Spark's Kafka sink, so pipelines port over):

========== =================================== ==========
column     type                                required
========== =================================== ==========
value      binary (or string, sent as UTF-8)   yes
key        binary (or string)                  no
headers    map<string, binary> (or string)     no
========== =================================== ==========

Other columns are an error unless ``ignore_extra_columns`` is set.

The source reads :data:`SOURCE_SCHEMA_DDL`, or the columns a user schema picks from it
(:func:`source_projection`): Spark 4.3 does not prune a Python source's columns, and every
column a read carries costs Spark per row. A user schema may also pick the message
properties (:data:`PROPERTY_COLUMNS`, one column per
:class:`~streamwire.codec.properties.MessageProperties` field) and ``annotations``; they are
not among the default columns.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import streamwire
from streamwire.spark._property_columns import PROPERTY_COLUMNS
from streamwire.spark.errors import SinkSchemaError, SourceSchemaError

__all__ = (
    "PROPERTY_COLUMNS",
    "SOURCE_SCHEMA_DDL",
    "SinkLayout",
    "sink_layout",
    "source_projection",
)

SOURCE_SCHEMA_DDL: Final = (
    "value binary, key binary, headers map<string,binary>, stream string, "
    "partition int, offset long, timestamp timestamp"
)

_COLUMNS: Final = ("value", "key", "headers")

#: The source's columns and their types, as Spark spells them (``simpleString``).
_SOURCE_TYPES: Final = {
    "value": "binary",
    "key": "binary",
    "headers": "map<string,binary>",
    "stream": "string",
    "partition": "int",
    "offset": "bigint",
    "timestamp": "timestamp",
}
_SOURCE_TYPES.update(PROPERTY_COLUMNS)
_SOURCE_TYPES["annotations"] = "map<string,binary>"

#: The source's columns that are never null: a user schema may declare them ``NOT NULL``.
_NEVER_NULL: Final = frozenset({"value", "stream", "partition", "offset"})


@dataclass(frozen=True, slots=True)
class SinkLayout:
    """Where the sink finds its columns in a row (positions in the schema), and whether
    text needs encoding. Small and picklable: it travels with every task."""

    value: int
    key: int | None = None
    headers: int | None = None

    def message(self, row: Any, position: int) -> streamwire.Message:
        """The message for one row (a pyspark ``Row`` or a tuple in schema order)."""
        value = row[self.value]
        if value is None:
            raise SinkSchemaError(
                f"row {position} of this partition has a null 'value'; the sink publishes "
                "every row, so filter or fill nulls first"
            )
        if isinstance(value, str):
            value = value.encode()
        key = None
        if self.key is not None:
            key = row[self.key]
            if isinstance(key, str):
                key = key.encode()
        headers = None
        if self.headers is not None:
            raw = row[self.headers]
            if raw:
                headers = {str(k): v for k, v in raw.items() if v is not None}
        return streamwire.Message(value, key=key, headers=headers)


def _type_name(data_type: Any) -> str:
    return str(data_type.simpleString())


def sink_layout(schema: Any, *, ignore_extra_columns: bool = False) -> SinkLayout:
    """Check a DataFrame schema (a pyspark ``StructType``) against the sink contract and
    return the layout; raises :class:`SinkSchemaError` saying what is wrong."""
    from pyspark.sql.types import BinaryType, MapType, StringType, StructType

    if not isinstance(schema, StructType):
        raise SinkSchemaError(f"expected a StructType schema, got {type(schema).__name__}")
    names = [f.name for f in schema.fields]
    positions = {name: i for i, name in enumerate(names)}
    problems: list[str] = []
    if "value" not in positions:
        problems.append("the 'value' column (binary) is missing")
    text_or_binary = (BinaryType, StringType)
    for column in ("value", "key"):
        if column in positions:
            data_type = schema.fields[positions[column]].dataType
            if not isinstance(data_type, text_or_binary):
                problems.append(
                    f"column '{column}' must be binary (or string), not {_type_name(data_type)}"
                )
    if "headers" in positions:
        data_type = schema.fields[positions["headers"]].dataType
        if not (
            isinstance(data_type, MapType)
            and isinstance(data_type.keyType, StringType)
            and isinstance(data_type.valueType, text_or_binary)
        ):
            problems.append(
                f"column 'headers' must be map<string,binary>, not {_type_name(data_type)}"
            )
    extra = [n for n in names if n not in _COLUMNS]
    if extra and not ignore_extra_columns:
        problems.append(
            f"unexpected column(s) {_quoted(extra)}; the sink takes value, key and headers "
            "(select them, or set ignore_extra_columns / ignoreExtraColumns=true)"
        )
    duplicated = sorted({n for n in names if n in _COLUMNS and names.count(n) > 1})
    if duplicated:
        problems.append(f"duplicate column(s) {_quoted(duplicated)}")
    if problems:
        raise SinkSchemaError(
            "the DataFrame does not fit the streamwire sink: " + "; ".join(problems)
        )
    return SinkLayout(
        value=positions["value"], key=positions.get("key"), headers=positions.get("headers")
    )


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def source_projection(schema: Any) -> Any:
    """The Arrow schema of the source's batches for ``schema`` (a pyspark ``StructType``:
    the source's own, or a user schema that names some of its columns, in any order, with
    their types), exactly as pyspark's worker derives it; ``None`` is the source's own. Raises
    :class:`SourceSchemaError` saying what is wrong."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    if schema is None:
        from streamwire.spark._arrow import SCHEMA

        return SCHEMA
    if not isinstance(schema, StructType):
        raise SourceSchemaError(f"expected a StructType schema, got {type(schema).__name__}")
    names = [f.name for f in schema.fields]
    problems: list[str] = []
    if not names:
        problems.append("it names no column")
    unknown = [n for n in names if n not in _SOURCE_TYPES]
    if unknown:
        problems.append(f"the source has no column {_quoted(unknown)}")
    for field in schema.fields:
        expected = _SOURCE_TYPES.get(field.name)
        if expected is not None and _type_name(field.dataType) != expected:
            problems.append(
                f"column '{field.name}' is {expected}, not {_type_name(field.dataType)}"
            )
        if expected is not None and not field.nullable and field.name not in _NEVER_NULL:
            problems.append(f"column '{field.name}' can be null: it cannot be NOT NULL")
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        problems.append(f"duplicate column(s) {_quoted(duplicated)}")
    if problems:
        raise SourceSchemaError(
            "the schema given to the streamwire source picks from its columns "
            f"({SOURCE_SCHEMA_DDL}, and the message properties "
            f"{', '.join(f'{k} {v}' for k, v in PROPERTY_COLUMNS.items())}, "
            "annotations map<string,binary>): " + "; ".join(problems)
        )
    return _utc_arrow_schema(to_arrow_schema, schema)


def _utc_arrow_schema(to_arrow_schema: Any, schema: Any) -> Any:
    """``to_arrow_schema`` with timestamps in UTC, as the worker of this pyspark derives it:
    ``timezone="UTC"`` since pyspark 4.1; 4.0 takes no timezone and makes them UTC by
    default (``timestamp_utc=True``)."""
    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    return to_arrow_schema(schema)
