"""The source's optional message-property columns (docs/spark.md), shared by the schema checks
(``_schema``) and the batch builders (``_arrow``) without either importing the other."""

from __future__ import annotations

from typing import Final

__all__ = ("PROPERTY_COLUMNS",)

#: The message properties a user schema may pick, with their types: ids as text (a uuid in
#: its canonical form, an int in decimal, bytes in hex), times as timestamps.
PROPERTY_COLUMNS: Final = {
    "message_id": "string",
    "user_id": "binary",
    "to": "string",
    "subject": "string",
    "reply_to": "string",
    "correlation_id": "string",
    "content_type": "string",
    "content_encoding": "string",
    "absolute_expiry_time": "timestamp",
    "creation_time": "timestamp",
    "group_id": "string",
    "group_sequence": "bigint",
    "reply_to_group_id": "string",
}
