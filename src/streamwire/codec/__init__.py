"""The shared, sans-IO codec layer: buffers, framing, checksums, typed headers, messages.

Nothing here performs I/O or imports asyncio; every protocol builds on it.
"""

from __future__ import annotations

from streamwire.codec.checksums import crc32, crc32c, verify, xxh3_64, xxh32
from streamwire.codec.framing import IGGY_HEADER, LENGTH_PREFIX_U32, FrameAccumulator, FrameSpec
from streamwire.codec.headers import HeaderInput, HeaderKind, HeaderValue, normalize_headers
from streamwire.codec.message import Confirmation, Message
from streamwire.codec.offset import Offset, OffsetKind, OffsetLike
from streamwire.codec.reader import Reader
from streamwire.codec.registry import ErrorRegistry, registry_for
from streamwire.codec.writer import Writer

__all__ = (
    "IGGY_HEADER",
    "Confirmation",
    "LENGTH_PREFIX_U32",
    "ErrorRegistry",
    "FrameAccumulator",
    "FrameSpec",
    "HeaderInput",
    "HeaderKind",
    "HeaderValue",
    "Message",
    "Offset",
    "OffsetKind",
    "OffsetLike",
    "Reader",
    "Writer",
    "crc32",
    "crc32c",
    "normalize_headers",
    "registry_for",
    "verify",
    "xxh3_64",
    "xxh32",
)
