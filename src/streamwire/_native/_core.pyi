# Types of the native extension (native/src); see streamwire._native.
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import Any, Final, overload

from streamwire.codec.headers import HeaderValue
from streamwire.codec.message import Message

ABI: Final[int]
__version__: Final[str]

_FrameRef = tuple[int, int, int, int, int, int, int, int, int, int, int]

def init(
    message: type[Message],
    decode_error: type[BaseException],
    checksum_error: type[BaseException],
    local_error: type[BaseException],
) -> None: ...
def make_message(
    value: bytes,
    key: bytes | None,
    headers: dict[str, HeaderValue],
    timestamp_us: int | None,
    offset: int | None,
    stream: str | None,
    partition: int | None,
    id: int | None,
) -> Message: ...
def rmq_decode_records(
    buf: bytes,
    start: int,
    end: int,
    first_offset: int,
    num_records: int,
    ts: int,
    stream: str,
    skip_below: int,
    amqp: bool,
    crc: int | None,
    record: Callable[[int, int, int], Message],
    sub_batch: Callable[[int, int], tuple[int, int, list[Message]]],
) -> list[Message]: ...
def lb_decode_message(raw: bytes) -> Message | None: ...
def h2_gather_data(
    buf: bytearray, start: int, stream: int, out: bytearray, budget: int, max_frame: int
) -> tuple[int, int]: ...
def lb_decode_grpc(buf: bytearray, start: int, limit: int) -> tuple[list[Message], int]: ...
def rmq_chunk_columns(
    buf: bytes,
    start: int,
    end: int,
    first_offset: int,
    num_records: int,
    skip_below: int,
    amqp: bool,
    crc: int | None,
) -> tuple[bytes, bytes, bytes] | None: ...
def rmq_publish_entries(
    first: int,
    bodies: Sequence[bytes],
    skip: bytes | bytearray,
    start: int,
    room: int,
    max_count: int,
    wrap: bool,
    head: int = -1,
) -> tuple[bytes, int, int, int, int] | None: ...
def rmq_bytes_total(values: object) -> int | None: ...
def rmq_sub_batch_records(bodies: object, wrap: bool) -> bytes | None: ...
def rmq_id_run(ids: object) -> bool | None: ...
def iggy_encode_batch(messages: Sequence[Any]) -> bytes | None: ...
def iggy_encode_runs(
    runs: list[tuple[list[bytes], bytes, int]], room: int = 0
) -> bytearray | None: ...
def iggy_locate_frames(
    buf: bytes | memoryview, start: int, end: int | None, frame: str
) -> FrameIndex: ...
def iggy_received_messages(
    frames: FrameIndex,
    stream: str,
    key_header: str | None,
    verify: bool,
    headers_and_key: Callable[[bytes, str | None], tuple[dict[str, HeaderValue], bytes | None]],
) -> list[Message]: ...
def lazy_futures(cls: type[Any], ledger: object, count: int) -> list[Any]: ...
def gc_track(obj: object) -> None: ...
def ready_iterator(
    ready: Any,
    owner: object,
    name: str,
    field: str,
    slow: Callable[[], Coroutine[Any, Any, Any]],
) -> AsyncIterator[Any]: ...
def frame_buffer(size: int) -> tuple[bytes, memoryview]:
    """A new ``bytes`` of ``size`` bytes, not initialised, and a writable view of its
    storage holding no reference to it (native/src/buffer.rs)."""

class ReceivedMessage(Message):
    """The Iggy poll's messages: offset, id and empty headers made on first access
    (native/src/received.rs); created by ``init``, not instantiable."""

class FrameIndex(Sequence[_FrameRef]):
    @property
    def buf(self) -> bytes | memoryview: ...
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, index: int) -> _FrameRef: ...
    @overload
    def __getitem__(self, index: slice) -> list[_FrameRef]: ...
    def __iter__(self) -> Iterator[_FrameRef]: ...
