"""The values a sink publishes for one run of rows: a ``pyarrow.RecordBatch`` (what the
Arrow writers and ``mapInArrow`` hand over) or a sequence of rows (pyspark ``Row`` objects or
tuples in schema order, where PySpark has no Arrow writer).

From a record batch the work is per column, not per row: the ``value`` column becomes a list
of ``bytes`` in one call (a string column is viewed as binary: same buffers, its UTF-8
bytes); only rows with a key or headers become :class:`streamwire.Message` objects. A run
without keys and headers is a plain list of bodies, which producers take on their fastest
path (``send_many``). Bodies, keys and headers are exactly what
:meth:`~streamwire.spark._schema.SinkLayout.message` makes of the same rows.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, TypeAlias

import pyarrow as pa

import streamwire
from streamwire.spark._schema import SinkLayout
from streamwire.spark.errors import SinkSchemaError

__all__ = ("Run", "content_keyed", "run_values", "runs")

#: One run of rows: a record batch, or rows in schema order.
Run: TypeAlias = pa.RecordBatch | Sequence[Any]

#: Text types and the binary type with the same buffers (the text's UTF-8 bytes).
_AS_BINARY: Final = {
    pa.string(): pa.binary(),
    pa.large_string(): pa.large_binary(),
    pa.string_view(): pa.binary_view(),
}
_BINARY: Final = frozenset({pa.binary(), pa.large_binary(), pa.binary_view()})


def run_values(layout: SinkLayout, run: Run, first_position: int) -> list[Any]:
    """The values to publish for ``run`` (``bytes``, or :class:`streamwire.Message` where a
    row has a key or headers); ``first_position`` is the 0-based position of its first row
    in the partition (for errors). Raises :class:`SinkSchemaError` for a null ``value`` or
    a column of the wrong type."""
    if not isinstance(run, pa.RecordBatch):
        return [layout.message(row, first_position + i) for i, row in enumerate(run)]
    values = _bytes_column(run, layout.value, "value")
    if run.column(layout.value).null_count:
        nulls = run.column(layout.value).is_null().to_pylist()
        raise SinkSchemaError(
            f"row {first_position + nulls.index(True)} of this partition has a null 'value'; "
            "the sink publishes every row, so filter or fill nulls first"
        )
    keys = _bytes_column(run, layout.key, "key") if layout.key is not None else None
    headers = _headers_column(run, layout.headers) if layout.headers is not None else None
    if keys is None and headers is None:
        return values
    keys = keys or [None] * len(values)
    headers = headers or [None] * len(values)
    return [
        body if key is None and not hdrs else streamwire.Message(body, key=key, headers=hdrs)
        for body, key, hdrs in zip(values, keys, headers, strict=True)
    ]


def _first_row(item: Any) -> Any:
    """The first row of an input item (a record batch's, or the row itself); ``None`` for an
    empty record batch."""
    if isinstance(item, pa.RecordBatch):
        return item.slice(0, 1).to_pylist()[0] if item.num_rows else None
    return tuple(item)


def content_keyed(identity: str, items: Iterator[Any]) -> tuple[str, Iterator[Any]]:
    """``identity`` joined with a digest of the task's first row, and the task's input
    unchanged (what was read to find that row is handed back first).

    A batch write's identity (``writeId``) makes a rerun of the same write skip what the
    first run stored. Keyed by the first row too, a rerun with the same rows still does,
    while a write that reuses the ``writeId`` for other rows gets an identity of its own and
    stores them all, where it used to be taken for a rerun and lose the rows at positions the
    earlier write had stored."""
    read: list[Any] = []
    for item in items:
        read.append(item)
        row = _first_row(item)
        if row is not None:
            digest = hashlib.sha256(repr(row).encode()).hexdigest()[:16]
            return f"{identity}-{digest}", itertools.chain(read, items)
    return identity, iter(read)  # no row: nothing will be sent


def runs(items: Iterable[Any], rows_per_run: int = 1000) -> Iterator[Run]:
    """A task's input as runs: record batches as they come, rows (pyspark ``Row`` objects
    or tuples) gathered into lists of ``rows_per_run``."""
    rows: list[Any] = []
    for item in items:
        if isinstance(item, pa.RecordBatch):
            yield item
            continue
        rows.append(item)
        if len(rows) >= rows_per_run:
            yield rows
            rows = []
    if rows:
        yield rows


def _column(run: pa.RecordBatch, index: int, name: str) -> pa.Array:
    if not 0 <= index < run.num_columns:
        raise SinkSchemaError(f"column '{name}' (position {index}) is missing from the batch")
    return run.column(index)


def _bytes_column(run: pa.RecordBatch, index: int, name: str) -> list[Any]:
    """The column's values as ``bytes`` (``None`` for nulls)."""
    column = _column(run, index, name)
    binary = _AS_BINARY.get(column.type)
    if binary is not None:
        column = column.view(binary)
    elif column.type not in _BINARY:
        raise SinkSchemaError(f"column '{name}' must be binary (or string), not {column.type}")
    values: list[Any] = column.to_pylist()
    return values


def _headers_column(run: pa.RecordBatch, index: int) -> list[Any] | None:
    """Each row's headers as a dict without null values (``None``: no row has headers)."""
    column = _column(run, index, "headers")
    data_type = column.type
    if not (
        pa.types.is_map(data_type)
        and data_type.key_type in _AS_BINARY
        and (data_type.item_type in _AS_BINARY or data_type.item_type in _BINARY)
    ):
        raise SinkSchemaError(f"column 'headers' must be map<string,binary>, not {data_type}")
    if column.null_count == len(column):
        return None
    return [
        {str(k): v for k, v in pairs if v is not None} if pairs else None
        for pairs in column.to_pylist()
    ]
